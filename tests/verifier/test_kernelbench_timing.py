"""`--timing kernelbench`: KernelBench's protocol, with scripted CUDA events (CPU) and on a GPU.

The CPU tests drive verifier.timing.time_kernelbench with events that report
hand-made times, so the order of its steps (warm-up, the dropped first trial,
the flush before each call, no refresh) and its arithmetic (KernelBench's mean,
population std, min, max; the median beside them) are checked exactly.

    .venv/bin/python -m pytest tests/verifier/test_kernelbench_timing.py -q
"""

from __future__ import annotations

import statistics

import pytest
import torch

from verifier import timing
from verifier.protocols import PROTOCOLS, protocol_line, reported_ms
from verifier.records import TIMING_METHODS, Timing, VerifyResult


class Script:
    """What happened, in order, and the elapsed times the events report (one per timed call, in order)."""

    def __init__(self, elapsed_ms: list[float]):
        self.elapsed_ms = list(elapsed_ms)
        self.log: list[str] = []

    def event(self, enable_timing: bool = False):
        return ScriptedEvent(self)

    def synchronize(self):
        self.log.append("sync")


class ScriptedEvent:
    def __init__(self, script: Script):
        self.script = script

    def record(self):
        self.script.log.append("record")

    def synchronize(self):
        self.script.log.append("event sync")

    def elapsed_time(self, other) -> float:
        return self.script.elapsed_ms.pop(0)


class Flush:
    def __init__(self, script: Script):
        self.script = script

    def fill_(self, value):
        self.script.log.append(f"flush {value}")


@pytest.fixture
def script(monkeypatch):
    def make(elapsed_ms):
        s = Script(elapsed_ms)
        monkeypatch.setattr(timing, "_Event", s.event)
        monkeypatch.setattr(timing, "_synchronize", s.synchronize)
        monkeypatch.setattr(timing, "_empty_cache", lambda: s.log.append("empty cache"))
        return s
    return make


def test_the_first_timed_call_is_dropped_and_the_mean_is_of_the_rest(script):
    s = script([50.0, 1.0, 2.0, 3.0, 6.0])       # the first (discarded) call was slow: it must not count
    t = timing.time_kernelbench(lambda: None, trials=4, sync_reps=0, flush=Flush(s))
    assert (t.reps, t.method) == (4, "kernelbench")
    assert t.mean_ms == pytest.approx(3.0) and t.median_ms == pytest.approx(2.5)
    assert (t.min_ms, t.max_ms) == (1.0, 6.0)
    assert t.std_ms == pytest.approx(statistics.pstdev([1.0, 2.0, 3.0, 6.0]))   # np.std: the population's
    assert t.std_ms != pytest.approx(statistics.stdev([1.0, 2.0, 3.0, 6.0]))


def test_three_warm_up_calls_each_synchronised_then_flush_events_call_events_sync(script):
    s = script([1.0, 1.0])
    calls = []
    timing.time_kernelbench(lambda: calls.append(1) or s.log.append("call"), trials=1, sync_reps=0, flush=Flush(s))
    assert len(calls) == timing.KERNELBENCH_WARMUP + timing.KERNELBENCH_DISCARD_FIRST + 1 == 5
    warm = ["call", "sync"] * 3 + ["empty cache"]
    trial = ["sync", "flush 42", "record", "call", "record", "sync"]
    assert s.log == warm + trial + trial


def test_the_same_inputs_every_call_filled_once_as_rep_0_before_the_first_call(script, monkeypatch):
    # rep 0 is what each spot check reports, so the judge checks it against the inputs of rep 0: the buffers must
    # hold those whatever an earlier timing (a graph replay's fresh set) left in them
    s = script([1.0] * 11)
    monkeypatch.setattr(timing, "kernelbench_flush_buffer", lambda device=None: Flush(s))
    t, captured, note = timing.time_call(lambda: s.log.append("call"), lambda rep: s.log.append(f"refresh {rep}"),
                                         method="kernelbench", reps=10, warmup=99, sync_reps=0)
    assert [e for e in s.log if e.startswith("refresh")] == ["refresh 0"] and s.log[0] == "refresh 0"
    assert captured is None and note == ""
    assert t.method == "kernelbench" and t.reps == 10         # reps are KernelBench's trials; its own warm-up


def test_spot_checks_see_timed_outputs_never_the_dropped_one(script):
    s = script([1.0] * 31)
    calls, checked = [], []

    def fn():
        calls.append(len(calls) + 1)
        return calls[-1]

    timing.time_kernelbench(fn, trials=30, sync_reps=0, flush=Flush(s), check=checked.append)
    first_trial = timing.KERNELBENCH_WARMUP + timing.KERNELBENCH_DISCARD_FIRST + 1
    assert len(checked) == timing.SPOT_CHECKS and all(first_trial <= n < first_trial + 30 for n in checked)


