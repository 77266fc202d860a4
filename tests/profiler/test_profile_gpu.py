"""profile_candidate on a real GPU: ncu where it can read the counters, else the fallback."""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

CANDIDATE = '''
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def relu_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(y_ptr + offs, tl.maximum(x, 0.0), mask=mask)


class ModelNew(nn.Module):
    def forward(self, x):
        y = torch.empty_like(x)
        n = x.numel()
        relu_kernel[(triton.cdiv(n, 1024),)](x, y, n, BLOCK=1024)
        return y
'''

TASK = '''
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x)


def get_inputs():
    return [torch.randn(4096, 4096)]


def get_init_inputs():
    return []
'''


@pytest.mark.gpu
def test_profile_candidate_on_a_triton_relu(tmp_path):
    from profiler.profile import profile_candidate
    from verifier.task import load_task

    task_path = tmp_path / "relu.py"
    task_path.write_text(TASK)
    d = profile_candidate(load_task(task_path), CANDIDATE, timeout_s=300)
    assert d.source in ("ncu", "fallback")
    assert any("relu_kernel" in k.name for k in d.kernels), d.to_text()
    if d.source == "ncu":
        assert d.bound == "memory" and d.top_stalls
        # one profiling run, both pages read back from its report: no second and third run
        assert not any("two passes" in n for n in d.notes), d.notes
        assert "ncu (metrics and sections, one pass)" in d.passes_s and "ncu raw metrics" not in d.passes_s
        assert d.rules, "ncu's advice (the details page) should come back from the report"
    else:
        assert d.notes                       # says why ncu was not used
    assert d.roofline is not None and d.roofline.roof == "memory"
    assert len(d.to_text().splitlines()) <= 25


@pytest.mark.gpu
def test_fallback_on_a_triton_relu_reads_compile_metadata(tmp_path):
    from profiler.fallback import profile_fallback
    from verifier.task import load_task

    task_path = tmp_path / "relu.py"
    task_path.write_text(TASK)
    d = profile_fallback(load_task(task_path), CANDIDATE, timeout_s=300)
    assert d.source == "fallback" and d.kernel.startswith("relu_kernel"), d.to_text()
    assert d.registers and d.spills == 0
    assert d.occupancy is not None
