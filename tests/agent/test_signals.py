"""SIGTERM and SIGHUP stop kgen as Ctrl-C does: the run stored as interrupted, the resume command printed.

Real processes: `python -m agent optimize` (and `python -m agent leaderboard` over two small tasks, one
worker, the heuristic proposer on the CPU) started as a user would, the signal sent once its run (the
board's first task) is under way, the exit code, the stored run and the board's row read back; the
board is then continued with the command it printed, to its end.

    .venv/bin/python -m pytest tests/agent/test_signals.py -q
"""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from agent.store import Store

REPO = Path(__file__).resolve().parents[2]


def _start_optimize(results: Path) -> subprocess.Popen:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")}
    env.update(KGEN_RESULTS=str(results), PYTHONPATH=str(REPO))
    return subprocess.Popen([sys.executable, "-m", "agent", "optimize", "tasks/matmul.py", "--device", "cpu",
                             "--max-iters", "6", "--keep-going"], cwd=REPO, env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def _wait_for_a_stored_run(results: Path, proc: subprocess.Popen, limit_s: float = 60.0) -> None:
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        assert proc.poll() is None, proc.communicate()
        if (results / "kgen.sqlite").exists() and Store(results).list_runs():
            time.sleep(1.0)   # into the loop: the analysis or a verification is running
            return
        time.sleep(0.2)
    proc.kill()
    pytest.fail("no run was stored within a minute")


@pytest.mark.slow
@pytest.mark.parametrize("signum, code", [(signal.SIGTERM, 143), (signal.SIGHUP, 129)], ids=["SIGTERM", "SIGHUP"])
def test_a_stop_signal_stores_the_run_as_interrupted_and_resumable(tmp_path, signum, code):
    results = tmp_path / "results"
    proc = _start_optimize(results)
    _wait_for_a_stored_run(results, proc)
    proc.send_signal(signum)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == code, (out[-800:], err[-1500:])
    [run] = Store(results).list_runs()
    assert run.status == "interrupted", run.stop_reason
    assert f"kgen optimize --resume {run.run_id}" in out
    assert signal.Signals(signum).name in err


def test_exit_code_names_the_signal_only_for_an_interrupted_command(monkeypatch):
    from agent import cli

    monkeypatch.setattr(cli, "_received", [])
    assert cli.exit_code(130) == 130 and cli.exit_code(0) == 0
    monkeypatch.setattr(cli, "_received", [signal.SIGTERM])
    assert cli.exit_code(130) == 143
    assert cli.exit_code(1) == 1     # a command that finished anyway keeps its own verdict


# ---- kgen leaderboard -----------------------------------------------------------------------------

BOARD = "stopped"


def _board_argv(results: Path, suite: Path) -> list[str]:
    # NOTE: one worker and --keep-going: the first task is still in its loop when the signal comes
    return [sys.executable, "-m", "agent", "leaderboard", str(suite), "--name", BOARD, "--results", str(results),
            "--device", "cpu", "--proposer", "heuristic", "--max-iters", "3", "--workers", "1", "--keep-going"]


def _start_board(results: Path, suite: Path) -> subprocess.Popen:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")}
    env.update(PYTHONPATH=str(REPO))
    return subprocess.Popen(_board_argv(results, suite), cwd=REPO, env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def _wait_for_a_running_task(results: Path, proc: subprocess.Popen, limit_s: float = 90.0) -> str:
    """The run id of the board's first task, once its loop is under way."""
    started = results / "leaderboards" / BOARD / "jobs" / "gelu.started.json"
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        assert proc.poll() is None, proc.communicate()
        if started.exists() and started.read_text().strip():
            time.sleep(1.5)   # into the loop: the analysis or a verification is running
            return json.loads(started.read_text())["run_id"]
        time.sleep(0.2)
    proc.kill()
    pytest.fail(f"the board's first task did not start within {limit_s:.0f} s")


@pytest.fixture
def two_tasks(tmp_path) -> Path:
    suite = tmp_path / "suite.txt"
    suite.write_text(f"{REPO / 'tasks' / 'gelu.py'}\n{REPO / 'tasks' / 'softmax.py'}\n")
    return suite


@pytest.mark.slow
@pytest.mark.parametrize("signum, code", [(signal.SIGTERM, 143), (signal.SIGHUP, 129)], ids=["SIGTERM", "SIGHUP"])
def test_a_stop_signal_to_a_board_marks_its_running_task_interrupted(tmp_path, two_tasks, signum, code):
    from agent.board.files import load_board

    results = tmp_path / "results"
    proc = _start_board(results, two_tasks)
    run_id = _wait_for_a_running_task(results, proc)
    proc.send_signal(signum)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == code, (out[-800:], err[-1500:])
    assert Store(results).load_run(run_id).status == "interrupted"
    rows = {r.task: r for r in load_board(results, BOARD).rows}
    assert rows["gelu"].status == "interrupted" and rows["gelu"].run_id == run_id, rows["gelu"]
    assert f"continue with: kgen leaderboard {two_tasks} --name {BOARD} --results {results}" in err, err[-1500:]


@pytest.mark.slow
def test_a_board_stopped_by_sigterm_finishes_when_run_again_under_its_name(tmp_path, two_tasks):
    from agent.board.files import load_board

    results = tmp_path / "results"
    proc = _start_board(results, two_tasks)
    run_id = _wait_for_a_running_task(results, proc)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=120)
    # the command it printed, as printed: the board's stored settings fill in the rest (cpu, heuristic, 3 rounds)
    printed = next(line for line in err.splitlines() if "continue with: " in line).split("continue with: ", 1)[1]
    argv = shlex.split(printed)
    assert argv[:2] == ["kgen", "leaderboard"], printed
    again = subprocess.run([sys.executable, "-m", "agent", *argv[1:]], cwd=REPO, text=True, capture_output=True,
                           timeout=600, env={**{k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")},
                                             "PYTHONPATH": str(REPO)})
    assert again.returncode == 0, (again.stdout[-800:], again.stderr[-1500:])
    rows = {r.task: r for r in load_board(results, BOARD).rows}
    assert {r.status for r in rows.values()} <= {"succeeded", "stopped"}, rows
    assert rows["gelu"].run_id == run_id   # the interrupted run continued, not a new one
    assert Store(results).load_run(run_id).status in ("succeeded", "stopped")
