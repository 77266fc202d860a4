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
    ("import triton.runtime.jit\nR = triton.runtime.jit.JITFunction.run", "launcher"),
    ("from triton.runtime.jit import JITFunction\nR = JITFunction.run", "launcher"),
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
    "import functools, operator\nn = functools.reduce(operator.mul, (2, 3), 1)",
    "from operator import mul, itemgetter\nkey = itemgetter(0)",
    "import logging\nlogger = logging.getLogger(__name__)\nlogger.setLevel(logging.INFO)\nlogger.info('x')",
    "import logging\nlogging.basicConfig(level=logging.DEBUG)",
    "name = f'{torch.zeros(1).__class__.__name__}()'",     # module level: code that runs
    "name = nn.Module().__class__.__qualname__",
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
    ("import sys\nclass M:\n    def forward(self):\n        return sys.modules\nMODEL = M()", "imports sys"),
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
    ("import torch.utils.dlpack\nd = torch.utils.dlpack", "torch.utils.dlpack"),
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
    "class Z(nn.Module):\n    def forward(self, x):\n        return helper()\nModelNew = Z",  # the harness's class
    "RESULT = helper()",                                                       # import time reaches it
    "@helper\ndef other():\n    pass",                                          # a decorator runs at import
])
def test_a_helper_code_that_runs_can_call_is_judged(use):
    src = "import time\n" + KERNEL + "\ndef helper():\n    return time.perf_counter()\n" + use + "\n"
    p = check_source(src)
    assert p is not None and "imports time" in p.reason, (use, p)


# -- classes only the __main__ block uses, and imports only it reaches -------------------------------------

TIMER = ("class Timer:\n    def __enter__(self):\n        self.t0 = time.perf_counter()\n        return self\n"
         "    def __exit__(self, *exc):\n        self.ms = (time.perf_counter() - self.t0) * 1e3\n")


def test_a_class_only_the_main_block_uses_is_not_judged():
    src = ("import time\n" + KERNEL + "\n" + TIMER +
           "\nif __name__ == '__main__':\n    with Timer() as t:\n        pass\n    print(t.ms)\n")
    assert check_source(src) is None


@pytest.mark.parametrize("use", [
    "class ModelNew2(nn.Module):\n    def forward(self, x):\n        with Timer():\n            return x\nModelNew = ModelNew2",
    "T = Timer()",                                                       # import time builds one
    "def helper(t=Timer):\n    return t\nH = helper()",                 # a default argument names it
    "class Sub(Timer):\n    pass\nS = Sub",                             # a subclass reached at import
])
def test_a_class_code_that_runs_can_reach_is_judged(use):
    p = check_source("import time\n" + KERNEL + "\n" + TIMER + use + "\n")
    assert p is not None and "imports time" in p.reason, (use, p)


@pytest.mark.parametrize("variant", [
    TIMER + "    T0 = time.perf_counter()\n",                                       # class-level code runs at import
    TIMER.replace("    def __exit__(self, *exc):", "    def __exit__(self, *exc, t=time.perf_counter()):"),
    "def deco(c):\n    c().__enter__()\n    return c\n@deco\n" + TIMER,           # a decorator may call its methods
    "class Meta(type):\n    pass\n" + TIMER.replace("class Timer:", "class Timer(metaclass=Meta):"),
    "class Base:\n    def __init_subclass__(cls):\n        cls().__enter__()\n" + TIMER.replace("class Timer:", "class Timer(Base):"),
    "import enum\n" + TIMER.replace("class Timer:", "class Timer(enum.Enum):") + "    A = 1\n",
    TIMER + "    started = __enter__(None)\n",                                        # class body calls its method
])
def test_a_class_whose_statement_can_run_its_methods_is_judged(variant):
    p = check_source("import time\n" + KERNEL + "\n" + variant)
    assert p is not None and "imports time" in p.reason, (variant, p)


def test_a_function_a_file_defined_decorator_gets_is_judged():
    # the decorator runs at import and may call what it decorates
    src = ("import time\n" + KERNEL + "\ndef deco(f):\n    f()\n    return f\n@deco\ndef helper():\n"
           "    return time.perf_counter()\n")
    p = check_source(src)
    assert p is not None and "imports time" in p.reason, p


def test_a_function_a_library_decorator_wraps_is_still_main_only():
    src = ("import functools, time\n" + KERNEL + "\n@functools.lru_cache(maxsize=None)\n@torch.no_grad()\n"
           "def bench():\n    return time.perf_counter()\n\nif __name__ == '__main__':\n    print(bench())\n")
    assert check_source(src) is None


