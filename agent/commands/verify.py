"""`kgen verify TASK KERNEL [--json] [--device cpu|cuda] [--timing graph|events] [--strict]`: the verdict on one kernel.

    kgen verify tasks/softmax.py kernel.py
    kgen verify level1/19_ReLU.py kernel.py --device cpu --small-shapes batch_size=7,dim=129
    kgen verify tasks/softmax.py kernel.py --strict     # GPU and ncu: the claimed time against ncu's device time

On the CPU a task too large for the Triton interpreter is checked on its
get_small_inputs(), or on shapes derived from its size constants
(verifier.shapes; docs/kernelbench.md), which the verdict names.

Prints the status, the reason, the feedback and (on a GPU) timings and
speedups; `--json` prints the VerifyResult instead. Exit codes:

    0  the kernel passed
    1  it did not (compile error, mismatch, rejected, ...): a verdict on the kernel
    2  a malformed task, a missing file, a bad flag
    3  this machine could not check it: a CUDA kernel with no GPU here, compiled with nvcc but
       not run ("not_run"), or not even compiled ("not_checkable": no nvcc, or no CUDA headers in
       this build of torch). No verdict on the kernel either way: run it on a GPU machine.

`--strict` adds the ncu cross-check (profiler/crosscheck.py): once the kernel
passed, its forward runs again under Nsight Compute, and a claimed time below
ncu's device time for its kernels / 1.25 (verifier.timing.NCU_MARGIN) rejects
it, "timing inconsistent", with both numbers (exit 1). It needs a GPU and ncu:
without either, `--strict` is refused before anything runs (exit 2, saying
which is missing); where ncu is there but the check could not be made (the
GPU's counters refused, the profiled run failed) the verdict says "ncu
cross-check: not run (why)" and the exit code is 2: strict asked for a check
that did not happen, so it is no pass.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from agent.flags import positive_float, positive_int, small_shapes
from verifier.protocols import protocol, reported_ms
from verifier.records import TIMING_METHODS, VerifyConfig
from verifier.wire import PRESTART_PHASE

NOT_CHECKED_EXIT = 3   # neither passed (0) nor failed (1): this machine could not check the kernel


def register(sub) -> None:
    p = sub.add_parser("verify", help="check (and on a GPU, time) one candidate kernel for a task",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("task", help="task file (KernelBench format)")
    p.add_argument("kernel", help="candidate file defining ModelNew")
    p.add_argument("--json", action="store_true", help="print the VerifyResult as JSON")
    p.add_argument("--device", choices=["auto", "cpu", "cuda"], default="auto")
    p.add_argument("--trials", type=positive_int, default=5, help="correctness trials (default 5)")
    p.add_argument("--verify-timeout", type=positive_float, default=180.0, dest="timeout", metavar="S",
                   help="wall-clock limit in seconds (default 180)")
    p.add_argument("--timeout", type=positive_float, dest="timeout", default=argparse.SUPPRESS,
                   help=argparse.SUPPRESS)   # the older spelling; --verify-timeout as in kgen optimize
    p.add_argument("--small-shapes", type=small_shapes, metavar="NAME=VALUE,...",
                   help="on the CPU: check on these values of the task's module-level size constants "
                        "(e.g. batch_size=7,dim=129) instead of its small or derived shapes")
    p.add_argument("--no-baselines", action="store_true", help="skip the torch.compile baselines")
    p.add_argument("--memory-budget", type=positive_float, metavar="GIB",
                   help="memory the verification may hold at once on its device, both processes together "
                        "(default: the GPU's free memory; on a CPU the host's available memory)")
    p.add_argument("--reps", type=positive_int, default=100, help="timed repetitions (default 100)")
    p.add_argument("--strict", action="store_true",
                   help="GPU and ncu only: also check the claimed time against Nsight Compute's device time for "
                        "the forward's kernels (gpu__time_duration); a claim below it / 1.25 is rejected")
    p.add_argument("--timing", choices=TIMING_METHODS, default=VerifyConfig.timing,
                   help="graph: candidate and baselines captured in CUDA graphs and replayed, the device's time "
                        "(default); events: each call timed as issued, the host's cost of the call included; "
                        "kernelbench: KernelBench's protocol (events per call, same inputs, mean of the trials)")
    p.set_defaults(func=run)


def read_candidate(path: str) -> str:
    """The kernel file's text; TaskError (a usage error, exit 2) when it is missing, a folder or not text."""
    from verifier.task import TaskError

    p = Path(path)
    if p.is_dir():
        raise TaskError(f"{path}: is a directory, expected a kernel .py file defining ModelNew")
    if not p.is_file():
        raise TaskError(f"{path}: no such kernel file")
    data = p.read_bytes()
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise TaskError(f"{path}: not UTF-8 text (byte 0x{data[exc.start]:02x} at offset {exc.start}); "
                        f"a kernel file is Python source") from None


