"""KernelBench's generated samples in `kgen leaderboard --verify-only DIR`: matched to tasks, each scored.

    from agent.kernelbench.samples import match_samples, score_samples
    found = match_samples(task_paths, Path("runs/my_run"))   # task -> its samples (by sample id), or why none
    run = score_samples(task_path, found.kernels["19_ReLU"], config, store)   # one run, an attempt per sample

KernelBench writes a run's kernels as `level_{L}_problem_{P}_sample_{S}_kernel.py`
beside each other. A task takes the samples of its problem number (and of its
level, when the task's folder names one: `level1/19_ReLU.py`). Every sample is
verified; the row reports the best one (the fastest correct one where timed,
else the first correct one), and the run keeps every sample as an attempt in
sample order: `kgen show RUN` lists them and `kgen export kernelbench` writes each.
A folder without sample files is matched as before (agent.board.files.match_kernels:
a kernel named like its task). Sample files that no task takes are listed, so that
a kernel left out of the board is seen.
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from agent.kernelbench.names import parse_sample_name, problem_number, task_level
from agent.records import Attempt, Run
from agent.store import Store, utc_now


@dataclass
class KernelMatch:
    """Which kernel files a folder holds for each task of a suite."""

    kernels: dict[str, Path | tuple[Path, ...] | str]   # task -> one kernel, its samples (by sample id), or why none
    unmatched: list[str] = field(default_factory=list)   # "FILE: why no task takes it", one per sample file


def match_samples(task_paths: list[Path], kernels_dir: Path) -> KernelMatch:
    """Each task's kernels in a folder: its KernelBench samples where the folder has any, else as match_kernels."""
    from agent.board.files import match_kernels

    found: dict[str, Path | tuple[Path, ...] | str] = dict(match_kernels(task_paths, kernels_dir))
    samples = sorted((s for s in map(parse_sample_name, kernels_dir.glob("*.py")) if s is not None),
                     key=lambda s: (s.level, s.problem, s.sample))
    if not samples:
        return KernelMatch(found)
    keys = {p.stem: (task_level(p), problem_number(p)) for p in task_paths}
    taken: set[Path] = set()
    for path in task_paths:
        name, (level, number) = path.stem, keys[path.stem]
        if number is None:
            continue
        mine = [s for s in samples if s.problem == number and (level is None or s.level == level)]
        if not mine:
            continue
        taken.update(s.path for s in mine)
        levels = sorted({s.level for s in mine})
        rivals = [other for other, key in keys.items() if other != name and key[1] == number
                  and (key[0] is None or level is None or key[0] == level)]
        if len(levels) > 1:
            found[name] = (f"samples of levels {', '.join(map(str, levels))} are for problem {number}: put the task "
                           f"in a folder named for its level (level1/{path.name}) so that they can be told apart")
        elif rivals:
            found[name] = (f"the samples of problem {number} could be {name}'s or {', '.join(rivals)}'s: put the "
                           f"tasks in folders named for their levels (level1, level2)")
        elif isinstance(found.get(name), Path):
            found[name] = (f"both {found[name].name} and {len(mine)} KernelBench sample(s) of problem {number} "
                           f"match {name}; keep one kind")
        else:
            found[name] = tuple(s.path for s in sorted(mine, key=lambda s: s.sample))
    unmatched = []
    for s in samples:
        if s.path not in taken:
            unmatched.append(f"{s.path.name}: no task of the suite is level {s.level} problem {s.problem}")
    return KernelMatch(found, unmatched)