def test_work_outside_the_events_is_still_caught(script, monkeypatch):
    s = script([0.01] * 6)
    clock = iter(range(0, 10_000, 1))       # each host clock reading 1 s after the last: 1000 ms a synced call
    monkeypatch.setattr(timing, "_perf_counter", lambda: float(next(clock)))
    t = timing.time_kernelbench(lambda: None, trials=5, sync_reps=3, flush=Flush(s))
    assert t.sync_ms == pytest.approx(1000.0)
    assert "work ran outside the timed stream" in timing.escaped_stream(t)


def test_no_trials_is_refused():
    with pytest.raises(ValueError, match="at least one trial"):
        timing.time_kernelbench(lambda: None, trials=0, flush=object())


def test_kernelbench_is_a_timing_method_with_a_protocol_for_every_method():
    assert "kernelbench" in TIMING_METHODS and set(PROTOCOLS) == set(TIMING_METHODS)


def test_the_protocol_line_says_what_is_timed_and_which_statistic():
    assert protocol_line("kernelbench", 100).endswith("same inputs every call, L2 flushed, mean of 100)")
    assert protocol_line("graph", 100) == "graph (CUDA-graph replays, fresh inputs every call, L2 flushed, median of 100)"
    with pytest.raises(ValueError, match="unknown timing method 'cupti'"):
        protocol_line("cupti", 100)


def _timing(median: float, mean: float, method: str) -> Timing:
    return Timing(median_ms=median, min_ms=median, mean_ms=mean, p10_ms=median, p90_ms=mean, reps=100, method=method)


def test_kernelbench_speedups_compare_means_the_others_medians():
    from verifier.verify import _speedups

    kb = VerifyResult(status="ok", reason="", timing=_timing(1.0, 2.0, "kernelbench"),
                      baselines={"eager": _timing(3.0, 8.0, "kernelbench")})
    _speedups(kb)
    assert kb.speedups == {"eager": pytest.approx(4.0)}        # 8 / 2, KernelBench's ref_runtime / runtime
    graph = VerifyResult(status="ok", reason="", timing=_timing(1.0, 2.0, "graph"),
                         baselines={"eager": _timing(3.0, 8.0, "graph")})
    _speedups(graph)
    assert graph.speedups == {"eager": pytest.approx(3.0)}
    assert reported_ms(kb.timing) == 2.0 and reported_ms(graph.timing) == 1.0


def test_a_kernelbench_timing_survives_the_result_record():
    t = timing.kernelbench_timing([1.0, 3.0])
    back = VerifyResult.from_dict(VerifyResult(status="ok", reason="", timing=t).to_dict()).timing
    assert (back.std_ms, back.max_ms, back.method) == (1.0, 3.0, "kernelbench")


# ---- on a GPU ------------------------------------------------------------------------------------


@pytest.mark.gpu
def test_kernelbench_timing_on_a_gpu_reports_a_mean_close_to_its_median():
    x = torch.randn(4096, 4096, device="cuda")
    t, captured, note = timing.time_call(lambda: torch.softmax(x, dim=-1), method="kernelbench", reps=100)
    assert captured is None and note == "" and t.method == "kernelbench" and t.reps == 100
    assert 0 < t.min_ms <= t.median_ms <= t.max_ms and t.min_ms <= t.mean_ms <= t.max_ms
    assert t.std_ms is not None and t.std_ms < t.mean_ms
    assert timing.escaped_stream(t) is None


@pytest.mark.gpu
def test_verify_with_kernelbench_timing_gives_mean_based_speedups(tmp_path):
    from pathlib import Path

    from verifier.records import VerifyConfig
    from verifier.task import load_task
    from verifier.verify import verify

    root = Path(__file__).resolve().parents[2]
    task = load_task(root / "tasks" / "softmax.py")
    source = (root / "tests" / "verifier" / "candidates" / "good" / "softmax.py").read_text()
    result = verify(task, source, VerifyConfig(device="cuda", timing="kernelbench", cache_dir=tmp_path))
    assert result.passed, result.reason
    assert result.timing.method == "kernelbench" and result.timing.std_ms is not None
    eager = result.baselines["eager"]
    assert eager.method == "kernelbench"
    assert result.speedups["eager"] == pytest.approx(eager.mean_ms / result.timing.mean_ms)
