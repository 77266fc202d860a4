"""One task of a board, in a process of its own: the job file in, the outcome file out.

    python -m agent.board.job JOB.json      # what each local worker runs (agent.board.local)

A job is JSON (`Job`): optimize a task (`kgen optimize`, resuming a run when
told), or score one kernel file (`--verify-only`: a run of one attempt with
proposer "none", kept by the same bookkeeping as `optimize`'s, agent.lifecycle).
The process writes `{"run_id"}` to `started_path` as soon as its run exists and
a `JobOutcome` to `result_path` at the end; a bad task or a device that cannot
be had is an outcome, not a crash. The Ray executor calls `run_job` in a
thread of the board's process, with the GPU calls routed to its actors
(`calls`), and reads the same outcome.
"""

from __future__ import annotations

import dataclasses
import json
import sys
import time
from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agent.board.records import ERROR, INTERRUPTED, TASK_ERROR
from agent.records import Attempt, Run
from agent.store import Store, utc_now

JOB_KINDS = ("optimize", "verify")


@dataclass
class Job:
    """What one worker process is asked to do; written as JSON, read by `python -m agent.board.job`."""

    kind: str                   # one of JOB_KINDS
    task: str
    task_path: str
    config: dict[str, Any]      # OptimizeConfig.to_dict()
    result_path: str            # where the process writes its JobOutcome
    started_path: str           # where it writes {"run_id"} as soon as the run exists
    resume: str | None = None   # a run id to continue
    kernel_path: str | None = None  # verify: the kernel file to score
    kernel_paths: list[str] | None = None   # verify: KernelBench samples of the task, each scored (agent.kernelbench.samples)
    job_path: str = ""          # where this job is written as JSON ("" until it is)
    log_path: str = ""          # where the process's progress and errors go

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "Job":
        return cls(**data)


@dataclass
class JobOutcome:
    """What a job ended with: the run it stored, or why there is none."""

    run_id: str = ""            # the stored run; "" when none was stored
    error: str = ""             # a row status (TASK_ERROR, ERROR, INTERRUPTED) when no run was stored
    message: str = ""           # one line, with the error

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "JobOutcome":
        return cls(**data)


def score_kernel(task_path: str | Path, kernel_path: str | Path, config, store: Store, *, verify_fn=None,
                 analyze_fn=None, machine: tuple[str, str] | None = None, profile_fn=None) -> Run:
    """Verify one existing kernel and store it as a run of one attempt (proposer "none").

    Raises TaskError for an unusable task, ValueError for a device that cannot
    be had; a bad kernel is a stored verdict. `verify_fn`, `analyze_fn` and
    `machine` are optimize()'s: the GPU calls elsewhere (agent.board.ray); a
    scored kernel is not profiled (`profile_fn` is taken and left unused). A
    correct one gets the ncu cross-check of its claimed time where it was timed
    here (agent.lifecycle.cross_check_best); elsewhere the run says why not.
    """
    from agent import analysis
    from agent.lifecycle import cross_check_best, finish_run, record_best, start_run
    from verifier.task import load_task
    from verifier.verify import prestart_worker, verify

    # NOTE: the worker starts first: its start-up overlaps the task's loading and the device's look-up here
    with (nullcontext() if verify_fn else prestart_worker()) as worker:
        task = load_task(task_path)
        device, gpu = machine or analysis.device_and_gpu(config.device)
        data = Path(kernel_path).read_bytes()
        # a file that is not UTF-8 is a bad candidate, not kgen's error: it gets a verdict
        source = data.decode("utf-8", errors="replace")
        run = start_run(store, task, config, proposer="none", device=device, gpu=gpu,
                        extra={"kernel_path": str(Path(kernel_path).resolve())})
        started = time.monotonic()
        begun = utc_now()
        verify_config = config.verify_config(device, store.root)
        result = verify_fn(task, source, verify_config) if verify_fn else verify(task, source, verify_config,
                                                                                  worker=worker)
    analyze = analyze_fn or analysis.analyze_task
    sol_ms = _speed_of_light_ms(task, device, gpu, analyze) if result.passed and result.timing else None
    attempt = Attempt.from_result(run.run_id, 1, 1, result, sol_ms=sol_ms, note=f"scored from {kernel_path}",
                                  started_at=begun, finished_at=utc_now())
    store.save_attempt(run, attempt, source=source)
    run.attempts, run.rounds = 1, 1
    if result.passed:
        record_best(store, run, attempt, source)
        check_fn, not_checked = scored_check(device, config, machine)
        attempt = cross_check_best(store, run, task, check_fn, not_checked=not_checked) or \
            store.load_attempt(run.run_id, 1)
    return finish_run(store, run, "succeeded" if run.best_attempt is not None else "failed",
                      f"{attempt.status}: {attempt.reason}", wall_s=time.monotonic() - started)


