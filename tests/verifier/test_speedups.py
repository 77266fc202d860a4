"""Speedups against each baseline, and the flag for a person to review an outsized one."""

from verifier.records import Timing, VerifyResult
from verifier.verify import REVIEW_SPEEDUP, _speedups


def timing(ms: float) -> Timing:
    return Timing(median_ms=ms, min_ms=ms, mean_ms=ms, p10_ms=ms, p90_ms=ms, reps=100)


def result(cand_ms: float, **baselines: float) -> VerifyResult:
    return VerifyResult(status="ok", reason="", timing=timing(cand_ms),
                        baselines={k.replace("_", "-"): timing(v) for k, v in baselines.items()})


def test_speedup_is_baseline_median_over_candidate_median():
    r = result(0.5, eager=1.0, compile=0.75)
    _speedups(r)
    assert r.speedups == {"eager": 2.0, "compile": 1.5}
    assert r.best_speedup == 1.5   # against the faster baseline
    assert not r.flags


def test_more_than_10x_over_eager_is_flagged_not_rejected():
    r = result(0.1, eager=1.2, compile=0.3)
    _speedups(r)
    assert r.status == "ok"
    assert any(f"above {REVIEW_SPEEDUP:.0f}x, review by hand" in f for f in r.flags)


def test_exactly_10x_is_not_flagged():
    r = result(0.1, eager=1.0)
    _speedups(r)
    assert not r.flags


def test_a_baseline_timed_by_another_method_is_flagged():
    # a baseline that could not be captured in a CUDA graph was timed with events and cached that way
    r = result(0.5, eager=1.0, compile=0.75)
    r.timing.method = r.baselines["eager"].method = "graph"
    _speedups(r)
    assert r.speedups["compile"] == 1.5
    assert r.flags == ["compile was timed as events, the candidate as graph: that speedup compares two timing methods"]