def score_samples(task_path: str | Path, kernel_paths: list[str] | tuple[Path, ...], config, store: Store) -> Run:
    """Verify each sample of one task and store them as one run (proposer "none"), an attempt per sample.

    The run's best attempt is the fastest correct sample where timed (its speedup against the faster
    baseline), else the first correct one, once it passed the ncu cross-check where there is one (a sample
    whose claim ncu shows impossible is rejected and the next best checked: agent.lifecycle.cross_check_best);
    config["kernel_paths"] lists the samples in attempt order and config["kernel_path"] is the best one (or the first, when none is correct). Raises TaskError for an
    unusable task; a bad sample is a stored verdict. The run's bookkeeping is optimize's (agent.lifecycle).
    """
    from agent import analysis
    from agent.board.job import _speed_of_light_ms, scored_check
    from agent.lifecycle import cross_check_best, finish_run, record_best, start_run
    from verifier.task import load_task
    from verifier.verify import prestart_worker, verify

    paths = [Path(p).resolve() for p in kernel_paths]
    if not paths:
        raise ValueError("score_samples needs at least one kernel file")
    task = load_task(task_path)
    device, gpu = analysis.device_and_gpu(config.device)
    run = start_run(store, task, config, proposer="none", device=device, gpu=gpu,
                    extra={"kernel_path": str(paths[0]), "kernel_paths": [str(p) for p in paths]})
    started = time.monotonic()
    verify_config = config.verify_config(device, store.root)
    sol_ms: float | None = None
    attempts: list[Attempt] = []
    sources: list[str] = []
    if len(paths) > 1:
        _prebuild([p.read_bytes().decode("utf-8", errors="replace") for p in paths], device, verify_config)
    for number, path in enumerate(paths, 1):
        # NOTE: a fresh worker per sample: one sample's crash or patched namespaces never reach the next
        with prestart_worker() as worker:
            source = path.read_bytes().decode("utf-8", errors="replace")   # not UTF-8: a bad candidate, a verdict
            begun = utc_now()
            result = verify(task, source, verify_config, worker=worker)
        if result.passed and result.timing and sol_ms is None:
            sol_ms = _speed_of_light_ms(task, device, gpu, analysis.analyze_task)
        attempt = Attempt.from_result(run.run_id, number, 1, result, sol_ms=sol_ms if result.timing else None,
                                      note=f"scored from {path}", started_at=begun, finished_at=utc_now())
        store.save_attempt(run, attempt, source=source)
        attempts.append(attempt)
        sources.append(source)
        print(f"{task.name}: sample {path.name}: {result.status}: {result.reason}", file=sys.stderr)
    best = best_attempt(attempts)
    run.attempts, run.rounds = len(attempts), 1
    correct = sum(a.passed for a in attempts)
    if best is not None:
        record_best(store, run, best, sources[best.number - 1])
        # the best sample's claim against ncu's device time: a rejected one gives way to the next best
        check_fn, not_checked = scored_check(device, config)
        best = cross_check_best(store, run, task, check_fn, not_checked=not_checked)
        correct = sum(a.passed for a in store.load_attempts(run.run_id))
    if best is not None:
        run.config["kernel_path"] = str(paths[best.number - 1])
        store.save_run(run)
    lead = best or store.load_attempt(run.run_id, attempts[0].number)
    reason = (f"{correct} of {len(attempts)} sample(s) correct; "
              f"{'best' if best else 'first'} {paths[lead.number - 1].name}: {lead.status}: {lead.reason}")
    return finish_run(store, run, "succeeded" if best is not None else "failed", reason,
                      wall_s=time.monotonic() - started)


def best_attempt(attempts: list[Attempt]) -> Attempt | None:
    """The fastest correct attempt where any is timed (highest speedup against the faster baseline), else the
    first correct one; None when none is correct."""
    correct = [a for a in attempts if a.passed]
    timed = [a for a in correct if a.speedup is not None]
    if timed:
        return max(timed, key=lambda a: a.speedup)
    return correct[0] if correct else None


def _prebuild(sources: list[str], device: str, verify_config) -> None:
    """The samples' load_inline extensions built side by side before they are verified one by one (their
    compiles need the CPU only): each verification then finds its own built (verifier.inline_build)."""
    from verifier import inline_build

    try:
        inline_build.prebuild_round(sources, device, verify_config.timeout_s)
    except Exception:  # noqa: BLE001 - an optimisation: each verification builds what is missing itself
        pass