@pytest.mark.parametrize("imports, main", [
    ("from triton.testing import do_bench", "print(do_bench(lambda: None))"),
    ("import triton.testing", "print(triton.testing.do_bench(lambda: None))"),
    ("from torch.testing import assert_close", "assert_close(torch.ones(1), torch.ones(1))"),
    ("import torch.profiler", "print(torch.profiler.profile)"),
    ("from torch.profiler import profile, ProfilerActivity", "print(profile, ProfilerActivity)"),
])
def test_a_forbidden_submodule_only_the_main_block_uses_passes(imports, main):
    assert check_source(imports + "\n" + KERNEL + "\nif __name__ == '__main__':\n    " + main + "\n") is None


@pytest.mark.parametrize("imports, use, words", [
    ("from triton.testing import do_bench", "MS = do_bench(lambda: None)", "imports triton.testing"),
    ("from torch.testing import assert_close", "OK = assert_close", "imports torch.testing"),
    ("import torch.profiler", "P = torch.profiler.profile()", "torch.profiler"),
    ("import torch.profiler", "P = getattr(torch, 'profiler')", "torch.profiler"),
    ("import torch._dynamo", "", "torch's compiler"),                     # its import alone runs its setup
])
def test_a_forbidden_submodule_code_that_runs_uses_is_rejected(imports, use, words):
    p = check_source(imports + "\n" + KERNEL + "\n" + use + "\n")
    assert p is not None and words in p.reason, (imports, use, p)


# -- host compute through Python callables and the interpreter's internals ---------------------------------

@pytest.mark.parametrize("line, words", [
    ("def f(t):\n    return t.apply_(abs)", ".apply_"),
    ("def f(t):\n    return t.map_(t, lambda a, b: a)", ".map_"),
    ("def f(t):\n    return t.map2_(t, t, lambda a, b, c: a)", ".map2_"),
    ("def f(t):\n    return getattr(t, 'apply_')(abs)", "apply_"),
    ("def f(x):\n    return x.handle.data", ".handle"),
    ("def f(x):\n    return getattr(x, 'handle')", "handle"),
    ("def f(x):\n    return x.__getstate__()['handle']", "__getstate__"),
    ("def f(x):\n    match x:\n        case object(handle=h):\n            return h", "match pattern"),
    ("def f(x):\n    match x:\n        case object(__dict__=d):\n            return d", "match pattern"),
])
def test_python_run_on_tensor_values_is_rejected(line, words):
    p = check_source(KERNEL.replace("        return x", "        return f(x)") + "\n" + line + "\n")
    assert p is not None and p.status == "rejected" and words in p.reason, (line, p)


# -- what a @triton.jit body may call ----------------------------------------------------------------------

BODY = '''
import math
import numpy as np
import torch, torch.nn as nn, triton, triton.language as tl

def _py(x):
    return x

@triton.jit
def _jit_helper(x):
    return x * 2.0

@triton.jit
def _add(a, b):
    return a + b

@triton.jit
def k(x_ptr, n, B: tl.constexpr):
    offs = tl.arange(0, B)
    x = tl.load(x_ptr + offs, mask=offs < n)
    BODY_LINE
    tl.store(x_ptr + offs, x, mask=offs < n)

class ModelNew(nn.Module):
    def forward(self, x):
        k[(1,)](x, x.numel(), B=16)
        return x
'''


def body(line: str) -> str:
    return BODY.replace("BODY_LINE", line)


@pytest.mark.parametrize("line, words", [
    ("x = _py(x)", "calls _py, a Python function that is not @triton.jit, inside the @triton.jit kernel k"),
    ("x = np.cumsum(x)", "calls np.cumsum (numpy.cumsum) inside the @triton.jit kernel k"),
    ("x = torch.exp(x)", "calls torch.exp"),
    ("x = math.exp(x)", "calls math.exp on a value that is not a constant"),
    ("y = np.float32", "uses np.float32"),
    ("x = tl.reduce(x, 0, _py)", "uses _py, a Python function that is not @triton.jit"),
    ("x = tl.associative_scan(x, 0, _py)", "uses _py, a Python function"),
    ("x = x.reduce(0, _py)", "uses _py, a Python function"),
    ("f = _py\n    x = f(x)", "uses _py, a Python function"),
    ("x = ModelNew(x)", "calls the class ModelNew"),
    ("x = sorted(x)", "calls sorted, which is neither Triton's nor defined in this file"),
    ("def g(v):\n        return v\n    x = g(x)", "defines a function or class"),
    ("y = lambda v: v", "defines a function or class"),
    ("x = (lambda v: v)(x)", "calls a computed function"),
    ("import numpy\n    x = numpy.cumsum(x)", "imports a module"),
    ("global TABLE", "declares TABLE global"),
    ("x = [_jit_helper][0](x)", "calls a computed function"),
    ("x = x.handle", ".handle"),
])
def test_a_kernel_body_may_call_only_triton(line, words):
    p = check_source(body(line))
    assert p is not None and p.status == "rejected" and words in p.reason, (line, p)
    assert "only Triton's language and other @triton.jit functions compile there" in p.reason or words == ".handle"


