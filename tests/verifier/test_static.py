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
    ("import threading\nthreading.Thread(target=print)", "threads"),
    ("import subprocess\nsubprocess.run(['true'])", "processes"),
    ("import gc\ngc.collect()", "gc"),
    ("import inspect\ninspect.stack()", "inspect"),
    ("import ctypes\nctypes.memmove", "ctypes"),
    ("import socket\nsocket.socket()", "sockets"),
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
                  "m = load_inline(name='m', cpp_sources='', cuda_sources='__global__ void k() {}')\n"
                  "class ModelNew(nn.Module):\n    def forward(self, x):\n        return m.f(x)\n")
    assert check_source(inline_src) is None


@pytest.mark.parametrize("line, words", [
    ("import torch as T\nT.ops.aten.mm", "torch.ops"),
    ("c = torch.cuda\nc.synchronize = None", "assigns torch.cuda.synchronize"),
    ("getattr(torch, 'compile')", "torch.compile"),
    ("from torch import compile as jit\njit(None)", "imports torch.compile"),
    ("T = torch.Tensor\nT.__le__ = None", "assigns torch.Tensor.__le__"),
    ("import json\njson.dumps = None", "assigns json.dumps"),
    ("del torch.cuda.synchronize", "deletes torch.cuda.synchronize"),
    ("torch.utils._python_dispatch._disable_current_modes()", "op audit"),
    ("x = __builtins__['__import__']('gc')", "__builtins__"),
    ("f = getattr\nf(torch, 'x')", "getattr"),
    ("vars(torch)['comp' + 'ile']", "vars"),
    ("().__class__.__base__.__subclasses__()", "class hierarchy"),
    ("import importlib\nimportlib.import_module('gc')", "importlib"),
    ("import os\nos.sys.modules", "sys"),
    ("import os\nos.system('true')", "shell"),
    ("import os\nos.path.expandvars('$HOME')", "environment"),
    ("import pathlib\npathlib.Path('x').write_text('')", "pathlib"),
    ("import runpy\nrunpy.run_path('x')", "runpy"),
    ("y = x.numpy()", ".numpy"),
    ("y = x.tolist()", ".tolist"),
    ("torch.set_default_dtype(torch.float16)", "dtype"),
    ("torch.backends.cuda.matmul.allow_tf32 = True", "monkey-patches"),
    ("class A:\n    def __del__(self):\n        pass", "__del__"),
    ("raise SystemExit(0)", "exits the process"),
    ("__name__ = '__main__'", "__name__"),
    ("e = None\ne.__traceback__", "frames"),
    ("import triton.runtime.jit", "launcher"),
])
def test_renamed_and_obfuscated_cheats_are_rejected(line, words):
    p = check_source(KERNEL + "\n" + line + "\n")
    assert p is not None and p.status == "rejected", line
    assert words in p.reason, p.reason


@pytest.mark.parametrize("line", [
    "import os\np = os.path.join('a', 'b')",
    "import math\nn = math.ceil(3.5)",
    "trace = []\ntrace.append(1)",
    "def f(input):\n    return input.shape",
    "class B:\n    def __init__(self):\n        self._cache = {}",
    "from triton.runtime import driver",
    "n = torch.cuda.get_device_properties(0).multi_processor_count",
    "if __name__ == '__main__':\n    import time\n    torch.cuda.synchronize()\n    print(time.perf_counter())",
])
def test_ordinary_kernel_code_is_not_rejected(line):
    assert check_source(KERNEL + "\n" + line + "\n") is None, line


def test_reason_names_the_line():
    p = check_source(KERNEL + "\nimport gc\ngc.collect()\n")
    assert p.reason.startswith(f"line {KERNEL.count(chr(10)) + 2}:"), p.reason


def test_empty_and_nul_bytes_are_verdicts_not_exceptions():
    assert "empty" in check_source("  \n").reason
    assert check_source("x = 1\x00\n").status == "compile_error"
