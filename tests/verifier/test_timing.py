"""The timing loops' bookkeeping, with the host clock standing in for CUDA events and graphs (no GPU here);
on a GPU (pytest -m gpu), a kernel on the legacy default stream timed under the graph default.

    .venv/bin/python -m pytest tests/verifier/test_timing.py -q
"""

import time
from pathlib import Path

import pytest
import torch

from verifier import timing


class HostClockEvent:
    """A CUDA event that timestamps on the host when recorded."""

    def __init__(self, enable_timing: bool = False):
        self.t = None

    def record(self):
        self.t = time.perf_counter()

    def synchronize(self):
        pass

    def elapsed_time(self, other: "HostClockEvent") -> float:
        return (other.t - self.t) * 1e3


def test_every_call_gets_fresh_inputs_and_the_host_share_is_reported(monkeypatch):
    monkeypatch.setattr(timing, "_Event", HostClockEvent)
    monkeypatch.setattr(timing, "_synchronize", lambda: None)
    refreshed, calls = [], []

    def fn():
        calls.append(len(refreshed))
        time.sleep(0.003)

    t = timing.time_callable(fn, refreshed.append, reps=12, warmup=2, sync_reps=3, flush=torch.empty(8))
    assert t.reps == 12 and len(calls) == 2 + 12 + 3
    assert calls == list(range(1, 18))             # each call saw a refresh of its own before it
    assert refreshed[:2] == [-1, -2] and refreshed[2:14] == list(range(12)) and refreshed[14:] == [12, 13, 14]
    assert 3.0 <= t.min_ms <= t.median_ms < 30
    # the whole call ran on the host here, so the host share is (nearly) all of the time
    assert 3.0 <= t.host_ms <= t.median_ms
    assert t.sync_ms >= 3.0 and timing.escaped_stream(t) is None


def test_work_outside_the_events_is_caught(monkeypatch):
    monkeypatch.setattr(timing, "_Event", HostClockEvent)
    calls, seen = [], []

    def synchronize():
        # after a call of the second pass, the device-wide wait finds 20 ms of work on another stream
        if len(calls) > 1 + 5 and len(calls) != (seen[-1] if seen else 0):
            time.sleep(0.02)
        seen.append(len(calls))

    monkeypatch.setattr(timing, "_synchronize", synchronize)
    t = timing.time_callable(lambda: calls.append(1), reps=5, warmup=1, sync_reps=3, flush=torch.empty(8))
    assert t.median_ms < 1 and t.sync_ms >= 20
    assert "work ran outside the timed stream" in timing.escaped_stream(t)
    assert "work on a stream kgen does not time" in timing.escaped_stream(t)


class FakeStream:
    def wait_stream(self, other):
        pass


class FakeGraph:
    def __init__(self):
        self.replays = 0

    def replay(self):
        self.replays += 1


class Capturing:
    """torch.cuda.graph stand-in: while it is open, calls are being recorded, not run."""

    active = False

    def __init__(self, graph, fail: Exception | None = None):
        self.graph, self.fail = graph, fail

    def __enter__(self):
        Capturing.active = True
        return self

    def __exit__(self, *exc):
        Capturing.active = False
        if self.fail is not None:
            raise self.fail
        return False


def _fake_cuda(monkeypatch, fail: Exception | None = None):
    import contextlib

    monkeypatch.setattr(timing, "_Event", HostClockEvent)
    monkeypatch.setattr(timing, "_synchronize", lambda: None)
    monkeypatch.setattr(timing, "_Stream", FakeStream)
    monkeypatch.setattr(timing, "_current_stream", FakeStream)
    monkeypatch.setattr(timing, "_use_stream", lambda s: contextlib.nullcontext())
    monkeypatch.setattr(timing, "_default_stream", FakeStream)
    graphs = []
    monkeypatch.setattr(timing, "_Graph", lambda: graphs.append(FakeGraph()) or graphs[-1])
    monkeypatch.setattr(timing, "_graph_capture", lambda g: Capturing(g, fail))
    return graphs