def test_a_kernel_body_reading_a_global_that_is_not_a_constant_is_rejected():
    p = check_source(body("x = x + TABLE").replace("def _py(x):", "TABLE = torch.arange(4)\n\ndef _py(x):"))
    assert p is not None and "uses TABLE, a global that is not a constant" in p.reason, p


@pytest.mark.parametrize("decorator", [
    "@triton.jit", "@jit", "@triton.jit(do_not_specialize=['n'])", "@T.jit",
    "@triton.autotune(configs=[triton.Config({})], key=['n'])\n@triton.jit",
    "@triton.heuristics({'EVEN': lambda args: True})\n@triton.jit",
])
def test_every_spelling_of_jit_puts_the_body_under_the_rules(decorator):
    src = body("x = np.cumsum(x)").replace("@triton.jit\ndef k(", decorator + "\ndef k(")
    src = src.replace("import math\n", "import math\nfrom triton import jit\nimport triton as T\n")
    p = check_source(src)
    assert p is not None and "calls np.cumsum" in p.reason, (decorator, p)


def test_a_body_made_a_kernel_by_calling_jit_is_under_the_rules():
    src = body("pass").replace("@triton.jit\ndef k(", "def k_body(")
    src = src.replace("pass\n    tl.store", "x = np.cumsum(x)\n    tl.store") + "\nk = triton.jit(k_body)\n"
    p = check_source(src)
    assert p is not None and "calls np.cumsum (numpy.cumsum) inside the @triton.jit kernel k_body" in p.reason, p


def test_a_python_function_handed_to_a_kernel_is_rejected():
    src = body("x = FN(x)").replace("n, B: tl.constexpr)", "n, FN: tl.constexpr, B: tl.constexpr)")
    p = check_source(src.replace("k[(1,)](x, x.numel(), B=16)", "k[(1,)](x, x.numel(), FN=_py, B=16)"))
    assert p is not None and "passes the Python function _py to the kernel k" in p.reason, p
    # through a variable the launch does not show it: the body's call of its argument is rejected
    p = check_source(src.replace("k[(1,)](x, x.numel(), B=16)", "f = _py\n        k[(1,)](x, x.numel(), FN=f, B=16)"))
    assert p is not None and "calls its argument FN, which no launch in the file passes a @triton.jit function" \
        in p.reason, p
    p = check_source(src.replace("x = FN(x)", "x = tl.reduce(x, 0, FN)").replace(
        "k[(1,)](x, x.numel(), B=16)", "f = _py\n        k[(1,)](x, x.numel(), FN=f, B=16)"))
    assert p is not None and "hands its argument FN to reduce" in p.reason, p


@pytest.mark.parametrize("line", [
    "x = _jit_helper(x)",
    "x = tl.reduce(x, 0, _add)",
    "x = tl.associative_scan(x, 0, _add)",
    "x = tl.sum(x, axis=0) + tl.math.exp(x) + tl.exp2(x * 1.4426950408889634)",
    "x = libdevice.tanh(x) + tl_math.erf(x)",
    "x = x * (1.0 / math.sqrt(2.0)) + math.pi + math.log2(math.e)",
    "x = x * (1.0 / math.sqrt(B))",                                           # a constexpr parameter
    "x = x.to(tl.float32).to(x_ptr.dtype.element_ty)",
    "x = tl.where(x > float('-inf'), x, 0.0)",
    "for i in tl.static_range(2):\n        x = x + i",
    "for i in range(0, n, B):\n        x = x + min(i, 1) + max(1, B // 2)",
    "tl.static_assert(B >= 16)\n    tl.device_assert(n >= 0)",
    "print('x', x)\n    tl.device_print('x', x)",
    "s = triton.cdiv(n, B)",
    "LOG: tl.constexpr = math.log2(B)\n    x = x * LOG",
    "x = x * SCALE + EPS",                                                    # constexpr and plain-literal globals
    "x = tl.full([B], 0, dtype=DTYPE) + x",
    "x = ACT(x)",                                                             # every launch passes a jit function
    "x = x.reduce(0, _add)",
    "x = x[:, None].reshape(B)\n    x = x if isinstance(B, int) else x",
])
def test_what_kernels_are_written_with_passes(line):
    src = body(line).replace("import math\n", "import math\nfrom triton.language import math as tl_math\n"
                                               "from triton.language.extra import libdevice\n"
                                               "SCALE = tl.constexpr(0.5)\nEPS = 1e-5\nDTYPE = tl.float32\n")
    if "ACT" in line:
        src = src.replace("n, B: tl.constexpr)", "n, ACT: tl.constexpr, B: tl.constexpr)").replace(
            "k[(1,)](x, x.numel(), B=16)", "k[(1,)](x, x.numel(), ACT=_jit_helper, B=16)")
    assert check_source(src) is None, (line, check_source(src))


