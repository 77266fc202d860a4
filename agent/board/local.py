"""The local executor: each job a `python -m agent.board.job` process, one worker per GPU (or CPU slot).

    from agent.board.local import LocalExecutor, plan_workers
    executor = LocalExecutor(plan_workers("cuda", gpus=None, workers=None, gpu_count=2))

One worker per GPU, with `CUDA_VISIBLE_DEVICES` set to that GPU, so the
verifier's and the profiler's own subprocesses (which inherit the
environment) time and profile on that GPU only, and two timings never share a
GPU. Pinning inside one process cannot give that: the environment is
process-wide and the sandboxed children read it. A process per task also keeps
one task's crash, hang or malformed file a row of the table, not the end of
the board. On a CPU `--workers N` runs N tasks at once (nothing is timed there).
"""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable

from agent.board.executor import FINISHED, STARTED, JobEvent, QueuedExecutor
from agent.board.job import Job, JobOutcome
from agent.board.records import LeaderboardError
from agent.store import utc_now
from verifier.sandbox import describe_exit


@dataclass(frozen=True)
class Worker:
    """One slot that runs tasks one after another: a GPU, or a CPU slot."""

    label: str                          # "GPU 1", "cpu 0"
    env: dict[str, str] = field(default_factory=dict)   # set for its processes (CUDA_VISIBLE_DEVICES)


def plan_workers(device: str, *, gpus: Iterable[int] | None, workers: int | None, gpu_count: int,
                 visible: str | None = None) -> list[Worker]:
    """The workers for a board: one per GPU on CUDA (--gpus picks them), --workers N on a CPU.

    `visible` is this process's CUDA_VISIBLE_DEVICES: --gpus indexes the GPUs
    it exposes, and each worker's processes see exactly one of them.
    """
    if workers is not None and workers < 1:
        raise LeaderboardError(f"--workers must be at least 1, got {workers}")
    if device != "cuda":
        if gpus:
            raise LeaderboardError("--gpus needs a CUDA device; this board runs on the CPU (use --workers N)")
        return [Worker(f"cpu {i}") for i in range(workers or 1)]
    chosen = list(range(gpu_count)) if gpus is None else list(gpus)
    if not chosen:
        raise LeaderboardError("no GPU to run on")
    for g in chosen:
        if not 0 <= g < gpu_count:
            raise LeaderboardError(f"--gpus {g}: torch sees {gpu_count} GPU(s) here (0..{gpu_count - 1})")
    if len(set(chosen)) != len(chosen):
        raise LeaderboardError("--gpus names a GPU twice: two workers on one GPU would time each other's kernels")
    if workers is not None:
        if workers > len(chosen):
            raise LeaderboardError(f"--workers {workers}: each worker owns one GPU and {len(chosen)} are chosen "
                                   "(two timings on one GPU would both be wrong)")
        chosen = chosen[:workers]
    ids = [v.strip() for v in visible.split(",")] if visible else None
    return [Worker(f"GPU {g}", {"CUDA_VISIBLE_DEVICES": ids[g] if ids and g < len(ids) else str(g)})
            for g in chosen]


def _project_root() -> Path:
    return Path(__file__).resolve().parent.parent.parent


class LocalExecutor(QueuedExecutor):
    """Today's board: a thread per worker takes the next job and runs it as a subprocess pinned to its GPU."""

    name = "local"

    def __init__(self, workers: list[Worker]):
        if not workers:
            raise LeaderboardError("no worker to run on")
        self.workers = workers
        self._init_queues()
        self._stop = threading.Event()
        self._procs: dict[str, subprocess.Popen] = {}   # task -> its running process
        self._fds: tuple[int, ...] = ()

    @property
    def slots(self) -> list[str]:
        return [w.label for w in self.workers]

    def keep_open(self, fd: int) -> None:
        self._fds = (*self._fds, fd)

    def _loops(self) -> list[tuple[str, tuple]]:
        return [(f"kgen-board-{w.label}", (w,)) for w in self.workers]

    def cancel(self) -> None:
        self._stop.set()
        self._drop_queued()
        with self._lock:
            procs = list(self._procs.values())
        for proc in procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGINT)

    def close(self) -> None:
        self._stop.set()
        with self._lock:
            procs = list(self._procs.values())
        for proc in procs:
            if proc.poll() is None:
                try:
                    os.killpg(proc.pid, signal.SIGKILL)   # its own session: the group is the task's processes
                except ProcessLookupError:
                    pass
        for t in self._threads:
            t.join(timeout=5.0)

    # -- one worker --

    def _work(self, worker: Worker) -> None:
        while not self._stop.is_set():
            try:
                job = self._jobs.get(timeout=0.2)
            except queue.Empty:
                continue
            if self._stop.is_set():    # taken while cancel emptied the queue: dropped like the rest
                with self._lock:
                    self._outstanding -= 1
                return
            self._events.put(JobEvent(STARTED, job, worker.label))
            started = time.monotonic()
            try:
                ended = describe_exit(self._run(job, worker))
            except Exception as exc:   # the process could not be started: a row that says so
                ended = f"could not be started: {type(exc).__name__}: {exc}"
            outcome = None
            result = Path(job.result_path)
            if result.exists():
                try:
                    outcome = JobOutcome.from_dict(json.loads(result.read_text()))
                except (ValueError, TypeError) as exc:
                    ended = f"{ended} with an unreadable result ({type(exc).__name__}: {exc})"
            # NOTE: the event first: results() ends when nothing is outstanding and no event is queued
            self._events.put(JobEvent(FINISHED, job, worker.label, outcome=outcome, ended=ended,
                                      wall_s=time.monotonic() - started))
            with self._lock:
                self._outstanding -= 1

    def _run(self, job: Job, worker: Worker) -> int:
        env = dict(os.environ)
        env.update(worker.env)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(_project_root()), env.get("PYTHONPATH", "")) if p)
        log_path = Path(job.log_path)
        log_path.parent.mkdir(parents=True, exist_ok=True)
        with open(log_path, "a", encoding="utf-8") as log:
            log.write(f"== {utc_now()} {job.kind} {job.task} on {worker.label}"
                      + (f" (resuming {job.resume})" if job.resume else "") + "\n")
            log.flush()
            # NOTE: a session of its own: Ctrl-C reaches the board only, which passes one SIGINT on to each
            # task so that it stores itself as interrupted (a second one could cut that short). The task
            # holds the board's lock too, so that a task outliving a killed board keeps others out.
            proc = subprocess.Popen([sys.executable, "-m", "agent.board.job", job.job_path], env=env,
                                    stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                    start_new_session=True, pass_fds=self._fds)
            with self._lock:
                self._procs[job.task] = proc
            try:
                return proc.wait()
            finally:
                with self._lock:
                    self._procs.pop(job.task, None)