def run(args) -> int:
    from verifier.config_checks import check_verify_config
    from verifier.verify import prestart_worker, verify

    # NOTE: the worker starts first, so that its start-up (torch, triton, CUDA) overlaps the task's loading
    # here (which imports torch too) and the baseline cache's look-up; every way out of the block stops it.
    source = read_candidate(args.kernel)   # NOTE: before the worker and the task: a wrong path is said at once
    if args.strict:
        problem = strict_refusal(args.device)
        if problem:
            print(f"kgen: error: --strict: {problem}; without --strict, kgen verify gives the verdict without it",
                  file=sys.stderr)
            return 2
    with prestart_worker() as worker:
        from verifier.task import load_task

        task = load_task(args.task, small_shapes=args.small_shapes, device=args.device)
        config = VerifyConfig(device=args.device, trials=args.trials, timeout_s=args.timeout,
                              baselines=not args.no_baselines, reps=args.reps, timing=args.timing,
                              memory_budget_bytes=None if args.memory_budget is None else
                              int(args.memory_budget * 2**30))
        try:
            check_verify_config(config)   # argparse bounds the flags; this bounds what reaches the verifier
            called_s = time.monotonic()
            result = verify(task, source, config, worker=worker)
        except (RuntimeError, ValueError) as exc:  # e.g. --device cuda without a GPU; a setting out of bounds
            print(f"kgen: error: {exc}", file=sys.stderr)
            return 2
    if args.strict:
        strict_check(task, source, result, timeout_s=args.timeout)
    command_wall(result, getattr(args, "started_s", None) or called_s, called_s)
    if args.json:
        print(json.dumps(result.to_dict(), indent=2))
    else:
        print(render(result, args.kernel))
    if args.strict and result.passed and result.ncu_check.status != "consistent":
        print(f"kgen: error: --strict: {result.ncu_check.line}: the strict check was not made, so this is no pass",
              file=sys.stderr)
        return 2
    if result.passed:
        return 0
    return 1 if result.checked_here else NOT_CHECKED_EXIT


STARTUP_PHASE = f"start-up: kgen, the task's loading (the sandbox {PRESTART_PHASE.split(':')[0]} beside them)"


def command_wall(result, started_s: float, called_s: float) -> None:
    """The verdict's wall time and phases as the command's: from its start (time.monotonic() `started_s`), with
    what came before the verifier was called (`called_s`) as a phase of its own; the phases sum to the wall.

    NOTE: the sandbox's pre-start ran beside kgen's start-up (that is its point), so it is not a phase of
    its own here: counted as well, the phases would add up to more than the wall clock."""
    phases = {STARTUP_PHASE: called_s - started_s,
              **{name: secs for name, secs in result.phases.items() if name != PRESTART_PHASE}}
    wall_s = time.monotonic() - started_s
    phases["other"] = max(0.0, wall_s - sum(phases.values()))
    result.wall_s, result.phases = wall_s, phases