def test_graph_timing_captures_once_and_replays_on_fresh_inputs(monkeypatch):
    graphs = _fake_cuda(monkeypatch)
    calls, refreshed = [], []

    def fn():
        calls.append("captured" if Capturing.active else "run")
        return "static output"

    t, captured, note = timing.time_call(fn, refreshed.append, method="graph", reps=7, warmup=2, sync_reps=3,
                                         flush=torch.empty(8))
    assert note == "" and t.method == "graph" and t.reps == 7
    assert calls == ["run", "run", "run", "captured"]       # warm-up on a side stream, then one capture
    assert len(graphs) == 1 and graphs[0].replays == 2 + 7 + 3
    assert refreshed == [-1, -2] + list(range(7)) + [7, 8, 9]
    assert captured.output == "static output"
    captured.replay()
    assert graphs[0].replays == 13


def test_a_call_that_cannot_be_captured_is_timed_with_events_and_says_so(monkeypatch):
    _fake_cuda(monkeypatch, fail=RuntimeError("operation not permitted when stream is capturing\nmore"))
    calls = []
    t, captured, note = timing.time_call(lambda: calls.append(1), method="graph", reps=5, warmup=2, sync_reps=2,
                                         flush=torch.empty(8))
    assert captured is None and t.method == "events" and t.reps == 5
    assert "not capturable in a CUDA graph (RuntimeError: operation not permitted when stream is capturing)" in note
    assert "host's cost of the call included" in note
    assert len(calls) == 3 + 1 + 2 + 5 + 2      # the failed capture's calls, then the plain timing


class Recording(Capturing):
    """A capture that records what fn registers in `Recording.kernels` while open: its replays rerun them."""

    kernels: list = []

    def __enter__(self):
        Recording.kernels = []
        return super().__enter__()

    def __exit__(self, *exc):
        self.graph.kernels = list(Recording.kernels)
        return super().__exit__(*exc)


class ReplayingGraph(FakeGraph):
    kernels: list = []

    def replay(self):
        super().replay()
        for kernel in self.kernels:
            kernel()


def _doubling_call(buffer: torch.Tensor, captured_stream: bool):
    """forward computing 2 * buffer into a fresh output. On the caller's stream a capture records the kernel;
    on the legacy default stream (captured_stream=False) it runs once, uncaptured, as CUDA does."""

    def fn():
        out = torch.empty_like(buffer)

        def kernel():
            out.copy_(buffer * 2)

        kernel()
        if Capturing.active and captured_stream:
            Recording.kernels.append(kernel)
        return out

    return fn


def _recording_cuda(monkeypatch):
    _fake_cuda(monkeypatch)
    monkeypatch.setattr(timing, "_Graph", ReplayingGraph)
    monkeypatch.setattr(timing, "_graph_capture", lambda g: Recording(g))


def _refresher(buffer: torch.Tensor):
    def refresh(rep: int) -> None:
        buffer.copy_(torch.arange(buffer.numel(), dtype=buffer.dtype) * (rep + 0.5))
    return refresh


def test_a_capture_that_missed_the_kernels_is_timed_with_events_and_says_so(monkeypatch):
    _recording_cuda(monkeypatch)
    buffer = torch.zeros(64)
    t, captured, note = timing.time_call(_doubling_call(buffer, captured_stream=False), _refresher(buffer),
                                         method="graph", reps=5, warmup=1, sync_reps=1, flush=torch.empty(8))
    assert captured is None and t.method == "events"
    assert note.startswith("timed with events: the CUDA graph capture missed") and "legacy default stream" in note


def test_plain_events_are_recorded_on_the_default_stream(monkeypatch):
    # the legacy default stream, where KernelBench's kernels run: not a stream the call may have made current
    import contextlib

    _fake_cuda(monkeypatch, fail=RuntimeError("operation not permitted when stream is capturing"))
    default, current = FakeStream(), []

    @contextlib.contextmanager
    def use(stream):
        current.append(stream)
        yield
        current.pop()

    monkeypatch.setattr(timing, "_default_stream", lambda: default)
    monkeypatch.setattr(timing, "_use_stream", use)
    streams = []
    timing.time_call(lambda: streams.append(current[-1] if current else None), method="graph", reps=3, warmup=1,
                     sync_reps=1, flush=torch.empty(8))
    assert streams[-(1 + 3 + 1):] == [default] * 5      # warm-up, timed and synchronised calls


