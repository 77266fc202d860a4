"""The ncu cross-check: a kernel's claimed time against the device's own time for its forward, by Nsight Compute.

    from profiler.crosscheck import apply_ncu_check, cross_check
    check = cross_check(task, source, result)      # an NcuCheck, never an exception
    apply_ncu_check(result, check)                 # "inconsistent" makes the verdict "rejected"
    print(check.line)                              # ncu cross-check: consistent (claimed 0.2716 ms ...)

The verifier's timing runs in the candidate's own process, so its median is a claim
(verifier/timing.py). This runs the candidate's forward again, in a fresh sandboxed process of
kgen's (profiler/ncu_child.py, WARMUP_CALLS calls, then PROFILED_CALLS inside the NVTX range
"kgen") under ncu collecting `gpu__time_duration` alone (one pass, no kernel replay, caches and
clocks left alone: profiler.ncu.ncu_time_argv), and hands the per-call device time
(`device_time`: per stream, the sum of its launches' durations; the longest stream) with the
claim to verifier.timing.ncu_check, which decides: a claim below ncu's time / NCU_MARGIN is
"inconsistent". Where it cannot be made (the kernel did not pass, nothing was timed, no ncu, the
counters refused, the profiled run failed, no kernel seen) the check is "not_run" with the reason:
never a silent pass, never a false "inconsistent".

`kgen verify --strict` runs it for one kernel (agent/commands/verify.py); the optimize loop runs it
on the best kernel of a run at the end (agent/graph.py). `strict_problem(device)` says why it
cannot run here at all, before anything is verified.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from pathlib import Path

from profiler.records import KernelMetrics
from verifier import cleanup
from verifier.records import NcuCheck, VerifyResult

WARMUP_CALLS = 3       # forward calls before the profiled ones: compilation, autotuning, the clocks brought up
PROFILED_CALLS = 3     # forward calls inside the range; their device time is averaged
TIMEOUT_S = 300.0      # the profiled run's wall-clock limit (a pass took 9-15 s on the H200, mostly start-up)


@dataclass(frozen=True)
class DeviceTime:
    """ncu's device time for one forward call, from the launches of the profiled calls."""

    ms_per_call: float     # the longest stream's summed gpu__time_duration, over the calls
    launches: int          # kernel launches ncu listed, over all the calls
    streams: int           # the streams they ran on
    untimed: int           # launches ncu printed no duration for (counted as 0)

    def kernels_per_call(self, calls: int) -> int:
        """Launches per forward call, rounded up (a forward need not launch the same kernels every call)."""
        return math.ceil(self.launches / max(calls, 1))


def not_run(reason: str) -> NcuCheck:
    """The check not made, and why: what a verdict then says ("ncu cross-check: not run (why)")."""
    return NcuCheck(status="not_run", reason=reason)


def device_time(kernels: list[KernelMetrics], calls: int) -> DeviceTime | None:
    """The per-call device time of `calls` profiled forward calls, or None when ncu timed no launch.

    Kernels on one stream run one after another, so each stream's sum is a time the calls took at
    least; streams may overlap, so the longest stream's sum is taken, not the total."""
    timed = [k for k in kernels if k.duration_us is not None]
    if not timed:
        return None
    per_stream: dict[str, float] = {}
    for k in kernels:
        per_stream[k.stream] = per_stream.get(k.stream, 0.0) + (k.duration_us or 0.0)
    return DeviceTime(ms_per_call=max(per_stream.values()) / 1e3 / max(calls, 1), launches=len(kernels),
                      streams=len(per_stream), untimed=len(kernels) - len(timed))


def strict_problem(device: str, ncu: str | None = None) -> str | None:
    """Why the cross-check cannot run on this machine for `device` ("cpu" or "cuda"), or None when it can."""
    from profiler.ncu import find_ncu

    if device != "cuda":
        return ("the ncu cross-check needs a GPU and Nsight Compute (ncu): there is no CUDA GPU here"
                if device == "cpu" else f"the ncu cross-check needs a GPU and Nsight Compute (ncu), not {device!r}")
    if (ncu or find_ncu()) is None:
        return ("the ncu cross-check needs Nsight Compute (ncu): not found on PATH, in KGEN_NCU or under "
                "/opt/nvidia/nsight-compute")
    return None


def cross_check(task, source: str, result: VerifyResult, *, ncu: str | None = None,
                timeout_s: float = TIMEOUT_S) -> NcuCheck:
    """The claim in `result` (a verdict on `source` for `task`) against ncu's device time; never raises."""
    from profiler.ncu import find_ncu

    if result.status != "ok":
        return not_run(f"the kernel did not pass verification ({result.status}): no claimed time to check")
    if result.timing is None:
        return not_run("nothing was timed (no GPU): no claimed time to check")
    ncu_path = ncu or find_ncu()
    if ncu_path is None:
        return not_run("ncu not found (PATH, KGEN_NCU, /opt/nvidia/nsight-compute)")
    try:
        return _measure(task, source, result, ncu_path, timeout_s)
    except Exception as exc:  # noqa: BLE001 - kgen's own failure here is a check not made, never the kernel's
        return not_run(f"kgen's own failure running ncu: {type(exc).__name__}: {str(exc)[:200]}")


def _measure(task, source: str, result: VerifyResult, ncu_path: str, timeout_s: float) -> NcuCheck:
    from profiler.child import output_tail, run_child, write_job
    from profiler.ncu import ncu_problem, ncu_time_argv, parse_raw_csv
    from verifier import timing
    from verifier.protocols import reported_ms

    with cleanup.scratch_dir("kgen-crosscheck") as tmp:
        workdir = Path(tmp)
        job = write_job(workdir, task, source, mode="ncu", count_work=False, warmup_calls=WARMUP_CALLS,
                        profiled_calls=PROFILED_CALLS)
        log = workdir / "time.csv"
        t0 = time.perf_counter()
        run, child = run_child(ncu_time_argv(ncu_path, log, job), job, workdir, timeout_s)
        wall_s = time.perf_counter() - t0
        text = (log.read_text(errors="replace") if log.exists() else "") + "\n" + run.stdout
    problem = ncu_problem(text + "\n" + run.stderr)
    if problem:
        return not_run(problem)
    if run.timed_out:
        return not_run(f"the profiled run passed its {timeout_s:g} s limit")
    if child.get("error"):
        return not_run(f"the candidate failed under ncu: {str(child['error'])[:300]}")
    measured = device_time(parse_raw_csv(text), PROFILED_CALLS)
    if measured is None:
        tail = " | ".join(output_tail(run.stderr or run.stdout or text))
        return not_run(f"ncu timed no kernel in the {PROFILED_CALLS} profiled calls: nothing to bound the claim "
                       f"with ({wall_s:.0f} s" + (f"; {tail[:240]}" if tail else "") + ")")
    return timing.ncu_check(reported_ms(result.timing), measured.ms_per_call,
                            kernels=measured.kernels_per_call(PROFILED_CALLS), streams=measured.streams,
                            calls=PROFILED_CALLS)


def apply_ncu_check(result: VerifyResult, check: NcuCheck) -> VerifyResult:
    """`check` onto the verdict: kept as result.ncu_check; "inconsistent" rejects the kernel with its reason.

    A rejected kernel keeps no time or speedup (as every other rejection): its claim is in the check."""
    result.ncu_check = check
    if check.status == "inconsistent" and result.status == "ok":
        result.status, result.reason = "rejected", check.reason
        result.timing = result.timing_repeat = None
        result.baselines, result.speedups = {}, {}
    return result