def strict_refusal(device: str) -> str | None:
    """Why --strict cannot run here (no GPU, no ncu), or None; "auto" resolves to what is here."""
    from profiler.crosscheck import strict_problem
    from verifier.verify import resolve_device

    try:
        resolved = resolve_device(device)
    except RuntimeError as exc:     # --device cuda without a GPU
        return f"the ncu cross-check needs a GPU and Nsight Compute (ncu): {exc}"
    return strict_problem(resolved)


def strict_check(task, source: str, result, *, timeout_s: float) -> None:
    """The ncu cross-check onto `result` (an inconsistent claim rejects it), its time among the phases."""
    import time

    from profiler.crosscheck import apply_ncu_check, cross_check

    t0 = time.perf_counter()
    apply_ncu_check(result, cross_check(task, source, result, timeout_s=timeout_s))
    spent = time.perf_counter() - t0
    result.phases["ncu cross-check"] = spent
    result.wall_s += spent


def render(result, kernel_path: str = "") -> str:
    where = " on ".join(part for part in (result.backend, result.device) if part)
    head = f"{result.status.upper():<14} {result.task}  {kernel_path}" + (f"  [{where}]" if where else "")
    lines = [head.rstrip(), f"reason: {result.reason}"]
    if result.feedback and not result.passed:
        lines += ["", result.feedback.rstrip(), ""]
    if not result.checked_here:
        lines.append("not a verdict on the kernel: this machine cannot check it (no GPU here); "
                     "run kgen verify on a GPU machine to check and time it")
    if result.timing:
        t = result.timing
        how = " (CUDA graph replays)" if t.method == "graph" else " (each call as issued, the host's cost included)"
        if t.method == "kernelbench":   # KernelBench's protocol reports the mean; the speedups compare means
            lines.append(f"candidate: {t.mean_ms:.4f} ms mean of {t.reps} ({protocol(t.method).how}; std {t.std_ms:.4f}, "
                         f"min {t.min_ms:.4f}, max {t.max_ms:.4f}, median {t.median_ms:.4f})")
        else:
            lines.append(f"candidate: {t.median_ms:.4f} ms median of {t.reps}{how} (p10 {t.p10_ms:.4f}, p90 {t.p90_ms:.4f})"
                         + (f"; host side of the call {t.host_ms:.4f} ms" if t.host_ms is not None else ""))
        for name, b in result.baselines.items():
            sp, b_ms = result.speedups.get(name), reported_ms(b)
            lines.append(f"{name:>22}: {b_ms:.4f} ms  -> speedup {sp:.2f}x" if sp else f"{name:>22}: {b_ms:.4f} ms")
        if result.floor_ms:
            lines.append(f"roofline floor: {result.floor_ms:.4f} ms (no honest kernel is faster; "
                         f"this one takes {t.median_ms / result.floor_ms:.1f}x that)")
    elif result.passed:
        lines.append("not timed: no GPU here (correctness checked under the Triton interpreter; "
                     "the notes say on which shapes)")
    if result.ncu_check is not None:
        lines.append(result.ncu_check.line)
    if result.trials:
        lines.append(f"trials passed: {result.trials}")
    for flag in result.flags:
        lines.append(f"note: {flag}")
    lines.append(f"isolation: {'; '.join(result.isolation) if result.isolation else 'n/a'}")
    if result.isolation and not result.isolation_complete:
        missing = ", ".join(result.isolation_missing) or "see above"
        lines.append(f"isolation INCOMPLETE: not in force here: {missing}")
    lines.append(f"wall: {result.wall_s:.1f} s (the command's, from its start)")
    spent = [(name, secs) for name, secs in (result.phases or {}).items() if secs >= 0.05]
    if spent:
        lines.append("where the time went: " + ", ".join(f"{name} {secs:.1f} s" for name, secs in spent))
    return "\n".join(lines)