def test_a_capture_that_holds_the_kernels_is_replayed(monkeypatch):
    _recording_cuda(monkeypatch)
    buffer = torch.zeros(64)
    t, captured, note = timing.time_call(_doubling_call(buffer, captured_stream=True), _refresher(buffer),
                                         method="graph", reps=5, warmup=1, sync_reps=1, flush=torch.empty(8))
    assert note == "" and t.method == "graph" and captured is not None


def test_a_missed_capture_is_seen_where_the_call_reuses_its_output_buffer(monkeypatch):
    # the plain call of the probe writes the kept buffer right before the replay: a replay that runs nothing
    # must still be told apart from one that computes
    _recording_cuda(monkeypatch)
    buffer, kept = torch.zeros(64), torch.empty(64)

    def fn():
        kept.copy_(buffer * 2)      # on the legacy default stream: never captured
        return kept

    t, captured, note = timing.time_call(fn, _refresher(buffer), method="graph", reps=5, warmup=1, sync_reps=1,
                                         flush=torch.empty(8))
    assert captured is None and t.method == "events" and "capture missed" in note


def test_the_capture_probe_runs_on_inputs_no_timed_call_uses(monkeypatch):
    _recording_cuda(monkeypatch)
    buffer, seen = torch.zeros(8), []
    refresh = _refresher(buffer)
    timing.time_call(_doubling_call(buffer, captured_stream=True), lambda rep: seen.append(rep) or refresh(rep),
                     method="graph", reps=4, warmup=2, sync_reps=2, flush=torch.empty(8))
    assert seen[:2] == [timing.PROBE_REP] * 2 and timing.PROBE_REP not in seen[2:]
    assert not -2 <= timing.PROBE_REP < 4 + 2


@pytest.mark.parametrize("got, want, agree", [
    (torch.tensor([1.0, 2.0, 3.0]), torch.tensor([1.0, 2.0, 3.0 + 1e-6]), True),      # rounding: the same
    (torch.tensor([1.0, float("nan")]), torch.tensor([1.0, float("nan")]), True),       # NaN where NaN is due
    (torch.tensor([0.0, 0.0, 0.0]), torch.tensor([1.0, 2.0, 3.0]), False),              # the replay wrote nothing
    (torch.tensor([1.0, 2.0]), torch.tensor([1.0, float("nan")]), False),
    (torch.tensor([1.0, 2.0]), torch.tensor([1.0, 2.0, 3.0]), False),                   # another shape
    (torch.tensor([1, 2]), torch.tensor([1, 3]), False),                                # integers: exact
    (torch.tensor([1.0, 2.0]).half(), torch.tensor([1.0, 2.0]), False),                 # another dtype
])
def test_replayed_and_plain_outputs_agree_up_to_rounding_only(got, want, agree):
    assert timing.outputs_agree(got, want) is agree


class StaleErrorFlush:
    """An L2 flush buffer whose first launch raises the error a refused launch inside the capture left behind."""

    def __init__(self):
        self.launches = 0

    def zero_(self):
        self.launches += 1
        if self.launches == 1:
            raise RuntimeError("CUDA error: operation not permitted when stream is capturing")


def test_a_launch_error_left_by_a_refused_capture_is_not_raised_from_the_timing(monkeypatch):
    _fake_cuda(monkeypatch, fail=RuntimeError("CUDA error: operation failed due to a previous error during capture"))
    flush = StaleErrorFlush()
    t, captured, note = timing.time_call(lambda: None, method="graph", reps=4, warmup=1, sync_reps=1, flush=flush)
    assert captured is None and t.reps == 4 and "not capturable" in note
    assert flush.launches == 2 + 4 + 1      # the one that raised, one more, then a flush per timed and synced call


def test_an_output_that_views_the_input_is_no_missed_capture(monkeypatch):
    # a reference that returns a view of its input has no kernel to capture, and a replay that runs nothing
    # is right for it: the probe's poison must not stay in the input
    _recording_cuda(monkeypatch)
    buffer = torch.zeros(64)
    t, captured, note = timing.time_call(lambda: buffer.view(8, 8), _refresher(buffer), method="graph", reps=3,
                                         warmup=1, sync_reps=1, flush=torch.empty(8))
    assert note == "" and t.method == "graph" and not buffer.isnan().any()


