"""Timing on the GPU: CUDA events around one call, L2 flushed before it, median of many.

    t = time_callable(fn, refresh, reps=100, warmup=10)   # -> Timing (ms)
    t, captured, note = time_call(fn, refresh, method="graph")   # what the verifier does by default

The verifier's default is "graph" (below): on an H200 the events around a plain
call held 0.05-0.12 ms of the host's launch path for a Python-launched Triton
kernel (a 0.27 ms softmax read as 0.32-0.39 ms, with up to 17% between two runs
of the same kernel), while graph replays were within 6% of ncu's kernel time and
within 2% run to run (benchmarks/verifier.md). "events" stays available for a
caller who wants the host's cost counted.

Method, per repetition: `refresh(rep)` writes fresh input values into the
fixed input buffers (so a result cached by pointer, id or content cannot be
replayed), the L2 cache is flushed by writing a buffer twice its size, the
device is synchronised, then one call is bracketed by two CUDA events on the
current stream. The median over repetitions is reported. The GPU is idle when
the start event is recorded, so the host's own cost of the call (Python, the
launcher) is inside the events, as it is for eager and torch.compile: a call
whose host side is slower than its kernels is measured as slow. `host_ms` says
how much of the time that was. A second pass times
the same call with a device-wide synchronisation and a host clock: when that
is much longer than the event time, work escaped the timed stream (a side
stream or a thread) and the caller rejects the kernel. With `check`, the
outputs of SPOT_CHECKS timed calls, drawn at random and known to nobody
before they run, are handed to check(output) after their events: a kernel
that is right only on the calls it expects to be checked is caught.

With `method="graph"` (`time_call`), the call is captured once in a CUDA
graph and the graph is replayed instead: the host's part of each timed call
shrinks to one graph launch, so the events hold the device's time. Capture
refuses what would escape the events: work left on a stream not joined back to
the caller's raises EscapedStream (the output is not ready when forward returns);
a host synchronisation (cudaDeviceSynchronize inside forward), a copy from pageable
memory, or any other error the capture raises makes the call be timed with plain
events instead, and the note says so. A replay runs only the kernels recorded
at capture, so the caller must check the replayed output (`Captured.output`)
against the reference on fresh inputs.

The claim is checked from outside the candidate's process twice: the judge's clock around a block
of calls (`block_inconsistency`, below: loose, a margin and the host's launch cost allowed), and,
for a run's best kernel and `kgen verify --strict`, Nsight Compute's `gpu__time_duration` of the
forward's kernels, read from hardware counters the candidate's process cannot write
(`ncu_inconsistency`, below; profiler/crosscheck.py runs ncu and feeds it). A call cannot take less
than its kernels' device time, so a claim below ncu's time / NCU_MARGIN (1.25) is rejected "timing
inconsistent" with both numbers. The margin: on the H200 honest graph replays were 5-19% above
ncu's time for the same kernel, never below (benchmarks/verifier.md, benchmarks/heuristic.md);
1.25 leaves room for the clocks, which ncu leaves to the card (`--clock-control none`), being lower
during the profiled calls than during the timed ones.

A capture can also succeed and miss the call's kernels: torch captures on a
non-blocking side stream, and a kernel launched on the legacy default stream
(`kernel<<<grid, block>>>` with no stream, as KernelBench's load_inline examples
write it) or on a stream of the candidate's own neither joins the graph nor
invalidates the capture; it runs once, uncaptured, and every replay runs nothing
(the libuipc project met the same with a non-blocking capture stream). So after
the capture one probe (`replay_reproduces`): fresh inputs (refresh(PROBE_REP)), one
plain call, then one replay on the same inputs; when the replay's output is not
the plain call's, the capture missed work and the call is timed with plain events
("timed with events: the CUDA graph capture missed ..."). That is right for the
legacy default stream: plain events are recorded on torch's default stream, which
is the legacy stream (time_call makes it current for them), and the legacy stream
waits for, and is waited for by, every blocking stream. Work on a non-blocking
stream of the candidate's own that forward does not join is outside those events
too; the device-wide synchronised pass (`escaped_stream`) then names it "work on a
stream kgen does not time". The probe needs `refresh` and tensor outputs; without
them it is skipped.

NOTE: the event class, synchronize, the graph classes and the host clock are
bound when this module is imported, before any candidate code runs, so a
candidate that patches torch.cuda.Event or time.perf_counter does not change
what is used here.
"""

