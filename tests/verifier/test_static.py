"""Static checks on the candidate's syntax tree."""

import pytest

from verifier.static import check_source

KERNEL = '''
import torch, torch.nn as nn, triton, triton.language as tl
@triton.jit
def k(x_ptr, n, B: tl.constexpr):
    pass
class ModelNew(nn.Module):
    def forward(self, x):
        k[(1,)](x, 1, B=16)
        return x
'''


def test_plain_triton_candidate_passes():
    assert check_source(KERNEL) is None


def test_syntax_error_is_compile_error():
    p = check_source("def f(:\n")
    assert p.status == "compile_error" and "line 1" in p.reason


def test_missing_modelnew_names_classes_found():
    p = check_source(KERNEL.replace("ModelNew", "ModelX"))
    assert p.status == "rejected" and "ModelX" in p.reason


def test_no_kernel_at_all():
    src = "import torch.nn as nn\nclass ModelNew(nn.Module):\n    def forward(self, x):\n        return x\n"
    assert "no kernel found" in check_source(src).reason


def test_kernel_defined_but_never_launched():
    src = KERNEL.replace("k[(1,)](x, 1, B=16)", "pass")
    assert "never launched" in check_source(src).reason


@pytest.mark.parametrize("line, words", [
    ("import threading", "threads"),
    ("import subprocess", "processes"),
    ("import gc", "gc"),
    ("import inspect", "inspect"),
    ("import ctypes", "ctypes"),
    ("import socket", "sockets"),
    ("from kgen_task import Model", "Model"),
    ("s = torch.cuda.Stream()", "side CUDA stream"),
    ("torch.cuda.synchronize = lambda: None", "monkey-patches"),
    ("time.perf_counter = lambda: 0.0", "monkey-patches"),
    ("f = torch.compile(lambda x: x)", "torch would do the work"),
    ("y = torch.ops.aten.mm", "torch's operators"),
    ("eval('1')", "dynamic code"),
    ("open('/tmp/x', 'w')", "opens files"),
    ("import os\nos.environ['A']", "environment"),
    ("import os\nos._exit(0)", "exits the process"),
    ("exit(0)", "exits the process"),
    ("getattr(torch, 'c' + 'ompile')", "computed name"),
])
def test_cheats_are_rejected_with_reason(line, words):
    p = check_source(KERNEL + "\n" + line + "\n")
    assert p is not None and p.status == "rejected", line
    assert words in p.reason, p.reason


def test_cupy_and_load_inline_count_as_kernels():
    cupy_src = ("import cupy, torch.nn as nn\nmod = cupy.RawModule(code='extern \"C\" __global__ void k(){}')\n"
                "class ModelNew(nn.Module):\n    def forward(self, x):\n        return x\n")
    assert check_source(cupy_src) is None
    inline_src = ("from torch.utils.cpp_extension import load_inline\nimport torch.nn as nn\n"
                  "m = load_inline(name='m', cpp_sources='', cuda_sources='')\n"
                  "class ModelNew(nn.Module):\n    def forward(self, x):\n        return m.f(x)\n")
    assert check_source(inline_src) is None
