"""The board runner: the pending tasks of a board as jobs on an executor, each result a row, the files current.

    from agent.board import EXECUTORS
    from agent.board.runner import BoardRunner
    runner = BoardRunner(board, "results", EXECUTORS.make("local", device="cpu", gpus=None, workers=2))
    board = runner.run()          # Ctrl-C stops it: running tasks store themselves as interrupted

Running a board again under its name skips the tasks already finished,
continues interrupted runs (`kgen optimize --resume`), and retries the rest;
a task whose run finished while the board was killed is collected, not rerun.
"""

from __future__ import annotations

import dataclasses
import fcntl
import json
from pathlib import Path
from typing import Callable

from agent.board.executor import FINISHED, STARTED, Executor, JobEvent
from agent.board.files import board_dir, save_board
from agent.board.job import Job
from agent.board.records import (ERROR, FINISHED_RUN, FINISHED_VERIFY, HARNESS_ERROR, INTERRUPTED, MISSING,
                                 Leaderboard, LeaderboardError, Row, row_from_run)
from agent.records import Run
from agent.store import Store

STOP_GRACE_S = 60.0   # after Ctrl-C, how long a task may take to store itself as interrupted


class BoardRunner:
    """Runs the pending tasks of a board on an executor and keeps the board's files current."""

    def __init__(self, board: Leaderboard, results_dir: str | Path, executor: Executor, *,
                 kernels: dict[str, Path | tuple[Path, ...] | str] | None = None,
                 on_start: Callable[[Row, str], None] | None = None,
                 on_row: Callable[[Row], None] | None = None):
        self.board = board
        self.results_dir = Path(results_dir)
        self.store = Store(self.results_dir)
        self.executor = executor
        self.kernels = kernels or {}
        self.on_start = on_start        # (row, where it runs)
        self.on_row = on_row
        self.folder = board_dir(self.results_dir, board.name)
        self.interrupted = False

    # -- planning --

    def pending(self) -> list[Row]:
        """Rows to run now; finished rows are kept, and runs a killed board left finished are collected."""
        todo = []
        for row in self.board.rows:
            if self.is_finished(row):
                continue
            stored = self._stored_run(row.task)
            if stored is not None and stored.status in FINISHED_RUN:
                # the task finished but the board never heard (it was killed): take the result, run nothing
                found = row_from_run(self.store, stored, self.board.mode)
                if found.status != HARNESS_ERROR:   # kgen's own failure on it: run it again
                    self._record(found)
                    continue
            todo.append(row)
        return todo

    def is_finished(self, row: Row) -> bool:
        return row.status in (FINISHED_VERIFY if self.board.mode == "verify-only" else FINISHED_RUN)

    def _job_paths(self, task: str) -> tuple[Path, Path, Path]:
        jobs = self.folder / "jobs"
        return jobs / f"{task}.job.json", jobs / f"{task}.started.json", jobs / f"{task}.result.json"

    def _stored_run(self, task: str) -> Run | None:
        """The run a task's worker started last, when the store still has it."""
        _, started, _ = self._job_paths(task)
        if not started.exists():
            return None
        try:
            return self.store.load_run(json.loads(started.read_text())["run_id"])
        except (KeyError, ValueError, OSError):
            return None

    def _job(self, row: Row) -> Job | Row:
        """The job for a row, written to its file; or the row's result when there is nothing to run."""
        job_path, started_path, result_path = self._job_paths(row.task)
        job_path.parent.mkdir(parents=True, exist_ok=True)
        result_path.unlink(missing_ok=True)
        kind = "verify" if self.board.mode == "verify-only" else "optimize"
        kernel = None
        if kind == "verify":
            kernel = self.kernels.get(row.task)
            if not isinstance(kernel, (Path, tuple)):   # a tuple: the task's KernelBench samples
                return dataclasses.replace(row, status=MISSING, reason=str(kernel or "no kernel file"), correct=False)
        resume = None
        if kind == "optimize":
            stored = self._stored_run(row.task)
            if stored is not None and stored.status in ("running", INTERRUPTED):
                resume = stored.run_id
        if resume is None:
            started_path.unlink(missing_ok=True)
        # NOTE: runs go to this board's results folder, wherever the board was first run (it may have moved)
        config = {**self.board.config, "results_dir": str(self.results_dir)}
        job = Job(kind=kind, task=row.task, task_path=row.task_path, config=config,
                  result_path=str(result_path.resolve()), started_path=str(started_path.resolve()),
                  resume=resume, kernel_path=str(kernel.resolve()) if isinstance(kernel, Path) else None,
                  kernel_paths=[str(k.resolve()) for k in kernel] if isinstance(kernel, tuple) else None,
                  job_path=str(job_path.resolve()), log_path=str((self.folder / "logs" / f"{row.task}.log").resolve()))
        job_path.write_text(json.dumps(job.to_dict(), indent=2))
        return job

    # -- running --

    def run(self) -> Leaderboard:
        """Run every pending task; returns the board (Ctrl-C stops it: running tasks store themselves).

        Raises LeaderboardError when another kgen process is running this board.
        """
        self.folder.mkdir(parents=True, exist_ok=True)
        with open(self.folder / ".lock", "w") as lock:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                raise LeaderboardError(f"leaderboard {self.board.name} is being run by another kgen process (or by "
                                       "tasks it left running); wait for it, or choose another --name") from None
            self.executor.keep_open(lock.fileno())
            try:
                return self._run()
            finally:
                self.executor.close()

    def _run(self) -> Leaderboard:
        rows = {}
        for row in self.pending():
            try:
                job = self._job(row)
            except Exception as exc:   # a fault of the board itself on this task: a row, not the end
                job = dataclasses.replace(row, status=ERROR, reason=f"kgen failed: {type(exc).__name__}: {exc}")
            if isinstance(job, Row):
                self._record(job)
                continue
            rows[row.task] = row
            self.executor.submit(job)
        save_board(self.results_dir, self.board)
        try:
            for event in self.executor.results():
                self._handle(event, rows)
        except KeyboardInterrupt:
            self.interrupted = True
            self.executor.cancel()
            try:
                for event in self.executor.results(timeout_s=STOP_GRACE_S):
                    self._handle(event, rows)
            except KeyboardInterrupt:   # a second Ctrl-C: no more waiting
                pass
            finally:
                self.executor.close()
            for event in self.executor.results(timeout_s=5.0):   # the rows of the tasks just ended
                self._handle(event, rows)
        save_board(self.results_dir, self.board)
        return self.board

    def _handle(self, event: JobEvent, rows: dict[str, Row]) -> None:
        row = rows[event.job.task]
        if event.kind == STARTED:
            if self.on_start is not None:
                self.on_start(row, event.worker)
            return
        if event.kind != FINISHED:
            return
        try:
            result = self._row(row, event)
        except Exception as exc:   # a fault of the board itself on this task: a row, not the end
            result = dataclasses.replace(row, status=ERROR, reason=f"kgen failed: {type(exc).__name__}: {exc}")
        result.worker = event.worker
        self._record(result)

    def _record(self, row: Row) -> None:
        self.board.rows = [row if r.task == row.task else r for r in self.board.rows]
        save_board(self.results_dir, self.board)
        if self.on_row is not None:
            self.on_row(row)

    def _row(self, row: Row, event: JobEvent) -> Row:
        """The row a finished job makes: its stored run's figures, or why there is none."""
        again = f"interrupted; run the board again (--name {self.board.name}) to continue"
        outcome = event.outcome
        if outcome is not None and outcome.run_id:
            done = row_from_run(self.store, self.store.load_run(outcome.run_id), self.board.mode)
            if done.status == INTERRUPTED:
                done.reason = again
            return done
        stored = self._stored_run(row.task) if event.job.kind == "optimize" else None
        base = dataclasses.replace(row, run_id=stored.run_id if stored else "", wall_s=event.wall_s, correct=False)
        if outcome is not None:
            return dataclasses.replace(base, status=outcome.error or ERROR, reason=outcome.message)
        if self.interrupted:
            return dataclasses.replace(base, status=INTERRUPTED, reason=again)
        log = Path(event.job.log_path)
        return dataclasses.replace(base, status=ERROR, reason=f"the task's process {event.ended} without a result; "
                                                              f"see {log}: {_last_line(log)}")


def _last_line(path: Path, limit: int = 200) -> str:
    try:
        lines = [ln for ln in path.read_text(encoding="utf-8", errors="replace").splitlines() if ln.strip()]
    except OSError:
        return ""
    return lines[-1][:limit] if lines else ""
