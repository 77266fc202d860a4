"""The diagnosis without ncu: SASS counts, theoretical occupancy, the fallback report."""

from __future__ import annotations

from pathlib import Path

import pytest

from profiler.fallback import diagnose_fallback, sass_summary, theoretical_occupancy
from profiler.ncu import parse_raw_csv
from profiler.ncu_child import dump_sass
from profiler.roofline import roofline
from verifier.physics import Work, peaks_for

FIXTURES = Path(__file__).parent / "fixtures"
H200_PROPS = {"sm_count": 132, "regs_per_sm": 65536, "max_threads_per_sm": 2048, "shared_per_sm": 233472}


def compile_for_hopper(fn, signature, constexprs, aligned=()):
    """A Triton kernel compiled for sm_90 on the CPU (ptxas ships with Triton): its cubin."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    attrs = {(i,): [["tt.divisibility", 16]] for i in aligned}
    src = ASTSource(fn=fn, signature=signature, constexprs=constexprs, attrs=attrs)
    return triton.compile(src, target=GPUTarget("cuda", 90, 32)).asm["cubin"]


def kernels():
    import triton
    import triton.language as tl

    @triton.jit
    def add(x, y, o, n, BLOCK: tl.constexpr):
        i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        m = i < n
        tl.store(o + i, tl.load(x + i, mask=m) + tl.load(y + i, mask=m), mask=m)

    @triton.jit
    def dot(a, b, c, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
        rm, rn, rk = tl.arange(0, BM), tl.arange(0, BN), tl.arange(0, BK)
        x = tl.load(a + rm[:, None] * BK + rk[None, :])
        y = tl.load(b + rk[:, None] * BN + rn[None, :])
        tl.store(c + rm[:, None] * BN + rn[None, :], tl.dot(x, y))

    return add, dot


def test_sass_of_an_aligned_pointwise_kernel_has_16_byte_loads():
    add, _ = kernels()
    cubin = compile_for_hopper(add, {"x": "*fp32", "y": "*fp32", "o": "*fp32", "n": "i32", "BLOCK": "constexpr"},
                               {"BLOCK": 1024}, aligned=(0, 1, 2, 3))
    counts = sass_summary(dump_sass(cubin))
    assert counts["global_loads"] > 0 and counts["global_loads_128"] == counts["global_loads"]
    assert counts["hmma"] == counts["hgmma"] == 0


def test_sass_of_an_unaligned_pointwise_kernel_has_only_narrow_loads():
    add, _ = kernels()
    cubin = compile_for_hopper(add, {"x": "*fp32", "y": "*fp32", "o": "*fp32", "n": "i32", "BLOCK": "constexpr"},
                               {"BLOCK": 1024})
    counts = sass_summary(dump_sass(cubin))
    assert counts["global_loads"] > 0 and counts["global_loads_128"] == 0


def test_sass_of_a_bf16_dot_on_hopper_uses_warpgroup_mma():
    _, dot = kernels()
    cubin = compile_for_hopper(dot, {"a": "*bf16", "b": "*bf16", "c": "*fp32", "BM": "constexpr", "BN": "constexpr",
                                     "BK": "constexpr"}, {"BM": 64, "BN": 64, "BK": 64}, aligned=(0, 1, 2))
    assert sass_summary(dump_sass(cubin))["hgmma"] > 0


def test_sass_summary_reads_predicated_instructions():
    text = ("        /*0100*/              @!P0 LDG.E.128 R4, desc[UR4][R2.64] ;   /* 0x0000000402047981 */\n"
            "        /*0110*/              @P1 LDG.E.U16 R6, desc[UR4][R2.64] ;    /* 0x0000000402067981 */\n"
            "        /*0120*/              HMMA.16816.F32.BF16 R8, R4, R6, R8 ;    /* 0x000000060408723c */\n")
    counts = sass_summary(text)
    assert (counts["global_loads"], counts["global_loads_128"], counts["hmma"]) == (2, 1, 1)


@pytest.mark.parametrize("name", ["matmul_tl_dot", "softmax"])
def test_theoretical_occupancy_agrees_with_ncu_on_the_fixtures(name):
    k = parse_raw_csv((FIXTURES / f"{name}_raw.csv").read_text())[0]
    occ = theoretical_occupancy(k.block_size, k.registers_per_thread, k.shared_mem_bytes, H200_PROPS)
    assert occ.theoretical_pct == pytest.approx(k.theoretical_occupancy_pct, abs=0.01)
    assert occ.limits["registers"] == k.occupancy_limits["registers"]
    assert "registers" in occ.limiter


def child_report():
    """What `python -m profiler.ncu_child` reports in fallback mode, for two kernels."""
    return {
        "device": "NVIDIA H200",
        "device_props": H200_PROPS,
        "kernels": [
            {"name": "row_softmax", "duration_us": 90.0, "grid": [8192, 1, 1], "block": [128, 1, 1],
             "registers_per_thread": 40, "shared_memory": 16, "est_occupancy_pct": 50},
            {"name": "void at::native::copy_kernel", "duration_us": 10.0, "grid": [100, 1, 1], "block": [256, 1, 1],
             "registers_per_thread": 16, "shared_memory": 0, "est_occupancy_pct": 100},
        ],
        "triton": [{"name": "row_softmax", "n_regs": 55, "n_spills": 12, "shared": 16, "num_warps": 4,
                    "num_stages": 3, "sass": {"global_loads": 8, "global_loads_128": 0, "async_copies": 0,
                                              "hmma": 0, "hgmma": 0, "imma": 0}}],
        "work": None,
        "error": None,
    }


def test_fallback_diagnosis_names_its_source_and_what_is_missing():
    d = diagnose_fallback(child_report(), notes=["ncu not found"])
    assert d.source == "fallback" and d.bound == "unknown"
    assert "ncu not found" in d.notes
    assert any("no stall reasons" in n for n in d.notes)


def test_fallback_diagnosis_uses_triton_metadata_for_the_dominant_kernel():
    d = diagnose_fallback(child_report())
    assert d.kernel == "row_softmax"
    assert [round(k.time_share, 2) for k in d.kernels] == [0.9, 0.1]
    assert (d.registers, d.spills) == (55, 12)
    assert d.occupancy.theoretical_pct == pytest.approx(56.25)
    assert any("Register spills (12)" in f for f in d.findings)
    assert any(f.startswith("SASS: 0 of 8 global loads are 16-byte") for f in d.findings)
    assert any(f.startswith("Narrow global loads") for f in d.findings)


def test_fallback_bound_comes_from_the_roofline_when_there_is_one():
    work = Work(flops=0, bytes=2 * 8192 * 4096 * 4, read_bytes=8192 * 4096 * 4, write_bytes=8192 * 4096 * 4)
    d = diagnose_fallback(child_report(), roofline(work, peaks_for("NVIDIA H200"), measured_ms=0.1))
    assert d.bound == "memory"
    assert any("from the roofline" in n for n in d.notes)


def test_fallback_reports_a_failed_candidate_as_a_note():
    report = dict(child_report(), kernels=[], triton=[], error="RuntimeError: CUDA error: illegal address")
    d = diagnose_fallback(report)
    assert d.kernel == "" and any("illegal address" in n for n in d.notes)


def test_sass_findings_give_the_dtype_aware_tensor_core_advice():
    from profiler.fallback import sass_findings
    from profiler.roofline import roofline
    from verifier.physics import Work, peaks_for

    work = Work(flops=2 * 4096**3, bytes=3 * 4096 * 4096 * 4, dtype="float32")
    findings = sass_findings({"global_loads": 8, "global_loads_128": 8}, roofline(work, peaks_for("NVIDIA H200")))
    assert any("exact fp32 cannot use them" in f for f in findings)
