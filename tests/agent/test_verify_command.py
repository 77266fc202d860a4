"""`kgen verify`'s printed verdict says how the kernel was timed."""

from __future__ import annotations

import pytest

from agent.commands.verify import render
from verifier.records import Timing, VerifyResult


def timed(method: str) -> VerifyResult:
    t = Timing(median_ms=0.2716, min_ms=0.26, mean_ms=0.272, p10_ms=0.265, p90_ms=0.28, reps=100,
               host_ms=0.0119, method=method)
    eager = Timing(median_ms=0.5655, min_ms=0.55, mean_ms=0.566, p10_ms=0.56, p90_ms=0.57, reps=100, method=method)
    return VerifyResult(status="ok", reason="correct on every trial", task="softmax", backend="triton",
                        device="NVIDIA H200", ran=True, trials=5, timing=t, baselines={"eager": eager},
                        speedups={"eager": 0.5655 / 0.2716}, floor_ms=0.169, wall_s=14.5)


@pytest.mark.parametrize("method, words", [("graph", "(CUDA graph replays)"),
                                           ("events", "(each call as issued, the host's cost included)")])
def test_the_candidates_time_names_its_method(method, words):
    text = render(timed(method), "softmax.py")
    line = next(x for x in text.splitlines() if x.startswith("candidate:"))
    assert "0.2716 ms median of 100 " + words in line
    assert "speedup 2.08x" in text