def test_a_capture_refused_for_a_synchronisation_says_what_capture_forbids(monkeypatch):
    _fake_cuda(monkeypatch, fail=RuntimeError("CUDA error: operation not permitted when stream is capturing"))
    t, captured, note = timing.time_call(lambda: None, method="graph", reps=3, warmup=1, sync_reps=1,
                                         flush=torch.empty(8))
    assert captured is None and t.method == "events"
    assert "legacy default stream" in note and "device synchronisation" in note


def test_work_left_on_an_unjoined_side_stream_is_refused_not_timed(monkeypatch):
    # CUDA ends such a capture with cudaErrorStreamCaptureUnjoined: forward returned before its work was
    # done. Timing it with plain events instead would time only the caller's stream.
    _fake_cuda(monkeypatch, fail=RuntimeError("CUDA error: capturing stream has unjoined work"))
    calls = []
    with pytest.raises(timing.EscapedStream, match="outside the timed stream.*unjoined work"):
        timing.time_call(lambda: calls.append(1), method="graph", reps=5, warmup=2, sync_reps=2,
                         flush=torch.empty(8))
    assert len(calls) == 3 + 1      # warm-up and the capture; no timed call


def test_unknown_timing_method_is_refused():
    with pytest.raises(ValueError, match="unknown timing method 'cupti'"):
        timing.time_call(lambda: None, method="cupti", flush=torch.empty(8))


def test_timed_calls_are_spot_checked_at_random(monkeypatch):
    monkeypatch.setattr(timing, "_Event", HostClockEvent)
    monkeypatch.setattr(timing, "_synchronize", lambda: None)
    calls, checked = [], []

    def fn():
        calls.append(len(calls) + 1)
        return calls[-1]

    seen = set()
    for _ in range(20):
        calls.clear()
        checked.clear()
        timing.time_callable(fn, reps=30, warmup=4, sync_reps=5, flush=torch.empty(8), check=checked.append)
        # SPOT_CHECKS distinct timed calls (never a warm-up or synchronised one), each checked on its own output
        assert len(checked) == timing.SPOT_CHECKS == len(set(checked))
        assert all(4 < n <= 4 + 30 for n in checked)
        seen.update(checked)
    assert len(seen) > 10        # drawn afresh each time, not a fixed pattern a kernel could learn


def test_a_wrong_timed_call_ends_the_timing(monkeypatch):
    monkeypatch.setattr(timing, "_Event", HostClockEvent)
    monkeypatch.setattr(timing, "_synchronize", lambda: None)

    def check(out):
        if out == "wrong":
            raise AssertionError("a timed call's output is wrong")

    with pytest.raises(AssertionError, match="timed call's output is wrong"):
        timing.time_callable(lambda: "wrong", reps=10, warmup=1, flush=torch.empty(8), check=check)
    assert timing.time_callable(lambda: "right", reps=10, warmup=1, flush=torch.empty(8), check=check).reps == 10


def test_graph_spot_checks_read_what_the_replay_wrote(monkeypatch):
    _fake_cuda(monkeypatch)
    checked = []
    t, captured, _ = timing.time_call(lambda: ["static output"], method="graph", reps=6, warmup=1, sync_reps=1,
                                      flush=torch.empty(8), check=checked.append)
    assert t.method == "graph" and len(checked) == timing.SPOT_CHECKS
    assert all(out is captured.output for out in checked)


