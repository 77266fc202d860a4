"""The roofline floor shared with the verifier's physics check (CPU only)."""

from __future__ import annotations

import json

import pytest
import torch
import torch.nn as nn

from verifier.physics import (PeaksError, Work, count_work, dominant_dtype, floor_ms, peak_table, peaks_for,
                              peaks_note, sol_ms)


@pytest.fixture(autouse=True)
def _no_env_override(monkeypatch):
    monkeypatch.delenv("KGEN_PEAKS", raising=False)


def test_every_row_names_its_source_and_has_bandwidth_and_fp32():
    table = peak_table()
    assert {"H100 SXM", "H200", "A100 SXM 80GB", "L40S", "B200"} <= set(table)
    for p in table.values():
        assert "datasheet" in p.source
        assert p.mem_gbps > 0 and p.fp32_tflops > 0


def test_lookup_by_torch_device_name_substring():
    assert peaks_for("NVIDIA H200").name == "H200"
    assert peaks_for("NVIDIA H100 80GB HBM3").name == "H100 SXM"
    assert peaks_for("NVIDIA A100-SXM4-80GB").name == "A100 SXM 80GB"
    assert peaks_for("NVIDIA L40S").name == "L40S"


def test_unknown_gpu_has_no_peaks_and_a_note_saying_how_to_add_it():
    assert peaks_for("NVIDIA GeForce GTX 1080") is None
    note = peaks_note("NVIDIA GeForce GTX 1080")
    assert "no peak rates known" in note and "KGEN_PEAKS" in note


def test_fp32_compute_roof_is_the_tf32_tensor_rate():
    h200 = peaks_for("NVIDIA H200")
    assert h200.compute_tflops("float32") == h200.tf32_tflops > h200.fp32_tflops


def test_bf16_compute_roof_is_the_dense_tensor_rate():
    h200 = peaks_for("NVIDIA H200")
    assert h200.compute_tflops("bfloat16") == pytest.approx(989.5)
    assert h200.compute_tflops("torch.float16") == pytest.approx(989.5)


def test_floor_of_a_4096_cubed_bf16_matmul_on_h200():
    n = 4096
    work = Work(flops=2 * n ** 3, bytes=3 * n * n * 2, read_bytes=2 * n * n * 2, write_bytes=n * n * 2,
                dtype="bfloat16")
    h200 = peaks_for("NVIDIA H200")
    compute_ms = 2 * n ** 3 / 989.5e12 * 1e3          # 0.139 ms: the compute roof binds
    assert sol_ms(work, h200) == pytest.approx(compute_ms)
    assert floor_ms(work, h200) == pytest.approx(0.8 * compute_ms)
    assert floor_ms(work, h200, margin=1.0) == pytest.approx(compute_ms)


def test_floor_of_an_fp32_matmul_uses_tf32_not_simt():
    n = 4096
    work = Work(flops=2 * n ** 3, bytes=3 * n * n * 4, read_bytes=2 * n * n * 4, write_bytes=n * n * 4)
    h200 = peaks_for("NVIDIA H200")
    assert floor_ms(work, h200, margin=1.0) == pytest.approx(2 * n ** 3 / 494.5e12 * 1e3)


def test_memory_floor_counts_reads_and_only_the_writes_l2_cannot_hold():
    h200 = peaks_for("NVIDIA H200")          # 60 MB of L2
    small = Work(flops=0, bytes=2 * 10 ** 7, read_bytes=10 ** 7, write_bytes=10 ** 7)
    large = Work(flops=0, bytes=2 * 10 ** 9, read_bytes=10 ** 9, write_bytes=10 ** 9)
    assert floor_ms(small, h200, margin=1.0) == pytest.approx(10 ** 7 / 4800e9 * 1e3)
    assert floor_ms(large, h200, margin=1.0) == pytest.approx((2 * 10 ** 9 - 60e6) / 4800e9 * 1e3)
    assert sol_ms(small, h200) == pytest.approx(2 * 10 ** 7 / 4800e9 * 1e3)


