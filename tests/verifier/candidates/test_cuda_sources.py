"""The CUDA C++ inside the CUDA candidates compiles with nvcc for sm_90; the broken one does not.

Run: .venv/bin/python -m pytest tests/verifier/candidates/test_cuda_sources.py -q
     (add `-m slow` for the load_inline sources, which include torch's headers: ~1 min each)

The sources are read from the candidates' module-level string constants (the ones holding a
`__global__`), so the files are never imported: cupy and a CUDA build of torch are not needed.
Skipped where nvcc is absent.
"""

import ast
import shutil
import subprocess
import sysconfig
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
KERNELBENCH = HERE.parent / "kernelbench"

pytestmark = pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not on PATH")


def cuda_sources(path: Path) -> list[str]:
    """Every module-level string constant of a candidate that defines a CUDA kernel."""
    sources = []
    for node in ast.parse(path.read_text()).body:
        if (isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant)
                and isinstance(node.value.value, str) and "__global__" in node.value.value):
            sources.append(node.value.value)
    return sources


def nvcc_compile(source: str, tmp_path: Path, extra: list[str] = ()) -> subprocess.CompletedProcess:
    cu = tmp_path / "candidate.cu"
    cu.write_text(source)
    cmd = ["nvcc", "-arch=sm_90", "-std=c++17", *extra, "-c", str(cu), "-o", str(tmp_path / "candidate.o")]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=600)


def torch_include_flags() -> list[str]:
    from torch.utils.cpp_extension import include_paths

    return [f"-I{p}" for p in include_paths()] + [f"-I{sysconfig.get_paths()['include']}"]


def test_cupy_candidate_compiles(tmp_path):
    (source,) = cuda_sources(HERE / "cuda" / "softmax_cupy.py")
    result = nvcc_compile(source, tmp_path)
    assert result.returncode == 0, result.stderr[-2000:]


def test_cuda_compile_error_candidate_fails_with_a_syntax_error(tmp_path):
    (source,) = cuda_sources(HERE / "bad" / "cuda_compile_error.py")
    result = nvcc_compile(source, tmp_path)
    assert result.returncode != 0
    assert 'expected a ";"' in result.stderr


@pytest.mark.slow
@pytest.mark.parametrize("path", [HERE / "cuda" / "softmax_load_inline.py", KERNELBENCH / "19_ReLU_cuda.py",
                                  HERE / "cuda" / "softmax_load_inline_default_stream.py"],
                         ids=["softmax_load_inline", "kernelbench_relu", "softmax_load_inline_default_stream"])
def test_load_inline_candidate_compiles(path, tmp_path):
    (source,) = cuda_sources(path)
    result = nvcc_compile(source, tmp_path, torch_include_flags())
    assert result.returncode == 0, result.stderr[-2000:]