def test_the_l2_flush_buffer_is_on_the_gpu(monkeypatch):
    # torch.empty(device=None) is a host buffer: zeroing it would flush nothing on the GPU
    made = []
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda d: type("P", (), {"L2_cache_size": 50 << 20}))
    monkeypatch.setattr(torch, "empty", lambda n, dtype, device: made.append((n, dtype, device)))
    timing.l2_flush_buffer()
    assert made == [(2 * (50 << 20) // 4, torch.int32, torch.device("cuda", 0))]
    with pytest.raises(ValueError, match="must live on the GPU"):
        timing.l2_flush_buffer("cpu")


# ---- ncu's device time against the claim (the decision; the measurement is tests/profiler/test_crosscheck.py)


def test_a_claim_at_or_above_ncus_time_is_consistent():
    assert timing.ncu_inconsistency(0.2716, 0.2576, kernels=1) is None       # a graph replay 5% above ncu
    assert timing.ncu_check(0.2716, 0.2576, kernels=1, streams=1, calls=3).status == "consistent"


def test_a_claim_shorter_than_ncus_time_within_the_margin_is_consistent():
    floor = timing.ncu_floor_ms(0.2576)
    assert floor == pytest.approx((0.2576 - timing.NCU_SLACK_MS) / timing.NCU_MARGIN)
    assert timing.ncu_inconsistency(floor + 1e-6, 0.2576, kernels=1) is None


def test_a_claim_below_ncus_time_over_the_margin_is_inconsistent():
    floor = timing.ncu_floor_ms(0.2576)
    assert timing.ncu_inconsistency(floor - 1e-4, 0.2576, kernels=1) is not None
    assert timing.ncu_check(0.1, 0.2576, kernels=2, streams=1, calls=3).status == "inconsistent"


def test_the_inconsistency_names_both_numbers_and_the_margin():
    reason = timing.ncu_inconsistency(0.1000, 0.2576, kernels=2)
    assert reason.startswith("timing inconsistent: claimed 0.1000 ms per call")
    assert "0.2576 ms of device time per call" in reason and "2 kernel launches" in reason
    assert f"/ {timing.NCU_MARGIN:g}" in reason and "0.2045 ms" in reason


def test_a_consistent_check_names_both_numbers_too():
    check = timing.ncu_check(0.2716, 0.2576, kernels=1, streams=2, calls=3)
    assert "claimed 0.2716 ms" in check.reason and "0.2576 ms of device time" in check.reason
    assert "on 2 streams" in check.reason and "mean of 3 calls" in check.reason
    assert (check.claimed_ms, check.ncu_ms, check.margin, check.streams) == (0.2716, 0.2576, timing.NCU_MARGIN, 2)


def test_the_ncu_margin_is_tighter_than_the_blocks():
    # the device's own time needs neither the block's scheduling margin nor the host's launch slack
    assert 1.0 < timing.NCU_MARGIN < timing.BLOCK_MARGIN and timing.NCU_SLACK_MS < timing.BLOCK_SLACK_MS


# KernelBench's example solutions, in the shared/ beside the checkout or inside it (tests/verifier/test_honest.py)
ROOT = Path(__file__).resolve().parents[2]
_SHARED = [ROOT.parent / "shared", ROOT / "shared"]
PROMPTS = next((p for p in _SHARED if p.is_dir()), _SHARED[0]) / "kernelbench" / "src" / "kernelbench" / "prompts"


@pytest.mark.gpu
def test_a_default_stream_kernel_is_timed_as_its_events_time_it():
    # KernelBench's tiled matmul (1024^3, fp32) launches on the legacy default stream: the graph capture misses
    # it, and a graph that replays nothing would read about 0.01 ms. Under the graph default it must be timed
    # with events, at what an events timing of its own says, and the judge's clock must agree.
    from verifier.records import VerifyConfig
    from verifier.task import load_task
    from verifier.verify import verify

    problem, solution = PROMPTS / "few_shot" / "model_ex_tiled_matmul.py", PROMPTS / "few_shot" / "model_new_ex_tiled_matmul.py"
    if not solution.exists():
        pytest.skip("KernelBench's prompts are not on this machine")
    task, source = load_task(problem), solution.read_text()
    graph = verify(task, source, VerifyConfig(device="cuda", timeout_s=400, baselines=False, timing="graph"))
    events = verify(task, source, VerifyConfig(device="cuda", timeout_s=400, baselines=False, timing="events"))
    assert graph.status == events.status == "ok", (graph.reason, events.reason)
    assert graph.timing.method == "events" and any("capture missed" in f for f in graph.flags), graph.flags
    ratio = graph.timing.median_ms / events.timing.median_ms
    print(f"\ngraph default {graph.timing.median_ms:.4f} ms, events {events.timing.median_ms:.4f} ms, "
          f"the judge's clock {graph.judge_ms_per_call:.4f} ms per call")
    assert 0.67 < ratio < 1.5
    assert graph.timing.median_ms > 0.05
    assert graph.judge_ms_per_call < 1.5 * graph.timing.median_ms + 0.25