def test_override_file_replaces_fields_and_adds_gpus(tmp_path):
    path = tmp_path / "peaks.json"
    path.write_text(json.dumps({
        "H200": {"mem_gbps": 4300},
        "RTX 4090": {"match": ["4090"], "mem_gbps": 1008, "fp32_tflops": 82.6, "bf16_tflops": 165.2},
    }))
    h200 = peaks_for("NVIDIA H200", override=path)
    assert h200.mem_gbps == 4300 and h200.bf16_tflops == pytest.approx(989.5)
    assert "overridden" in h200.source
    assert peaks_for("NVIDIA GeForce RTX 4090", override=path).bf16_tflops == pytest.approx(165.2)


def test_override_from_env_var_as_inline_json(monkeypatch):
    monkeypatch.setenv("KGEN_PEAKS", '{"L40S": {"mem_gbps": 800}}')
    assert peaks_for("NVIDIA L40S").mem_gbps == 800


def test_override_with_unknown_field_is_an_error(tmp_path):
    path = tmp_path / "peaks.json"
    path.write_text(json.dumps({"H200": {"membw": 1}}))
    with pytest.raises(PeaksError, match="unknown fields"):
        peak_table(path)


def test_count_work_of_linear_is_2mnk_flops_and_minimal_bytes():
    m, k, n = 16, 64, 32
    model = nn.Linear(k, n)
    x = torch.randn(m, k)
    work = count_work(model, [x])
    assert work.flops == 2 * m * n * k
    params = (k * n + n) * 4
    assert work.param_bytes == params
    assert work.read_bytes == m * k * 4 + params
    assert work.write_bytes == m * n * 4
    assert work.bytes == work.read_bytes + work.write_bytes
    assert work.dtype == "float32"


def test_count_work_of_a_pointwise_op_is_bytes_only():
    x = torch.randn(100, 7, dtype=torch.bfloat16)
    work = count_work(nn.ReLU(), [x])
    assert work.flops == 0
    assert work.bytes == 2 * 100 * 7 * 2
    assert work.dtype == "bfloat16"


def test_count_work_counts_an_expanded_input_by_its_storage():
    x = torch.randn(1, 64).expand(1000, 64)
    work = count_work(nn.Identity(), [x])
    assert work.read_bytes == 64 * 4


def test_dominant_dtype_is_the_floating_dtype_with_most_bytes():
    model = nn.Linear(8, 8).to(torch.bfloat16)
    ids = torch.zeros(1000, dtype=torch.int64)
    assert dominant_dtype([torch.randn(2, 8, dtype=torch.bfloat16), ids], model) == "bfloat16"
    assert dominant_dtype([ids]) == "float32"


def test_count_work_runs_on_the_meta_device():
    with torch.device("meta"):
        model, x = nn.Linear(64, 32), torch.randn(16, 64)
    work = count_work(model, [x])
    assert work.flops == 2 * 16 * 32 * 64 and work.write_bytes == 16 * 32 * 4


def test_a_time_below_the_floor_is_rejected_with_the_numbers():
    from verifier.physics import Work, floor_ms, impossible, peaks_for

    h200 = peaks_for("NVIDIA H200")
    # bf16 4096^3 matmul: 137 GFLOP; even at the dense bf16 peak it takes well over 0.1 ms
    work = Work(flops=2 * 4096**3, bytes=3 * 4096 * 4096 * 2, read_bytes=2 * 4096 * 4096 * 2,
                write_bytes=4096 * 4096 * 2, dtype="bfloat16")
    floor = floor_ms(work, h200)
    reason = impossible(floor / 2, work, h200)
    assert reason is not None and "below the roofline floor" in reason
    assert f"{floor:.4f} ms" in reason and "H200" in reason
    assert impossible(floor * 1.01, work, h200) is None


def test_an_honest_measured_time_is_above_the_floor():
    from verifier.physics import Work, impossible, peaks_for

    # torch's own fp32 4096^3 matmul took 2.68 ms on an H200 (51 TFLOP/s): never "impossible"
    work = Work(flops=2 * 4096**3, bytes=3 * 4096 * 4096 * 4, read_bytes=2 * 4096 * 4096 * 4,
                write_bytes=4096 * 4096 * 4, dtype="float32")
    assert impossible(2.68, work, peaks_for("NVIDIA H200")) is None