from __future__ import annotations

import math
import random
import statistics
import time
from dataclasses import dataclass

import torch

from verifier.records import TIMING_METHODS, NcuCheck, Timing

_Event = torch.cuda.Event
_synchronize = torch.cuda.synchronize
_perf_counter = time.perf_counter
_Graph = torch.cuda.CUDAGraph
_graph_capture = torch.cuda.graph
_Stream = torch.cuda.Stream
_current_stream = torch.cuda.current_stream
_use_stream = torch.cuda.stream
_default_stream = torch.cuda.default_stream

METHODS = TIMING_METHODS

SPOT_CHECKS = 3    # timed calls whose output is checked afterwards, outside the events
_draw = random.SystemRandom()

# A sync-timed call may exceed the event time by launch latency; beyond this, work escaped the events.
SYNC_SLACK_MS = 0.05
SYNC_RATIO = 1.5


def l2_flush_buffer(device: torch.device | None = None) -> torch.Tensor:
    """A GPU buffer twice the L2's size: writing it evicts whatever the last call left in L2."""
    # NOTE: the device must be named: torch.empty(device=None) is a host buffer, and zeroing host
    # memory flushes nothing on the GPU (as happened here until 2026-11-29).
    device = torch.device("cuda", torch.cuda.current_device()) if device is None else torch.device(device)
    if device.type != "cuda":
        raise ValueError(f"the L2 flush buffer must live on the GPU, not on {device}")
    props = torch.cuda.get_device_properties(device)
    l2 = getattr(props, "L2_cache_size", 0) or 64 * 1024 * 1024
    return torch.empty(2 * l2 // 4, dtype=torch.int32, device=device)


class EscapedStream(Exception):
    """The call left work on a stream that is not joined back to the caller's: its output is not ready
    when it returns, and events on the caller's stream do not time that work."""


def _percentile(sorted_values: list[float], q: float) -> float:
    if not sorted_values:
        return float("nan")
    k = min(len(sorted_values) - 1, max(0, round(q * (len(sorted_values) - 1))))
    return sorted_values[k]


def time_callable(fn, refresh=None, *, reps: int = 100, warmup: int = 10, sync_reps: int = 20,
                  flush: torch.Tensor | None = None, check=None) -> Timing:
    """Median time of fn() in ms, each call on fresh inputs and a cold L2; check(output) on spot checks."""
    flush = l2_flush_buffer() if flush is None else flush
    return _timed(fn, refresh, warmup, reps, sync_reps, flush, check)


class Captured:
    """A call captured in a CUDA graph: `replay()` reruns its kernels; `output` is what they write."""

    def __init__(self, graph, output):
        self.graph, self.output = graph, output

    def replay(self) -> None:
        self.graph.replay()


def capture(fn, warmup: int = 3) -> Captured:
    """Capture fn() in a CUDA graph, after warm-up calls on a side stream (as capture requires).

    Raises what the capture raised when fn cannot be captured."""
    side = _Stream()
    side.wait_stream(_current_stream())
    with _use_stream(side):
        for _ in range(warmup):
            fn()
    _current_stream().wait_stream(side)
    _synchronize()
    graph = _Graph()
    with _graph_capture(graph):
        output = fn()
    _synchronize()
    return Captured(graph, output)


PROBE_REP = -1000      # refresh(rep) of the capture probe: no warm-up, timed or synchronised call uses it
# A replay and a plain call on the same inputs agree to float rounding (atomics reorder sums); a replay that
# ran nothing leaves the output of other inputs, off by about the output's own size. Between the two:
PROBE_RELATIVE = 0.05
MISSED_NOTE = ("timed with events: the CUDA graph capture missed kernels the call launches (on the legacy default "
               "stream, or a stream of its own, outside the capture): a replay on fresh inputs did not reproduce "
               "a plain call's output; plain events, the host's cost of the call included")
# What CUDA says when forward does what a capture forbids (legacy-stream or device-wide synchronisation).
_REFUSALS = ("stream is capturing", "not permitted", "implicit", "invalidated", "StreamCapture")


def _take_stale_error(flush: torch.Tensor) -> None:
    """A launch the call made inside a capture may have failed without the call checking (a kernel on the
    legacy default stream that the capture refused): CUDA keeps that error until the next check, which
    torch makes after its own next launch. One throwaway launch takes it, so that it is not raised from
    the timing loop's first refresh; an error that stays (a fault of the device) is raised again there."""
    for _ in range(2):
        try:
            flush.zero_()
            return
        except RuntimeError:
            continue


def _settle_generator_after_failed_capture() -> None:
    """A capture that ends in an error skips torch's epilogue for the CUDA generator it registered, which then
    refuses every later draw outside a capture ("Offset increment outside graph capture encountered
    unexpectedly"): the timing loop's fresh inputs would raise, and an honest kernel read as a runtime error.
    One trivial capture that ends well runs that epilogue. Never raises.

    NOTE: seen on the H200 (2026-12-01, three honest Triton kernels timed after a refused capture, six
    verifications sharing the GPU); this remedy follows torch's CUDAGraph code and is not yet measured there."""
    try:
        scratch = torch.zeros(1, device="cuda")
        graph = _Graph()
        with _graph_capture(graph):
            scratch.add_(1)
        _synchronize()
        del graph
    except Exception:  # noqa: BLE001 - nothing more to do; the timing loop says what it meets
        pass


def _capture_refusal(text: str) -> bool:
    low = text.lower()
    return any(r.lower() in low for r in _REFUSALS)


def _tensors(out) -> list:
    """The tensors of one call's output (a tensor, or a list or tuple of them, nested)."""
    if isinstance(out, torch.Tensor):
        return [out]
    if isinstance(out, (list, tuple)):
        return [t for o in out for t in _tensors(o)]
    return []


def outputs_agree(got: torch.Tensor, want: torch.Tensor, relative: float = PROBE_RELATIVE) -> bool:
    """got is want up to rounding: same shape and dtype, NaN where want has NaN, and the L2 norm of the
    difference within `relative` of want's (exact for integer and bool outputs). In slices: no float64 copy
    of a whole large output."""
    if got.shape != want.shape or got.dtype != want.dtype:
        return False
    a, b = got.detach().reshape(-1), want.detach().reshape(-1)
    if not (a.is_floating_point() or a.is_complex()):
        return bool(torch.equal(a, b))
    diff2 = norm2 = 0.0
    step = 1 << 22
    for start in range(0, b.numel(), step):
        x, y = a[start:start + step].to(torch.complex128 if a.is_complex() else torch.float64), \
            b[start:start + step].to(torch.complex128 if b.is_complex() else torch.float64)
        same = (x == y) | (x.isnan() & y.isnan())
        if not bool(torch.isfinite(x[~same]).all() & torch.isfinite(y[~same]).all()):
            return False
        d = torch.where(same, torch.zeros_like(x), x - y)
        diff2 += float(d.abs().pow(2).sum())
        norm2 += float(torch.where(torch.isfinite(y), y, torch.zeros_like(y)).abs().pow(2).sum())
    return diff2 <= (relative ** 2) * norm2


def replay_reproduces(fn, captured: "Captured", refresh=None) -> bool:
    """After a capture: does a replay compute what a plain call computes, on inputs the capture never saw?

    refresh(PROBE_REP) writes fresh inputs, fn() runs plainly (its output kept), the graph's output is
    poisoned (_poison), then the graph is replayed on the same inputs and its output compared
    (outputs_agree). False: the capture missed kernels (launched on the legacy default stream or a stream
    of the candidate's own: they ran once, uncaptured). True when there is nothing to compare (no
    refresh, no tensor output)."""
    if refresh is None or not _tensors(captured.output):
        return True
    replayed = _tensors(captured.output)
    held = {_storage(r) for r in replayed}
    refresh(PROBE_REP)
    # NOTE: copied only where the plain call returned the graph's own buffers (a kept output, a view of an
    # input): a fresh output is left as it is, so the probe holds one output more, not two
    plain = [t.clone() if _storage(t) in held else t for t in _tensors(fn())]
    _synchronize()
    if len(plain) != len(replayed):
        return False
    for r, p in zip(replayed, plain):
        _poison(r, p)
    refresh(PROBE_REP)   # NOTE: after the poison: an output that is a view of an input has its values back
    captured.replay()
    _synchronize()
    return all(outputs_agree(r, p) for r, p in zip(replayed, plain))


def _storage(t: torch.Tensor) -> int:
    try:
        return t.untyped_storage().data_ptr()
    except (RuntimeError, NotImplementedError):
        return -1


def _poison(out: torch.Tensor, plain: torch.Tensor) -> None:
    """Values a replay must overwrite to pass: NaN, or the plain output with its lowest bit flipped.

    NOTE: an output buffer the candidate keeps and reuses (written by the plain call just before) would
    otherwise already hold the right values when a replay that ran nothing is compared."""
    try:
        if out.is_floating_point() or out.is_complex():
            out.fill_(float("nan"))
        elif out.shape == plain.shape and out.dtype == plain.dtype:
            out.copy_(plain.logical_not() if out.dtype == torch.bool else plain ^ 1)
    except RuntimeError:
        pass   # an output that cannot be written in place (an expanded view): compared as it is


def time_call(fn, refresh=None, *, method: str = "events", reps: int = 100, warmup: int = 10,
              sync_reps: int = 20, flush: torch.Tensor | None = None,
              check=None, spot_checks: int = SPOT_CHECKS) -> tuple[Timing, Captured | None, str]:
    """Time fn() by `method`; (timing, the captured graph or None, a note when the method fell back).

    check(output), when given, runs after `spot_checks` timed calls drawn at random (for a graph, on
    the output its replay wrote); whatever it raises ends the timing."""
    if method not in METHODS:
        raise ValueError(f"unknown timing method {method!r}; expected one of {', '.join(METHODS)}")
    if method == "kernelbench":   # its own protocol: same inputs, its warm-up, its flush (below)
        return time_kernelbench(fn, refresh, trials=reps, sync_reps=sync_reps, check=check,
                                spot_checks=spot_checks), None, ""
    flush = l2_flush_buffer() if flush is None else flush
    captured, note = None, ""
    if method == "graph":
        try:
            captured = capture(fn)
        except Exception as exc:  # noqa: BLE001 - any capture failure means: time it the plain way
            first = (str(exc).strip().splitlines() or [""])[0][:160]
            if "unjoined" in str(exc):
                # cudaErrorStreamCaptureUnjoined: a stream forked from the caller's was never joined back,
                # so forward returned before its work was done (a side stream). Not a timing question.
                raise EscapedStream(f"forward left work on a side stream that is not joined back to the caller's "
                                    f"stream: it ran outside the timed stream ({first})") from None
            _synchronize()
            _settle_generator_after_failed_capture()
            note = (f"not capturable in a CUDA graph ({type(exc).__name__}: {first}): timed with plain events, "
                    f"the host's cost of the call included")
            if _capture_refusal(str(exc)):
                note += (" (a device synchronisation or a launch on the legacy default stream inside forward "
                         "is not allowed while a graph is captured)")
    if captured is not None:
        try:
            same = replay_reproduces(fn, captured, refresh)
        except RuntimeError:   # e.g. a launch error of the call's, left from inside the capture, raised here
            same = False
        if not same:
            captured, note = None, MISSED_NOTE
    if captured is None:
        if method == "graph":
            _take_stale_error(flush)
        # NOTE: on the legacy default stream, whatever stream is current: a kernel launched there with no stream
        # (KernelBench's `<<<grid, block>>>`) and every blocking stream are then inside the events
        with _use_stream(_default_stream()):
            return _timed(fn, refresh, warmup, reps, sync_reps, flush, check, spot_checks=spot_checks), None, note
    t = _timed(captured.replay, refresh, warmup, reps, sync_reps, flush, check, output=lambda: captured.output,
               spot_checks=spot_checks)
    t.method = "graph"
    return t, captured, ""


def _timed(fn, refresh, warmup: int, reps: int, sync_reps: int, flush: torch.Tensor, check=None,
           output=None, spot_checks: int = SPOT_CHECKS) -> Timing:
    """Warm-up calls, the timed loop with events around each call, then the device-wide synchronised pass.

    output() gives a call's output where fn() does not return it (a graph replay)."""
    for i in range(warmup):
        if refresh:
            refresh(-1 - i)
        fn()
    _synchronize()
    spot = set(_draw.sample(range(reps), min(spot_checks, reps))) if check else set()
    times, host = [], []
    for rep in range(reps):
        if refresh:
            refresh(rep)
        flush.zero_()
        start, end = _Event(enable_timing=True), _Event(enable_timing=True)
        _synchronize()
        start.record()
        h0 = _perf_counter()
        out = fn()
        h1 = _perf_counter()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
        host.append((h1 - h0) * 1e3)
        if rep in spot:
            _synchronize()
            check(output() if output else out)
        del out

    sync_times = []
    for rep in range(sync_reps):
        if refresh:
            refresh(reps + rep)
        flush.zero_()
        _synchronize()
        t0 = _perf_counter()
        fn()
        _synchronize()
        sync_times.append((_perf_counter() - t0) * 1e3)

    ordered = sorted(times)
    return Timing(
        median_ms=statistics.median(times),
        min_ms=ordered[0],
        mean_ms=statistics.fmean(times),
        p10_ms=_percentile(ordered, 0.1),
        p90_ms=_percentile(ordered, 0.9),
        reps=reps,
        sync_ms=statistics.median(sync_times) if sync_times else None,
        host_ms=statistics.median(host) if host else None,
    )


def escaped_stream(t: Timing) -> str | None:
    """A reason when the device-wide synchronised time says work ran outside the timed events."""
    if t.sync_ms is None:
        return None
    if t.sync_ms > SYNC_RATIO * t.median_ms + SYNC_SLACK_MS:
        return (f"event time {t.median_ms:.4f} ms but a device-wide synchronised call took {t.sync_ms:.4f} ms: "
                f"work ran outside the timed stream (side stream or thread): work on a stream kgen does not time "
                f"(a stream of the kernel's own that forward does not join back to the caller's)")
    return None


# ---- KernelBench's protocol (--timing kernelbench) ------------------------------------------------
# As KernelBench's eval times a kernel (src/kernelbench/timing.py, time_execution_with_cuda_event, the default
# timing_method of eval_kernel_against_ref, at commit 423217d): KERNELBENCH_WARMUP untimed calls, each followed by
# a device synchronisation; then trials + KERNELBENCH_DISCARD_FIRST timed calls, the first ones discarded, each:
# synchronise the device, fill a 256 MiB buffer (its L2 flush, since 2025-12), record the start event, call,
# record the end event, synchronise the device. The same inputs every call: nothing is refreshed. It reports the
# mean of the trials (its `runtime`) with the population std, min and max; the median is kept too.
# NOTE: the host launches the call while the flush still runs on the device, so part of the call's host cost
# hides behind the flush: the flush's size changes the time measured, so it is KernelBench's, not l2_flush_buffer's.

KERNELBENCH_WARMUP = 3              # time_execution_with_cuda_event's num_warmup (its eval keeps the default)
KERNELBENCH_DISCARD_FIRST = 1       # its discard_first: timed calls dropped before the trials
KERNELBENCH_FLUSH_SHAPE = (32, 1024, 1024)      # int64, 256 MiB: what its clear_l2_cache fills with 42
_empty_cache = torch.cuda.empty_cache


def kernelbench_flush_buffer(device: torch.device | None = None) -> torch.Tensor:
    """KernelBench's L2 flush buffer, on the current GPU: 256 MiB of int64, filled before every timed call."""
    device = torch.device("cuda", torch.cuda.current_device()) if device is None else torch.device(device)
    return torch.empty(KERNELBENCH_FLUSH_SHAPE, dtype=torch.int64, device=device)


def time_kernelbench(fn, refresh=None, *, trials: int = 100, warmup: int = KERNELBENCH_WARMUP,
                     discard_first: int = KERNELBENCH_DISCARD_FIRST, sync_reps: int = 20,
                     flush: torch.Tensor | None = None, check=None, spot_checks: int = SPOT_CHECKS) -> Timing:
    """fn() timed by KernelBench's protocol (above); a Timing whose mean_ms is what KernelBench reports.

    The same inputs every call: refresh(0), when given, fills them once before the warm-up, so every call (and
    each spot check) is on the inputs of rep 0, whatever an earlier timing left in the buffers. check(output)
    runs on `spot_checks` (SPOT_CHECKS unless the memory plan lowered it) trials drawn at random, after their
    events, as for the other methods; then a device-wide synchronised pass (sync_ms) lets escaped_stream() catch
    work outside the events."""
    if trials < 1:
        raise ValueError(f"KernelBench's protocol needs at least one trial, got {trials}")
    flush = kernelbench_flush_buffer() if flush is None else flush
    if refresh:
        refresh(0)
    for _ in range(warmup):
        fn()
        _synchronize()
    _empty_cache()      # as KernelBench does after its warm-up: the first trial may allocate afresh (and is dropped)
    spot = set(_draw.sample(range(trials), min(spot_checks, trials))) if check else set()
    times, host = [], []
    for call in range(discard_first + trials):
        _synchronize()
        start, end = _Event(enable_timing=True), _Event(enable_timing=True)
        flush.fill_(42)
        start.record()
        h0 = _perf_counter()
        out = fn()
        h1 = _perf_counter()
        end.record()
        _synchronize()
        elapsed_ms = start.elapsed_time(end)
        trial = call - discard_first
        if trial >= 0:
            times.append(elapsed_ms)
            host.append((h1 - h0) * 1e3)
            if trial in spot:
                check(out)
        del out

    sync_times = []
    for _ in range(sync_reps):
        flush.fill_(42)
        _synchronize()
        t0 = _perf_counter()
        fn()
        _synchronize()
        sync_times.append((_perf_counter() - t0) * 1e3)
    return kernelbench_timing(times, sync_ms=statistics.median(sync_times) if sync_times else None,
                              host_ms=statistics.median(host))


def kernelbench_timing(times_ms: list[float], *, sync_ms: float | None = None,
                       host_ms: float | None = None) -> Timing:
    """The Timing of KernelBench trials (ms): the mean it reports, the population std (numpy's np.std, as its
    get_timing_stats takes), min and max, and kgen's median and percentiles beside them. Unrounded: KernelBench
    rounds to 3 significant figures when it writes its JSON, and so does `kgen export kernelbench`."""
    if not times_ms:
        raise ValueError("no trials to summarise")
    ordered = sorted(times_ms)
    return Timing(median_ms=statistics.median(times_ms), min_ms=ordered[0], mean_ms=statistics.fmean(times_ms),
                  p10_ms=_percentile(ordered, 0.1), p90_ms=_percentile(ordered, 0.9), reps=len(times_ms),
                  sync_ms=sync_ms, host_ms=host_ms, method="kernelbench",
                  std_ms=statistics.pstdev(times_ms), max_ms=ordered[-1])


# ----------------------------------------------------------------------------------------------
# the judge's clock around a block of calls
#
# The in-process timing above runs in the candidate's process, so a candidate that reaches the harness
# could report any number. The judge therefore also times a block: it sends a seed nobody knew before and
# a number of calls K; the candidate's harness generates K input sets from that seed, calls forward on
# each and returns a weighted checksum of every output; the judge's own clock spans request to reply.
# The judge checks the checksums against its reference on the same inputs (so the K calls really computed
# K right answers) and subtracts what it measured input generation, the checksums and one round trip of
# the pipes to cost on its side. What is left, per call, bounds the claimed median from below: a claim
# far under it cannot be what the device spent.
#
# NOTE: a bound, not a second measurement: the block's calls are not L2-flushed and run back to back, and
# the judge's own generation cost is subtracted in full even where the GPU overlapped it with forward.
# Both err towards the candidate, so only a claimed time well below what the device can have spent fails.
#
# The third check, ncu's device time (below: ncu_inconsistency), bounds the claim without the host's slack.

# Graph replays exclude the host's launch path, which an eager call pays: on an H200 that was measured at
# 0.05-0.12 ms per Python-launched Triton call (see the module docstring). The block replays the captured
# graph when there is one, but falls back to eager calls, so per call it allows that cost twice over
# (SLACK), and half again of the claim itself for the block's scheduling noise (MARGIN).
BLOCK_MARGIN = 1.5
BLOCK_SLACK_MS = 0.25
# What is subtracted is measured in the judge's process, not the candidate's: the two make the same inputs
# and checksums at slightly different speeds. Where that work dwarfs the call (a 0.28 ms softmax whose
# 512 MiB input costs ~3 ms a set to make and checksum, on an H200), 15% of it was more than the claim itself
# and an honest kernel read "timing inconsistent". So a share of the subtracted work per call is allowed on
# top. The bound is then loose for tasks with large inputs and cheap calls; the roofline floor
# (verifier.physics) still refuses a claim faster than the device's memory and compute allow.
BLOCK_OVERHEAD_SHARE = 0.5
BLOCK_TARGET_MS = 50.0        # the block lasts about this long in claimed time: long against the clock's noise
BLOCK_MIN_CALLS = 5
BLOCK_MAX_CALLS = 2000        # inputs are made one set at a time: memory does not grow with K, time does
BLOCK_GENERATION_MS = 5000.0  # at most this long making a block's inputs, whatever the claim
CHECKSUM_PERIOD = 1 << 22     # the ±1 weight pattern's length; longer outputs reuse it


@dataclass(frozen=True)
class BlockMeasure:
    """What the judge measured around one block (all by its own clock, in ms)."""

    calls: int
    wall_ms: float            # request sent to reply read
    generation_ms: float      # making the K input sets, as the judge measured it on its side
    checksum_ms: float        # the K outputs' weighted checksums, as the judge measured them
    round_trip_ms: float      # one request and reply with no work (a ping)


def block_calls(claimed_ms: float, target_ms: float = BLOCK_TARGET_MS, generation_ms: float = 0.0) -> int:
    """K: calls enough for the block to last target_ms at the claimed speed, within the bounds.

    generation_ms, one input set's making: K is also kept to what BLOCK_GENERATION_MS of making inputs
    allows (on each side), so that tasks with large inputs do not spend minutes on them."""
    if not math.isfinite(claimed_ms) or claimed_ms <= 0:
        wanted = BLOCK_MAX_CALLS
    else:
        wanted = math.ceil(target_ms / claimed_ms)
    if generation_ms > 0:
        wanted = min(wanted, math.floor(BLOCK_GENERATION_MS / generation_ms))
    return max(BLOCK_MIN_CALLS, min(BLOCK_MAX_CALLS, wanted))


def block_per_call_ms(m: BlockMeasure) -> float:
    """Per-call time the block shows: (wall - generation - checksums - one round trip) / K, at least 0."""
    return max(0.0, (m.wall_ms - m.generation_ms - m.checksum_ms - m.round_trip_ms) / max(m.calls, 1))


def block_allowance_ms(claimed_ms: float, m: BlockMeasure, margin: float = BLOCK_MARGIN,
                       slack_ms: float = BLOCK_SLACK_MS, overhead_share: float = BLOCK_OVERHEAD_SHARE) -> float:
    """The most per-call time the block may show for this claim: margin x claim + slack + a share of the
    per-call input generation and checksums that were subtracted (see BLOCK_OVERHEAD_SHARE)."""
    overhead_ms = (m.generation_ms + m.checksum_ms) / max(m.calls, 1)
    return claimed_ms * margin + slack_ms + overhead_share * overhead_ms


def block_inconsistency(claimed_ms: float, m: BlockMeasure, margin: float = BLOCK_MARGIN,
                        slack_ms: float = BLOCK_SLACK_MS,
                        overhead_share: float = BLOCK_OVERHEAD_SHARE) -> str | None:
    """The reason to reject when the claimed median cannot be what the block took per call, else None."""
    per_call = block_per_call_ms(m)
    allowed = block_allowance_ms(claimed_ms, m, margin, slack_ms, overhead_share)
    if per_call <= allowed:
        return None
    overhead_ms = (m.generation_ms + m.checksum_ms) / max(m.calls, 1)
    return (f"timing inconsistent: claimed {claimed_ms:.4f} ms per call, the judge measured {per_call:.4f} ms per "
            f"call over a block of {m.calls} calls by its own clock ({m.wall_ms:.2f} ms in all, of which "
            f"{m.generation_ms + m.checksum_ms:.2f} ms input generation and checksums, {m.round_trip_ms:.2f} ms "
            f"the round trip); more than the {allowed:.4f} ms allowed ({margin:g}x the claim + {slack_ms:g} ms + "
            f"{overhead_share:g}x the {overhead_ms:.4f} ms per call of generation and checksums subtracted)")


def checksum_weights(seed: int, device) -> torch.Tensor:
    """A ±1 float64 pattern of CHECKSUM_PERIOD drawn from seed (its own generator: no global state)."""
    g = torch.Generator(device=device)
    g.manual_seed(seed % 2**62)
    bits = torch.randint(0, 2, (CHECKSUM_PERIOD,), generator=g, device=device, dtype=torch.int64)
    return (bits * 2 - 1).to(torch.float64)


def weighted_checksum(t: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
    """sum(t * w) in float64 (a 0-dim tensor on t's device), w the pattern repeated over t's elements."""
    flat = t.detach().reshape(-1)
    total = torch.zeros((), dtype=torch.float64, device=flat.device)
    period = weights.numel()
    for start in range(0, flat.numel(), period):
        chunk = flat[start:start + period]
        total += (chunk.to(torch.float64) * weights[:chunk.numel()]).sum()
    return total


# ----------------------------------------------------------------------------------------------
# ncu's device time against the claim
#
# profiler.crosscheck runs the candidate's forward under Nsight Compute in a process of its own (the
# verifier's sandbox, started by kgen, not the candidate process that timed itself) and reads
# gpu__time_duration for every kernel launch inside the profiled calls: the device's own start-to-end
# time of each kernel, from hardware counters. Kernels on one stream run one after another, so one call
# takes at least the sum of its stream's kernel times; with several streams, at least the longest
# stream's sum (ncu_ms). No claimed median can honestly be below it.
#
# NOTE: every choice in the measurement errs towards the candidate, so that an honest kernel is never
# called inconsistent: ncu's cache control is off (a kernel may find its data in L2 from the call
# before, which the timed calls' flush does not allow), the longest stream's sum is taken and not the
# sum over streams (kernels of two streams may overlap), and a launch ncu gives no time for counts 0.
# Where it errs the other way: ncu serialises kernels, so kernels a Programmatic Dependent Launch would
# overlap on one stream are summed; and the clocks are the card's own during the profiled calls.
# NCU_MARGIN covers both: honest replays measured 5-19% above ncu's time on the H200, never below.
#
# What it does not hold against: the forward ncu profiles is the candidate's code, run again; one that
# recognises the profiler (its environment, its injected library) can launch less there. That only
# loosens the bound (less device time, so a lower floor); it never rejects an honest kernel, and the
# judge's block still bounds the claim.

NCU_MARGIN = 1.25       # a claim up to 1.25x shorter than ncu's device time passes (see above)
NCU_SLACK_MS = 0.002    # and 2 us more, for forwards of a few microseconds (chosen, not measured)


def ncu_floor_ms(ncu_ms: float, margin: float = NCU_MARGIN, slack_ms: float = NCU_SLACK_MS) -> float:
    """The shortest claim ncu's device time allows: (ncu_ms - slack) / margin, at least 0."""
    return max(0.0, (ncu_ms - slack_ms) / margin)


def ncu_inconsistency(claimed_ms: float, ncu_ms: float, *, kernels: int, streams: int = 1,
                      margin: float = NCU_MARGIN, slack_ms: float = NCU_SLACK_MS) -> str | None:
    """The reason to reject when the claimed time is shorter than ncu's device time allows, else None.

    Rejected when claimed_ms x margin + slack_ms < ncu_ms: the call cannot have taken less than its
    kernels' device time, and the margin is what honest graph replays were measured within."""
    if claimed_ms * margin + slack_ms >= ncu_ms:
        return None
    on = f" on {streams} streams, the longest one's sum" if streams > 1 else ""
    return (f"timing inconsistent: claimed {claimed_ms:.4f} ms per call, but Nsight Compute measured "
            f"{ncu_ms:.4f} ms of device time per call (gpu__time_duration summed over {kernels} kernel "
            f"launch{'' if kernels == 1 else 'es'}{on}); a call cannot take less than its kernels' device time, "
            f"and a claim below {ncu_floor_ms(ncu_ms, margin, slack_ms):.4f} ms ((ncu - {slack_ms:g} ms) / {margin:g}, "
            f"the margin honest graph replays were measured within) is impossible")


def ncu_check(claimed_ms: float, ncu_ms: float, *, kernels: int, streams: int, calls: int,
              margin: float = NCU_MARGIN, slack_ms: float = NCU_SLACK_MS) -> NcuCheck:
    """The NcuCheck record for a claim and ncu's device time: "consistent" or "inconsistent", both numbers in it."""
    reason = ncu_inconsistency(claimed_ms, ncu_ms, kernels=kernels, streams=streams, margin=margin,
                               slack_ms=slack_ms)
    status = "consistent" if reason is None else "inconsistent"
    if reason is None:
        on = f" on {streams} streams" if streams > 1 else ""
        reason = (f"claimed {claimed_ms:.4f} ms per call, Nsight Compute measured {ncu_ms:.4f} ms of device time "
                  f"over {kernels} kernel launch{'' if kernels == 1 else 'es'}{on} (mean of {calls} call"
                  f"{'' if calls == 1 else 's'}); a claim below {ncu_floor_ms(ncu_ms, margin, slack_ms):.4f} ms "
                  f"((ncu - {slack_ms:g} ms) / {margin:g}) would have been rejected")
    return NcuCheck(status=status, reason=reason, claimed_ms=claimed_ms, ncu_ms=ncu_ms, margin=margin, kernels=kernels,
                    streams=streams, calls=calls)
