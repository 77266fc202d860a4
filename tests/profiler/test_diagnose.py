"""Diagnoses of the four H200 fixtures, and of synthetic multi-kernel and tail cases."""

from __future__ import annotations

from pathlib import Path

import pytest

from profiler.diagnose import diagnose, tail_effect
from profiler.ncu import parse_details_csv, parse_raw_csv
from profiler.records import KernelMetrics

FIXTURES = Path(__file__).parent / "fixtures"


def fixture(name: str):
    return diagnose(parse_raw_csv((FIXTURES / f"{name}_raw.csv").read_text()),
                    parse_details_csv((FIXTURES / f"{name}_details.csv").read_text()))


def test_softmax_is_memory_bound():
    d = fixture("softmax")
    assert d.bound == "memory"
    assert d.mem_sol_pct == pytest.approx(78.98)
    assert d.top_stalls[0].reason == "long_scoreboard"


def test_matmul_is_compute_bound_on_tensor_cores():
    d = fixture("matmul_tl_dot")
    assert d.bound == "compute"
    assert d.tensor_core_pct == pytest.approx(81.98)
    assert "compute-bound on tensor cores" in d.to_text()


def test_matmul_occupancy_is_limited_by_registers_and_shared_memory():
    occ = fixture("matmul_tl_dot").occupancy
    assert occ.theoretical_pct == 25 and occ.limiter == "registers and shared_mem"


def test_transpose_with_conflicts_has_mio_throttle_on_top_fixed_by_padding_or_swizzle():
    d = fixture("transpose_conflicts")
    assert d.bank_conflicts_significant
    top = d.top_stalls[0]
    assert top.reason == "mio_throttle"
    assert "pad" in top.fix and "swizzle" in top.fix


def test_padded_transpose_has_long_scoreboard_on_top_and_no_bank_conflict_advice():
    d = fixture("transpose_padded")
    assert d.bank_conflicts == 145_845            # still some conflicts, but not significant
    assert not d.bank_conflicts_significant
    assert d.top_stalls[0].reason == "long_scoreboard"
    text = d.to_text().lower()
    assert "swizzle" not in text and "pad each" not in text


def test_stall_shares_are_fractions_of_all_stall_ratios():
    d = fixture("transpose_conflicts")
    total = sum(parse_raw_csv((FIXTURES / "transpose_conflicts_raw.csv").read_text())[0].stalls.values())
    assert d.top_stalls[0].share == pytest.approx(87.38 / total)
    assert [s.share for s in d.top_stalls] == sorted((s.share for s in d.top_stalls), reverse=True)


def test_ncu_advice_is_kept_with_its_estimated_speedup_best_first():
    d = fixture("matmul_tl_dot")
    assert d.rules[0].name == "LaunchConfiguration" and d.rules[0].est_speedup_pct == 25.0
    assert all(r.type == "OPT" for r in d.rules)


def test_all_pipes_underused_advice_is_dropped_but_tensor_pipe_advice_kept():
    assert "HighPipeUtilization" not in [r.name for r in fixture("transpose_padded").rules]
    assert "HighPipeUtilization" in [r.name for r in fixture("matmul_tl_dot").rules]


@pytest.mark.parametrize("name", ["softmax", "matmul_tl_dot", "transpose_conflicts", "transpose_padded"])
def test_text_is_at_most_25_lines(name):
    assert len(fixture(name).to_text().splitlines()) <= 25


def test_text_ranks_bound_before_stalls_before_occupancy():
    lines = fixture("softmax").to_text().splitlines()
    where = {key: next(i for i, l in enumerate(lines) if l.startswith(key))
             for key in ("Bound:", "Top stalls", "Occupancy:")}
    assert where["Bound:"] < where["Top stalls"] < where["Occupancy:"]


def test_both_sol_figures_low_means_latency_bound():
    k = KernelMetrics(name="k", duration_us=5.0, time_share=1.0, sm_sol_pct=20.0, mem_sol_pct=35.0)
    assert diagnose([k]).bound == "latency"


def test_several_kernels_dominant_one_in_detail_others_listed():
    big = KernelMetrics(name="gemm", id=0, duration_us=80.0, time_share=0.8, sm_sol_pct=70, mem_sol_pct=30,
                        stalls={"math_pipe_throttle": 3.0, "selected": 1.0})
    small = KernelMetrics(name="bias_add", id=1, duration_us=20.0, time_share=0.2, sm_sol_pct=5, mem_sol_pct=90)
    d = diagnose([small, big])
    assert d.kernel == "gemm" and d.bound == "compute"
    assert d.top_stalls[0].reason == "math_pipe_throttle"
    assert "Other kernels: bias_add 20%" in d.to_text()


def test_repeated_launches_count_together_for_the_dominant_kernel():
    launches = [KernelMetrics(name="row_kernel", id=i, duration_us=10.0, time_share=0.2) for i in range(3)]
    other = KernelMetrics(name="gemm", id=3, duration_us=25.0, time_share=0.4)
    d = diagnose(launches + [other])
    assert d.kernel == "row_kernel" and d.duration_us == 30.0


def test_tail_effect_for_a_thin_last_wave_and_for_less_than_one_wave():
    assert "last one 10% full" in tail_effect(1.1)
    assert "only 50% of one wave" in tail_effect(0.5)
    assert tail_effect(3.88) == "" and tail_effect(62.06) == ""


@pytest.mark.parametrize("dtype, advice", [
    ("float32", "exact fp32 cannot use them"),
    ("bfloat16", "a tl.dot / mma formulation would raise the roof"),
])
def test_compute_bound_without_tensor_cores_advice_depends_on_dtype(dtype, advice):
    from profiler.roofline import roofline
    from verifier.physics import Work, peaks_for

    work = Work(flops=2 * 4096**3, bytes=3 * 4096 * 4096 * 4, dtype=dtype)
    k = KernelMetrics(name="matmul_kernel", duration_us=3000.0, time_share=1.0, sm_sol_pct=75.0, mem_sol_pct=40.0,
                      tensor_pct=0.0)
    text = diagnose([k], roofline=roofline(work, peaks_for("NVIDIA H200"), measured_ms=3.0)).to_text()
    assert advice in text
