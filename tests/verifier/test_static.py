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


# -- what an import can reach, not which names a file mentions -----------------------------------

@pytest.mark.parametrize("line", [
    "import sys, time",
    "import os, sys, time, math",
    "from time import perf_counter",
    "import threading",
    "if __name__ == '__main__':\n    import sys\n    sys.exit(0)",
])
def test_an_import_nothing_that_runs_can_reach_is_not_rejected(line):
    assert check_source("import sys, time\n" + KERNEL + "\n" + line + "\n"
                        "if __name__ == '__main__':\n    t = time.perf_counter()\n    print(sys.argv, t)\n") is None


@pytest.mark.parametrize("line, words", [
    ("import time\ndef f():\n    return time.perf_counter()\nT = f()", "imports time"),
    ("import sys\nclass M:\n    def forward(self):\n        return sys.modules", "imports sys"),
    ("from time import perf_counter\nT0 = perf_counter()", "imports time"),
    ("import threading as th\nth.Thread(target=print)", "imports threading"),
    ("import kgen_task", "task's own Model"),
    ("import candidate", "its own module"),
])
def test_an_import_that_code_which_runs_uses_is_rejected(line, words):
    p = check_source(KERNEL + "\n" + line + "\n")
    assert p is not None and words in p.reason, (line, p)


def test_plain_synchronize_calls_are_allowed():
    src = KERNEL.replace("        return x", "        if torch.cuda.is_available():\n"
                                            "            torch.cuda.synchronize()\n"
                                            "            torch.cuda.current_stream().synchronize()\n"
                                            "        return x")
    assert check_source(src) is None


@pytest.mark.parametrize("line, words", [
    ("s = torch.cuda.synchronize", "synchronisation"),
    ("torch.cuda.synchronize = print", "monkey-patches"),
    ("f = lambda: None\nf.synchronize = torch.cuda.synchronize", "synchronisation"),
])
def test_synchronize_named_any_other_way_is_rejected(line, words):
    p = check_source(KERNEL + "\n" + line + "\n")
    assert p is not None and words in p.reason, (line, p)


@pytest.mark.parametrize("line", [
    "import os\nDEBUG = os.environ.get('TRITON_DEBUG', '0') == '1'",
    "import os\nB = int(os.getenv('TRITON_BLOCK', '128'))",
    "import os\nI = 'TRITON_INTERPRET' in os.environ",
    "import os\nv = os.environ['CUDA_VISIBLE_DEVICES']",
])
def test_reading_the_ecosystems_own_switches_is_allowed(line):
    assert check_source(KERNEL + "\n" + line + "\n") is None, line


@pytest.mark.parametrize("line", [
    "import os\nk = os.environ.get('OPENAI_API_KEY')",
    "import os\nname = 'TRITON_X'\nk = os.environ.get(name)",
    "import os\nk = os.environ.copy()",
    "import os\nk = dict(os.environ)",
])
def test_reading_any_other_environment_variable_is_rejected(line):
    p = check_source(KERNEL + "\n" + line + "\n")
    assert p is not None and "environment" in p.reason, (line, p)


@pytest.mark.parametrize("line, module", [
    ("torch.os.system('true')", "os"),
    ("torch.ctypes.memmove(0, 0, 0)", "ctypes"),
    ("torch.builtins.exec('1')", "builtins"),
    ("torch.importlib.import_module('gc')", "importlib"),
    ("import collections\ncollections._sys.modules", "sys"),
    ("import typing\ntyping.sys.modules", "sys"),
    ("t = torch\nt.inspect.stack()", "inspect"),
    ("getattr(torch, 'os')", "os"),
    ("from torch import os as o", "os"),
    ("from collections import _sys", "sys"),
])
def test_a_module_reached_as_an_attribute_of_another_is_rejected(line, module):
    p = check_source(KERNEL + "\n" + line + "\n")
    assert p is not None and f"module {module}" in p.reason, (line, p)


@pytest.mark.parametrize("line, words", [
    ("class V:\n    @property\n    def __array_interface__(self):\n        return {}", "__array_interface__"),
    ("class V:\n    __array_interface__ = {}", "__array_interface__"),
    ("V = type('V', (), {'__array_interface__': {}})", "__array_interface__"),
    ("class V:\n    def __dlpack__(self):\n        return None", "DLPack"),
    ("import numpy\nv = numpy.core.multiarray.from_dlpack(None)", "DLPack"),
    ("import torch.utils.dlpack", "torch.utils.dlpack"),
    ("import numpy as np\nv = np.from_dlpack(None)", "DLPack"),
    ("from torch.utils.cpp_extension import load_inline\nm = load_inline(name='m', cpp_sources='int f();')",
     "no CUDA source"),
    ("import torch.utils.cpp_extension as c\nm = getattr(c, 'load_inline')(name='m', cpp_sources='x')",
     "no CUDA source"),
    ("from torch.utils.cpp_extension import load\nm = load(name='m', sources=['m.cpp'])", "from files"),
])
def test_host_compute_routes_the_op_audit_cannot_see_are_rejected(line, words):
    p = check_source(KERNEL + "\n" + line + "\n")
    assert p is not None and words in p.reason, (line, p)


def test_a_helper_only_the_main_block_calls_is_not_judged():
    src = ("import sys, time\n" + KERNEL +
           "\ndef benchmark(n: int = 10):\n    t = time.perf_counter()\n    print(sys.argv, time.perf_counter() - t)\n"
           "\nif __name__ == '__main__':\n    benchmark()\n")
    assert check_source(src) is None


@pytest.mark.parametrize("use", [
    "class Z(nn.Module):\n    def forward(self, x):\n        return helper()",   # a class body reaches it
    "RESULT = helper()",                                                       # import time reaches it
    "@helper\ndef other():\n    pass",                                          # a decorator runs at import
])
def test_a_helper_code_that_runs_can_call_is_judged(use):
    src = "import time\n" + KERNEL + "\ndef helper():\n    return time.perf_counter()\n" + use + "\n"
    p = check_source(src)
    assert p is not None and "imports time" in p.reason, (use, p)
