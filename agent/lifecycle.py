"""A run's bookkeeping in the store, the same for every way a run is made: started, a new best, finished.

    from agent.lifecycle import clear_best, finish_run, record_best, start_run
    run = start_run(store, task, config, proposer="none", device="cpu", gpu="")
    ...store.save_attempt(run, attempt, source=source)...
    record_best(store, run, attempt, source)
    finish_run(store, run, "succeeded", "ok: matches", wall_s=3.2)

`kgen optimize` (agent.graph) and a scored kernel (`kgen leaderboard
--verify-only`, agent.board.job) both go through these, so a run reads the
same in `kgen show` and `kgen report` whichever made it.
"""

from __future__ import annotations

from typing import Any

from agent.config import OptimizeConfig
from agent.records import Attempt, Run
from agent.store import Store, new_run_id, utc_now
from verifier.records import Task


def start_run(store: Store, task: Task, config: OptimizeConfig, *, proposer: str, device: str, gpu: str,
              model: str = "", extra: dict[str, Any] | None = None) -> Run:
    """A new run of `task`, stored as "running"; `extra` joins the stored config (a scored kernel's path)."""
    run = Run(run_id=new_run_id(task.name), task=task.name, task_path=str(task.path.resolve()),
              config={**config.to_dict(), **(extra or {})}, proposer=proposer, model=model,
              backend=config.backend, device=device, gpu=gpu, started_at=utc_now())
    store.create_run(run)
    return run


def record_best(store: Store, run: Run, attempt: Attempt, source: str) -> None:
    """`attempt` is the run's best kernel now: its figures on the run, its source as best.py."""
    run.best_attempt = attempt.number
    run.best_speedup, run.best_ms, run.best_sol_pct = attempt.speedup, attempt.median_ms, attempt.sol_pct
    store.save_best(run, source)
    store.save_run(run)


def clear_best(store: Store, run: Run) -> None:
    """The run has no best kernel (any more): its figures cleared, best.py removed."""
    run.best_attempt = run.best_speedup = run.best_ms = run.best_sol_pct = None
    store.drop_best(run)
    store.save_run(run)


def finish_run(store: Store, run: Run, status: str, reason: str, *, wall_s: float) -> Run:
    """The run ended with `status` (a RUN_STATUSES value) for `reason` (one line) after `wall_s` seconds."""
    run.status, run.stop_reason = status, reason
    run.finished_at = utc_now()
    run.wall_s = wall_s
    store.save_run(run)
    return run
