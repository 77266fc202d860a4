"""Where a board's jobs run: the `Executor` interface the runner drives, and the events it reports.

    executor = EXECUTORS.make("local", device="cuda", gpus=(0, 1), workers=None)
    for job in jobs:
        executor.submit(job)
    for event in executor.results():       # "started" and "finished", as they happen
        ...
    executor.close()

An executor runs each submitted Job somehow (agent.board.local: one process
per job, one worker per GPU; agent.board.ray: agent.board.job.run_job in a
thread here, its GPU calls on a cluster's GPU actors) and reports what
happened as JobEvents. It decides
nothing about the board: the runner (agent.board.runner) writes the job files,
turns each finished event into a row and keeps the board's files current.

NOTE: every executor keeps the rule that makes a board's timings honest: two
jobs never time on one GPU at once.
"""

from __future__ import annotations

import abc
import queue
import threading
import time
from dataclasses import dataclass
from typing import Iterator

from agent.board.job import Job, JobOutcome

STARTED = "started"
FINISHED = "finished"


@dataclass
class JobEvent:
    """Something that happened to a submitted job."""

    kind: str                           # STARTED or FINISHED
    job: Job
    worker: str                         # where it runs: "GPU 1", "cpu 0", a node's name
    outcome: JobOutcome | None = None   # FINISHED: what the job reported; None when it reported nothing
    ended: str = ""                     # FINISHED without an outcome: how it ended ("exited with code 1")
    wall_s: float = 0.0                 # FINISHED: seconds from start to end


class Executor(abc.ABC):
    """Runs jobs, several at once where it has the room, and reports their events in order of happening."""

    name: str = ""

    @property
    @abc.abstractmethod
    def slots(self) -> list[str]:
        """Where jobs run at once ("GPU 0", "GPU 1"): what the board tells a person before it starts."""

    @abc.abstractmethod
    def submit(self, job: Job) -> None:
        """Queue `job`; it starts when a slot is free. The job file is already written (job.job_path)."""

    @abc.abstractmethod
    def results(self, timeout_s: float | None = None) -> Iterator[JobEvent]:
        """Events as they happen, until every submitted job has finished (or was dropped by cancel), or
        `timeout_s` seconds passed. Safe to call again after a KeyboardInterrupt: events are not lost."""

    @abc.abstractmethod
    def cancel(self) -> None:
        """Stop: queued jobs are dropped (no events), running ones are asked to stop once (each stores its run
        as interrupted and finishes)."""

    @abc.abstractmethod
    def close(self) -> None:
        """End whatever still runs, at once, and free what the executor holds. Idempotent."""

    def keep_open(self, fd: int) -> None:
        """A file descriptor the jobs must hold while they run (the board's lock, so that a job outliving a
        killed board keeps other sessions out). Executors whose jobs run on other machines ignore it."""


class QueuedExecutor(Executor):
    """An executor whose own threads take jobs from one queue and report their events on another.

    The queueing, the count of jobs not yet finished, results() and dropping the queued jobs on cancel are
    the same for every such executor (local, ray); a subclass calls _init_queues() and provides _loops()
    (one (thread name, args) per thread) and _work(*args), which decrements _outstanding under _lock once a
    job it took has finished (or is dropped)."""

    def _init_queues(self) -> None:
        self._jobs: queue.Queue[Job] = queue.Queue()
        self._events: queue.Queue[JobEvent] = queue.Queue()
        self._lock = threading.Lock()
        self._outstanding = 0       # submitted, not yet reported finished (nor dropped)
        self._threads: list[threading.Thread] = []

    @abc.abstractmethod
    def _loops(self) -> list[tuple[str, tuple]]:
        """(thread name, arguments of _work) for each thread that takes jobs."""

    @abc.abstractmethod
    def _work(self, *args) -> None:
        """One thread's loop: take jobs from _jobs until stopped, put their events on _events."""

    def submit(self, job: Job) -> None:
        with self._lock:
            self._outstanding += 1
        self._jobs.put(job)
        if not self._threads:   # started with the first job; they end on cancel or close
            self._threads = [threading.Thread(target=self._work, args=args, name=name, daemon=True)
                             for name, args in self._loops()]
            for t in self._threads:
                t.start()

    def results(self, timeout_s: float | None = None) -> Iterator[JobEvent]:
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        while True:
            with self._lock:
                if self._outstanding == 0 and self._events.empty():
                    return
            if deadline is not None and time.monotonic() >= deadline:
                return
            try:
                # NOTE: a short wait, so that Ctrl-C reaches the caller promptly
                event = self._events.get(timeout=0.2)
            except queue.Empty:
                continue
            yield event

    def _drop_queued(self) -> None:
        """Drop the jobs no thread has taken yet; they count as done."""
        while True:
            try:
                self._jobs.get_nowait()
            except queue.Empty:
                break
            with self._lock:
                self._outstanding -= 1
