"""The board runner behind the Executor interface, with an executor that runs nothing: each finished job a row.

    .venv/bin/python -m pytest tests/agent/test_board_runner.py -q
"""

from __future__ import annotations

import json
from pathlib import Path

from agent.board.executor import FINISHED, STARTED, Executor, JobEvent
from agent.board.files import BOARD_JSON, board_dir, open_board
from agent.board.job import Job, JobOutcome
from agent.board.records import ERROR, PENDING, TASK_ERROR
from agent.board.runner import BoardRunner


class ScriptedExecutor(Executor):
    """Reports, for each job, the outcome scripted for its task (None: the process left none)."""

    name = "scripted"

    def __init__(self, outcomes: dict[str, JobOutcome | None]):
        self.outcomes = outcomes
        self.submitted: list[Job] = []
        self.closed = False
        self.kept: list[int] = []

    @property
    def slots(self) -> list[str]:
        return ["node 0"]

    def keep_open(self, fd: int) -> None:
        self.kept.append(fd)

    def submit(self, job: Job) -> None:
        self.submitted.append(job)

    def results(self, timeout_s=None):
        while self.submitted:
            job = self.submitted.pop(0)
            yield JobEvent(STARTED, job, "node 0")
            yield JobEvent(FINISHED, job, "node 0", outcome=self.outcomes[job.task], ended="exited with code 1",
                           wall_s=2.5)

    def cancel(self) -> None:
        self.submitted.clear()

    def close(self) -> None:
        self.closed = True


def make_board(tmp_path: Path, names: list[str]):
    paths = []
    for name in names:
        path = tmp_path / "suite" / f"{name}.py"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("# a task\n")
        paths.append(path)
    return open_board(tmp_path / "results", name="b", suite=tmp_path / "suite", task_paths=paths, mode="optimize",
                      config={"backend": "triton"}, device="cpu", gpu="")


def test_each_finished_job_becomes_a_row_saying_what_happened(tmp_path):
    board = make_board(tmp_path, ["bad", "dies"])
    executor = ScriptedExecutor({"bad": JobOutcome(error=TASK_ERROR, message="bad: no Model"), "dies": None})
    started = []
    runner = BoardRunner(board, tmp_path / "results", executor, on_start=lambda row, where: started.append(where))
    board = runner.run()

    rows = {r.task: r for r in board.rows}
    assert (rows["bad"].status, rows["bad"].reason) == (TASK_ERROR, "bad: no Model")
    assert rows["dies"].status == ERROR and "exited with code 1 without a result" in rows["dies"].reason
    assert {r.worker for r in board.rows} == {"node 0"} and started == ["node 0", "node 0"]
    assert executor.closed and executor.kept        # the board's lock was offered to the jobs, and freed after
    stored = json.loads((board_dir(tmp_path / "results", "b") / BOARD_JSON).read_text())
    assert [r["status"] for r in stored["rows"]] == [TASK_ERROR, ERROR]


def test_a_job_is_written_where_the_executor_can_read_it(tmp_path):
    board = make_board(tmp_path, ["one"])
    seen = []

    class Recording(ScriptedExecutor):
        def submit(self, job: Job) -> None:
            seen.append(Job.from_dict(json.loads(Path(job.job_path).read_text())))
            super().submit(job)

    BoardRunner(board, tmp_path / "results", Recording({"one": JobOutcome(error=ERROR, message="x")})).run()
    [job] = seen
    assert job.kind == "optimize" and job.task == "one" and job.resume is None
    assert job.config["results_dir"] == str(tmp_path / "results")     # runs go to the board's results folder
    assert Path(job.log_path).parent.name == "logs"


def test_a_job_cancelled_before_it_started_stays_pending(tmp_path):
    board = make_board(tmp_path, ["a", "b"])

    class Interrupting(ScriptedExecutor):
        def results(self, timeout_s=None):
            if timeout_s is None:       # the first call: Ctrl-C arrives before any event
                raise KeyboardInterrupt
            yield from super().results(timeout_s)

    runner = BoardRunner(board, tmp_path / "results", Interrupting({"a": None, "b": None}))
    board = runner.run()
    assert runner.interrupted
    assert [r.status for r in board.rows] == [PENDING, PENDING]   # dropped by cancel: run when the board resumes
