"""The roofline: intensity, the roof that binds, % of speed-of-light."""

from __future__ import annotations

import pytest

from profiler.roofline import from_child, roofline
from verifier.physics import Work, peaks_for

H200 = peaks_for("NVIDIA H200")


def test_large_bf16_matmul_is_under_the_compute_roof():
    n = 4096
    work = Work(flops=2 * n ** 3, bytes=3 * n * n * 2, read_bytes=2 * n * n * 2, write_bytes=n * n * 2,
                dtype="bfloat16")
    r = roofline(work, H200)
    assert r.roof == "compute"
    assert r.intensity == pytest.approx(2 * n ** 3 / (3 * n * n * 2))
    assert r.ridge == pytest.approx(989.5e12 / 4800e9)


def test_softmax_is_under_the_memory_roof_and_measured_time_gives_sol_pct():
    nbytes = 2 * 8192 * 4096 * 4
    work = Work(flops=0, bytes=nbytes, read_bytes=nbytes // 2, write_bytes=nbytes // 2)
    sol = nbytes / 4800e9 * 1e3
    r = roofline(work, H200, measured_ms=2 * sol)
    assert r.roof == "memory"
    assert r.sol_ms == pytest.approx(sol)
    assert r.sol_pct == pytest.approx(50.0)
    assert r.floor_ms < r.sol_ms


def test_from_child_needs_a_known_gpu_and_counted_work():
    work = Work(flops=10, bytes=100, read_bytes=60, write_bytes=40).to_dict()
    assert from_child({"device": "NVIDIA H200", "work": work}).gpu == "H200"
    assert from_child({"device": "Some Future GPU", "work": work}) is None
    assert from_child({"device": "NVIDIA H200", "work": None}) is None