def test_a_class_named_only_in_a_string_annotation_is_judged():
    # typing.get_type_hints would turn the string into the class, and code that runs could call its methods
    src = "import time\n" + KERNEL + "\n" + TIMER + "def f(t: 'Timer'):\n    return t\nF = f\n"
    p = check_source(src)
    assert p is not None and "imports time" in p.reason, p


@pytest.mark.parametrize("line, words", [
    ("import pydoc\nS = pydoc.locate('subprocess')", "pydoc.locate"),
    ("from unittest import mock\nP = mock.patch('time.perf_counter', lambda: 0.0)", "unittest.mock.patch"),
    ("import timeit\nT = timeit.timeit('1')", "executes code from strings"),
    ("import string\nG = string.Formatter().get_field('0.__class__', (1,), {})", "computed names"),
])
def test_modules_that_reach_things_by_a_name_in_a_string_are_rejected(line, words):
    p = check_source(KERNEL + "\n" + line + "\n")
    assert p is not None and words in p.reason, (line, p)


@pytest.mark.parametrize("line, words", [
    ("import operator\nf = operator.attrgetter('a')", "computed names"),
    ("import operator as op\nf = op.methodcaller('a')", "computed names"),
    ("from operator import attrgetter\nf = attrgetter('a')", "computed names"),
    ("import operator\nf = getattr(operator, 'methodcaller')", "computed names"),
    ("import logging\nf = logging.currentframe()", "frames"),
    ("from logging import currentframe\nf = currentframe()", "frames"),
    ("import logging.handlers\nh = logging.handlers.SocketHandler('h', 1)", "sockets"),
    ("import logging\nh = logging.FileHandler('/tmp/k.log')", "files"),
    ("import logging\nm = logging.sys", "sys"),
    ("l = torch.logging", "module alias"),
    ("c = nn.Module().__class__", "walks from an object to its class"),
    ("d = nn.Module().__class__.__dict__", "namespace"),
    ("nn.Module().__class__.__name__ = 'A'", "assigns"),
])
def test_a_restricted_module_or_class_is_used_only_for_its_ordinary_parts(line, words):
    # operator's arithmetic, logging's loggers and an object's class name are what LLM-written files use; the
    # rest of each is a cheat's tool
    p = check_source(KERNEL + "\n" + line + "\n")
    assert p is not None and p.status == "rejected", line
    assert words in p.reason, p.reason


PERF_REPORT = (KERNEL + "\nimport triton.testing\n"
               "@triton.testing.perf_report(triton.testing.Benchmark(x_names=['N'], x_vals=[1], line_arg='p', "
               "line_vals=['a'], line_names=['A'], plot_name='p', args={}))\n"
               "def benchmark(N, p):\n    return triton.testing.do_bench(lambda: None)\n")


def test_a_perf_report_benchmark_only_the_main_block_runs_passes():
    assert check_source(PERF_REPORT + "\nif __name__ == '__main__':\n    benchmark.run(print_data=True)\n") is None


@pytest.mark.parametrize("use", [
    "r = benchmark.run()",                           # code that runs reaches the function it wraps
    "t = triton.testing.do_bench(lambda: None)",
    "triton.testing.perf_report = None",
])
def test_a_perf_report_benchmark_code_that_runs_reaches_is_judged(use):
    p = check_source(PERF_REPORT + "\n" + use + "\n")
    assert p is not None and p.status == "rejected", use