def scored_check(device: str, config, machine: tuple[str, str] | None = None) -> tuple:
    """(check_fn, why there is none) for a scored kernel's ncu cross-check, as optimize() chooses them."""
    from agent.graph import default_crosscheck_fn
    from agent.lifecycle import NO_GPU

    if machine is not None and device == "cuda":
        return None, "the kernel was timed on a cluster's GPUs, where the ncu cross-check is not wired"
    return default_crosscheck_fn(device, config), NO_GPU


def _speed_of_light_ms(task, device: str, gpu: str, analyze_task) -> float | None:
    """The task's speed-of-light time on this GPU, as the optimize loop's analysis computes it: a scored
    kernel's % of SOL. None, with a line on stderr, where it cannot be had (the verdict stands)."""
    try:
        return analyze_task(task, device, gpu).sol_ms
    except Exception as exc:   # noqa: BLE001 - the row keeps its verdict and leaves % of SOL out
        print(f"kgen: {task.name}: no speed-of-light time: {type(exc).__name__}: {exc}", file=sys.stderr)
        return None


def run_job(job: Job, *, log=None, started_s: float | None = None, **calls) -> JobOutcome:
    """Do one job in this process, its progress to `log` (default stderr). Only a kgen bug raises.

    `started_s`: when the job's process started (time.monotonic()), where the run's wall time counts from.

    `calls` go to optimize() (verify_fn, profile_fn, analyze_fn, machine): the Ray executor's GPU calls."""
    from agent.config import OptimizeConfig
    from agent.graph import optimize
    from agent.live import PlainView
    from agent.proposers.base import ProposerError
    from verifier.task import TaskError

    config = OptimizeConfig.from_dict(job.config)
    store = Store(config.results_dir)
    try:
        if job.kind == "verify":
            if job.kernel_paths:
                from agent.kernelbench.samples import score_samples

                run = score_samples(job.task_path, job.kernel_paths, config, store, **calls)
            else:
                run = score_kernel(job.task_path, job.kernel_path, config, store, **calls)
            print(f"run {run.run_id}: {run.stop_reason}", file=log or sys.stderr)
        else:
            view = PlainView(log or sys.stderr)

            def on_event(event) -> None:
                if event.kind == "start":
                    Path(job.started_path).write_text(json.dumps({"run_id": event.run.run_id}))
                view.handle(event)

            run = optimize(None if job.resume else job.task_path, config, resume=job.resume, on_event=on_event,
                           store=store, started_s=started_s, **calls)
    except TaskError as exc:
        return JobOutcome(error=TASK_ERROR, message=str(exc))
    except (ValueError, ProposerError) as exc:   # a device or proposer that cannot be had: nothing ran
        return JobOutcome(error=ERROR, message=str(exc))
    return JobOutcome(run_id=run.run_id)


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m agent.board.job JOB.json", file=sys.stderr)
        return 2
    from agent.cli import process_started_s

    job = Job.from_dict(json.loads(Path(argv[0]).read_text(encoding="utf-8")))
    try:
        outcome = run_job(job, started_s=process_started_s())
    except KeyboardInterrupt:
        outcome = JobOutcome(error=INTERRUPTED, message="interrupted before the run was stored")
    except Exception as exc:   # the task's row says what broke; the traceback goes to the task's log
        import traceback

        traceback.print_exc()
        outcome = JobOutcome(error=ERROR, message=f"kgen failed: {type(exc).__name__}: {exc}")
    Path(job.result_path).write_text(json.dumps(outcome.to_dict()))
    return 0


if __name__ == "__main__":
    from agent.cli import exit_now

    exit_now(main(sys.argv[1:]))
