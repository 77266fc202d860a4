"""The profiled child's job as the parent runs it: a load_inline candidate finds the extension its verification built.

    .venv/bin/python -m pytest tests/profiler/test_child.py -q       # seconds (nvcc for sm_90)
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from profiler.child import _built_extensions
from verifier import inline_build, sandbox

ROOT = Path(__file__).resolve().parents[2]
SCALE = '''
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

source = """
__global__ void scale_kernel(const float* x, float* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = 3.0f * x[i];
}
"""
ext = load_inline(name="kgen_profiled_scale", cpp_sources="void scale(int n);", cuda_sources=source,
                  functions=["scale"])


class ModelNew(nn.Module):
    def forward(self, x):
        return ext.scale(x)
'''


def job_for(tmp_path: Path, source: str) -> dict:
    path = tmp_path / "candidate.py"
    path.write_text(source)
    return {"candidate_path": str(path)}


def test_a_triton_candidate_gets_no_build_variables(tmp_path):
    source = (ROOT / "tests" / "verifier" / "candidates" / "good" / "softmax.py").read_text()
    assert _built_extensions(job_for(tmp_path, source), tmp_path) == ({}, [])


def test_a_verified_load_inline_candidate_is_profiled_with_its_build(tmp_path, monkeypatch):
    if shutil.which("nvcc") is None:
        pytest.skip("nvcc not on PATH")
    monkeypatch.setattr(sandbox, "CACHE_ROOT", tmp_path / "kgen")
    monkeypatch.setenv("TORCH_EXTENSIONS_DIR", str(tmp_path / "torch_extensions"))
    # a build is lent only where the candidate keeps kgen's uid and caches (kgen not root: inline_build)
    monkeypatch.setattr(sandbox, "drops_uid", lambda: False)
    offline = inline_build.toolchain("cpu")
    monkeypatch.setattr(inline_build, "toolchain", lambda device: offline)   # the GPU's toolchain, as it were
    job = job_for(tmp_path, SCALE)
    assert _built_extensions(job, tmp_path) == ({}, [])      # not built: the child builds it, as before
    built = inline_build.prebuild(inline_build.plan_builds(SCALE), "cpu", timeout_s=120)
    assert built.key and _built_extensions(job, tmp_path) == (built.env, [])


def test_as_the_unprivileged_uid_the_child_gets_a_copy_of_the_verified_library(tmp_path, monkeypatch):
    # kgen as root: the child cannot read kgen's cache, so the library its verification kept is copied beside it
    monkeypatch.setattr(sandbox, "CACHE_ROOT", tmp_path / "kgen")
    monkeypatch.setenv("TORCH_EXTENSIONS_DIR", str(tmp_path / "torch_extensions"))
    monkeypatch.setattr(sandbox, "drops_uid", lambda: True)
    tools = {"torch": "2.11.0+cu130", "cuda": "13.0", "python": "3.12.3", "arch": "9.0", "nvcc": "/usr/bin/nvcc",
             "cxx": "", "offline": False}
    monkeypatch.setattr(inline_build, "toolchain", lambda device: tools)
    workdir = tmp_path / "work"
    workdir.mkdir()
    job = job_for(tmp_path, SCALE)
    assert _built_extensions(job, workdir) == ({}, [])      # nothing kept yet: the child builds it
    plan = inline_build.plan_builds(SCALE)
    folder = inline_build.extensions_root() / f"kgen-{inline_build.cache_key(plan, tools)}"
    (folder / "kgen_profiled_scale").mkdir(parents=True)
    (folder / "kgen_profiled_scale" / "kgen_profiled_scale.so").write_bytes(b"\x7fELF the verified build")
    inline_build._record(inline_build.cache_key(plan, tools), folder, plan, 1.0)
    env, lent = _built_extensions(job, workdir)
    assert env == {} and [x["name"] for x in lent] == ["kgen_profiled_scale"]
    assert lent[0]["digest"] == inline_build.call_digest(plan.calls[0].arguments())
    copy = Path(lent[0]["dir"]) / "kgen_profiled_scale.so"
    assert copy.parent.parent == workdir and copy.read_bytes() == b"\x7fELF the verified build"
