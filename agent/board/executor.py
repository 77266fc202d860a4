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
