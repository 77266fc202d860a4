"""A run's bookkeeping in the store, the same for every way a run is made: started, a new best, finished.

    from agent.lifecycle import cross_check_best, finish_run, record_best, start_run
    run = start_run(store, task, config, proposer="none", device="cpu", gpu="")
    ...store.save_attempt(run, attempt, source=source)...
    record_best(store, run, attempt, source)
    cross_check_best(store, run, task, check_fn)      # the best kernel's claim against ncu's device time
    finish_run(store, run, "succeeded", "ok: matches", wall_s=3.2)

`kgen optimize` (agent.graph) and a scored kernel (`kgen leaderboard
--verify-only`, agent.board.job and agent.kernelbench.samples) all go through
these, so a run reads the same in `kgen show` and `kgen report` whichever made
it, and every run's best kernel gets the ncu cross-check at its end.
"""

from __future__ import annotations

from typing import Any, Callable

from agent.config import OptimizeConfig
from agent.records import Attempt, Run
from agent.store import Store, new_run_id, utc_now
from verifier.records import NcuCheck, Task, VerifyResult

CrossCheckFn = Callable[[Task, str, VerifyResult], NcuCheck]   # profiler.crosscheck.cross_check's signature
MAX_CROSS_CHECKS = 3               # best kernels a run's end cross-checks with ncu, at most (~15 s each)
NO_GPU = "nothing was timed (no GPU): no claimed time to check"


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


def best_passing(store: Store, run: Run) -> Attempt | None:
    """The stored attempt that passes and is fastest (the first passing one where none is timed), or None."""
    passing = [a for a in store.load_attempts(run.run_id) if a.passed]
    timed = [a for a in passing if a.median_ms is not None]
    if timed:
        return min(timed, key=lambda a: a.median_ms)
    return passing[0] if passing else None


def cross_check_best(store: Store, run: Run, task: Task, check_fn: CrossCheckFn | None, *,
                     not_checked: str = NO_GPU, on_check: Callable[[Attempt, NcuCheck], None] | None = None,
                     limit: int = MAX_CROSS_CHECKS) -> Attempt | None:
    """The ncu cross-check on the run's best kernel; the best attempt that survives it (None: none does).

    `check_fn` runs the check (profiler.crosscheck.cross_check); None says "not run (`not_checked`)".
    An attempt checked before (a resumed run) is not checked again. An inconsistent claim rejects the
    attempt in the store (its verdict "rejected", its time and speedup dropped) and the next best passing
    attempt becomes the best and is checked, `limit` in all; none left clears the run's best. The last
    check's line is `run.best_ncu_check`; `on_check(attempt, check)` hears of each check made."""
    from profiler.crosscheck import apply_ncu_check, not_run

    for _ in range(limit):
        if run.best_attempt is None:
            return None
        attempt = store.load_attempt(run.run_id, run.best_attempt)
        if attempt is None or attempt.verify is None:
            return attempt
        check = attempt.verify.ncu_check
        if check is None:
            source = store.attempt_text(run.run_id, attempt.number, "kernel.py")
            if check_fn is None or source is None:
                check = not_run(not_checked if source is not None else "the kernel's source is not stored")
            else:
                try:
                    check = check_fn(task, source, attempt.verify)
                except Exception as exc:  # noqa: BLE001 - a check that failed is a check not made, never a pass
                    check = not_run(f"the cross-check failed: {type(exc).__name__}: {str(exc)[:200]}")
            apply_ncu_check(attempt.verify, check)
            if check.status == "inconsistent":
                attempt.status, attempt.reason = "rejected", check.reason
                attempt.median_ms = attempt.speedup = attempt.sol_pct = None
            store.save_attempt(run, attempt, source=None)
            if on_check is not None:
                on_check(attempt, check)
        run.best_ncu_check = check.line
        if check.status != "inconsistent":
            store.save_run(run)
            return attempt
        following = best_passing(store, run)
        if following is None:
            clear_best(store, run)
            return None
        record_best(store, run, following, store.attempt_text(run.run_id, following.number, "kernel.py") or "")
    run.best_ncu_check = (f"ncu cross-check: not run (the best {limit} kernels were rejected by it; attempt "
                          f"{run.best_attempt} was not checked)")
    store.save_run(run)
    return store.load_attempt(run.run_id, run.best_attempt)


def finish_run(store: Store, run: Run, status: str, reason: str, *, wall_s: float) -> Run:
    """The run ended with `status` (a RUN_STATUSES value) for `reason` (one line) after `wall_s` seconds."""
    run.status, run.stop_reason = status, reason
    run.finished_at = utc_now()
    run.wall_s = wall_s
    store.save_run(run)
    return run
