"""Static checks on a candidate's source, on its syntax tree (never regexes).

    from verifier.static import check_source
    problem = check_source(source)   # None, or a StaticProblem(status, reason)

A candidate must define `ModelNew` and contain at least one kernel of its own:
a `@triton.jit` (or `@triton.autotune`-wrapped) function that it launches
(`kernel[grid](...)`), or CUDA C++ compiled through `cupy.RawModule` /
`cupy.RawKernel` or `torch.utils.cpp_extension.load_inline`. It must not reach
for the things that cheat a harness: threads, processes, side streams,
reading the harness's memory or frames, patching torch/triton/timing, writing
files or opening sockets, computing on the host. Each rule names the exploit
it stops.

Names are resolved before they are judged, so renaming does not hide them:
`import torch as T` makes `T.ops` read as `torch.ops`; `c = torch.cuda` makes
`c.synchronize` read as `torch.cuda.synchronize`; `getattr(torch, "compile")`
reads as `torch.compile`; `from torch import compile` binds `torch.compile`.
A name built at run time (`getattr(x, "c" + "ompile")`) is rejected as such.
A module reached as an attribute of another (`torch.os`, `collections._sys`,
`typing.sys`, `getattr(torch, "os")`) is judged as the module itself.

What is judged is the code that can run inside the verifier: import-time
statements (class statements included: a class's bases, decorators and
class-level code), ModelNew's methods, and the top-level functions and classes
(their methods) that any of it can reach. The body of `if __name__ == "__main__":`
and of the helpers only it reaches (a `def benchmark():`, a `class Timer:`) never
run as module "candidate", so an `import sys, time`, a `from triton.testing import
do_bench` or an `import torch.profiler` that only they use binds names nothing
reachable reads, and passes (a private module, `torch._dynamo`, is rejected
even unused: importing it runs its setup). A class whose statement may call its
own methods (a decorator or metaclass, a base other than object or nn.Module)
counts as reachable; so does a function with a decorator that might call it.

The body of every @triton.jit function (and @triton.constexpr_function) is held
to what compiles on a GPU: Triton's language under any alias (tl, libdevice,
tl.math), other @triton.jit functions, constants, the few builtins Triton knows,
and math on constants. A call of a plain Python function, numpy, torch or any
other module there, or of a function handed in as an argument, is rejected:
under the CPU interpreter the body is Python and would run it on the host.
`.handle` (the interpreter's host array of a block) and Tensor.apply_/map_/map2_
(a Python function per element, through no torch operator) are rejected
anywhere. A plain `synchronize()` call
only waits (the timer brackets its own events) and passes; an
`os.environ.get("TRITON_...")` with a constant name of the ecosystem's own
switches passes.

This is the first of several layers (see verifier/integrity.py for the
run-time ones): it is a list of what must not appear, so it is strict on
purpose; what slips past it meets the run-time checks.
"""

from __future__ import annotations

import ast
from collections import deque
from dataclasses import dataclass


@dataclass(frozen=True)
class StaticProblem:
    status: str   # "compile_error" (not Python) or "rejected"
    reason: str


# Modules whose import means the candidate reaches outside its kernels (checked on the top-level name).
FORBIDDEN_MODULES = {
    "threading": "starts threads (work the timer does not wait for)",
    "_thread": "starts threads (work the timer does not wait for)",
    "concurrent": "starts threads or processes (work the timer does not wait for)",
    "multiprocessing": "starts processes",
    "subprocess": "starts processes",
    "pty": "starts processes",
    "_posixsubprocess": "starts processes",
    "asyncio": "runs work outside the timed call",
    "sched": "runs work outside the timed call",
    "gc": "reads the harness's objects (gc)",
    "inspect": "reads the harness's frames (inspect)",
    "traceback": "reads the harness's frames (traceback)",
    "warnings": "hooks the harness's warnings",
    "faulthandler": "reads the harness's frames",
    "tracemalloc": "reads the harness's memory",
    "weakref": "runs code when the harness collects objects (weakref.finalize)",
    "atexit": "runs code at exit, after the verdict",
    "ctypes": "reaches raw memory or native code (ctypes)",
    "cffi": "reaches raw memory or native code (cffi)",
    "mmap": "reaches raw memory (mmap)",
    "resource": "changes the process's limits",
    "socket": "opens network sockets",
    "ssl": "uses the network",
    "select": "waits on file descriptors",
    "selectors": "waits on file descriptors",
    "urllib": "uses the network",
    "http": "uses the network",
    "ftplib": "uses the network",
    "smtplib": "uses the network",
    "xmlrpc": "uses the network",
    "requests": "uses the network",
    "webbrowser": "starts processes",
    "signal": "installs signal handlers",
    "importlib": "imports modules dynamically",
    "pkgutil": "imports modules dynamically",
    "runpy": "runs other Python files (the task's own Model)",
    "builtins": "patches builtins",
    "code": "executes dynamic code",
    "codeop": "executes dynamic code",
    "types": "builds functions or modules from code objects",
    "dis": "reads code objects",
    "pickle": "loads pickled objects",
    "dill": "loads pickled objects",
    "cloudpickle": "loads pickled objects",
    "copyreg": "changes how objects are pickled",
    "marshal": "loads code objects",
    "shelve": "reads and writes files",
    "io": "opens files (io.open)",
    "pathlib": "reads and writes files (pathlib)",
    "shutil": "manipulates files",
    "tempfile": "writes files",
    "glob": "lists files",
    "fileinput": "reads files",
    "linecache": "reads files",
    "zipfile": "reads and writes files",
    "tarfile": "reads and writes files",
    "sqlite3": "reads and writes files",
    "fcntl": "manipulates file descriptors",
    "posix": "reaches the process and file system",
    "nt": "reaches the process and file system",
    "platform": "starts processes (platform.popen)",
    "sysconfig": "reads the interpreter's configuration",
    "site": "changes the import path",
    "pdb": "stops in a debugger",
    "bdb": "traces the harness",
    "trace": "traces the harness",
    "cProfile": "traces the harness",
    "profile": "traces the harness",
    "verifier": "imports the verifier",
    "profiler": "imports the profiler",
    "agent": "imports kgen itself",
    "kgen_task": "imports the task's own Model",
    "sys": "reaches the interpreter's internals (sys)",
    "time": "reads or patches timers",
    # Modules that reach objects, modules or code by a name in a string, round the import checks.
    "pydoc": "imports modules by name (pydoc.locate)",
    "zipimport": "imports modules dynamically",
    "unittest": "patches objects by name (unittest.mock.patch)",
    "doctest": "executes code from strings",
    "timeit": "executes code from strings and times things itself",
    "string": "reaches attributes by computed names (string.Formatter.get_field)",
}
# Modules below torch/triton a candidate must not import or reach (prefix match on the resolved name).
FORBIDDEN_SUBMODULES = {
    "torch._dynamo": "reaches torch's compiler",
    "torch._inductor": "reaches torch's compiler",
    "torch.compile": "torch would do the work (torch.compile)",
    "torch.jit": "torch would do the work (TorchScript)",
    "torch.fx": "rewrites the model with torch's tracer",
    "torch.export": "torch would do the work (torch.export)",
    "torch.ops": "calls torch's operators directly",
    "torch.library": "registers operators behind the audit's back",
    "torch.overrides": "reaches torch's dispatch machinery",
    "torch.utils._python_dispatch": "reaches torch's dispatch machinery",
    "torch.utils.flop_counter": "reaches torch's dispatch machinery",
    "torch.utils.dlpack": "hands tensors to another library to compute on",
    "torch.multiprocessing": "starts processes",
    "torch.distributed": "starts processes or talks to the network",
    "torch.profiler": "starts a profiler (the harness's own counts the launches)",
    "torch.autograd.profiler": "starts a profiler (the harness's own counts the launches)",
    "torch.hub": "downloads code",
    "torch.backends": "changes torch's precision or backend flags",
    "torch.testing": "reaches the harness's comparison functions",
    "torch.random": "reads or sets the random state the inputs come from",
    "torch.from_numpy": "computes on the host (numpy) instead of in a kernel",
    "torch.frombuffer": "computes on the host instead of in a kernel",
    "torch.from_file": "reads files",
    "torch.load": "loads pickled objects",
    "torch.save": "writes files",
    "torch.set_default_dtype": "changes the dtype the harness makes inputs in",
    "torch.set_default_tensor_type": "changes the dtype the harness makes inputs in",
    "torch.set_default_device": "changes the device the harness makes inputs on",
    "torch.set_float32_matmul_precision": "changes the reference's precision",
    "torch.use_deterministic_algorithms": "changes torch's global flags",
    "torch.set_flush_denormal": "changes torch's global flags",
    "torch.set_rng_state": "sets the random state the inputs come from",
    "torch.get_rng_state": "reads the random state the inputs come from",
    "torch.cuda.synchronize": "touches the timer's synchronisation",
    "torch.cuda.Event": "touches the timer's events",
    "torch.cuda.graph": "captures work into a CUDA graph outside the timed call",
    "torch.cuda.graphs": "captures work into a CUDA graph outside the timed call",
    "torch.cuda.CUDAGraph": "captures work into a CUDA graph outside the timed call",
    "torch.cuda.set_sync_debug_mode": "touches the timer's synchronisation",
    "torch.cuda.streams": "uses a side CUDA stream the timer does not wait for",
    "torch.cuda.stream": "switches CUDA streams",
    "torch.cuda.set_stream": "switches CUDA streams",
    "torch.cuda.set_rng_state": "sets the random state the inputs come from",
    "torch.cuda.get_rng_state": "reads the random state the inputs come from",
    "torch.cuda.memory": "reads the allocator's state",
    "torch.cuda.caching_allocator_alloc": "reaches raw device memory",
    "torch.cuda.profiler": "starts a profiler",
    "triton.runtime.jit": "reaches Triton's launcher (the harness counts launches there)",
    "triton.runtime.interpreter": "reaches Triton's launcher (the harness counts launches there)",
    "triton.runtime.JITFunction": "reaches Triton's launcher (the harness counts launches there)",
    "triton.runtime.InterpretedFunction": "reaches Triton's launcher (the harness counts launches there)",
    "triton.JITFunction": "reaches Triton's launcher (the harness counts launches there)",
    "triton.runtime.cache": "reaches Triton's shared kernel cache",
    "triton.runtime.build": "reaches Triton's build machinery",
    "triton.compiler": "reaches Triton's compiler internals",
    "triton.knobs": "changes Triton's runtime switches",
    "triton.backends": "reaches Triton's driver",
    "triton.testing": "times things itself",
    "cupy.cuda.runtime.streamCreate": "uses a side CUDA stream the timer does not wait for",
    "cupy.cuda.runtime.streamCreateWithFlags": "uses a side CUDA stream the timer does not wait for",
    "cupy.cuda.runtime.streamCreateWithPriority": "uses a side CUDA stream the timer does not wait for",
    "cupy.cuda.Stream": "uses a side CUDA stream the timer does not wait for",
    "cupy.cuda.stream": "switches CUDA streams",
    "cupy.cuda.graph": "captures work into a CUDA graph",
    "cupy.cublas": "a library (cuBLAS) would do the work",
    "cupy.linalg": "a library would do the work",
    "cupy.fft": "a library would do the work",
    "cupy.random": "a library would do the work",
    "cupy.matmul": "a library (cuBLAS) would do the work",
    "cupy.dot": "a library (cuBLAS) would do the work",
    "cupy.tensordot": "a library (cuBLAS) would do the work",
    "cupy.einsum": "a library would do the work",
    "numpy.ctypeslib": "reaches raw memory",
    "numpy.asarray": "copies tensor data to the host to compute there",
    "numpy.asanyarray": "copies tensor data to the host to compute there",
    "numpy.array": "copies tensor data to the host to compute there",
    "numpy.frombuffer": "reads raw memory",
    "numpy.fromfile": "reads files",
    "numpy.memmap": "maps files",
    "numpy.load": "loads pickled objects",
    "numpy.save": "writes files",
    "numpy.from_dlpack": "copies tensor data to the host to compute there",
    "torch.utils.cpp_extension.load": "builds native code from files (load_inline with CUDA sources is the way)",
    "torch.utils.cpp_extension.CppExtension": "builds host C++ (not a kernel)",
    "torch.utils.cpp_extension.BuildExtension": "builds native code",
}
# Modules an LLM-written kernel file imports for ordinary reasons (`functools.reduce(operator.mul, shape)`, a
# module-level `logger = logging.getLogger(__name__)`), of which only these members may be reached: the rest
# is what made the module a cheat's tool.
MODULE_MEMBERS = {
    "operator": ({"abs", "add", "and_", "concat", "contains", "countOf", "eq", "floordiv", "ge", "getitem", "gt",
                  "iadd", "iand", "ifloordiv", "imatmul", "imod", "imul", "index", "indexOf", "inv", "invert", "ior",
                  "ipow", "isub", "is_", "is_not", "itemgetter", "itruediv", "ixor", "le", "length_hint", "lshift",
                  "lt", "matmul", "mod", "mul", "ne", "neg", "not_", "or_", "pos", "pow", "rshift", "sub",
                  "truediv", "truth", "xor"},
                 "reaches attributes or methods by computed names (operator.attrgetter, operator.methodcaller)"),
    "logging": ({"getLogger", "basicConfig", "Logger", "LoggerAdapter", "NullHandler", "StreamHandler",
                 "Formatter", "root", "disable", "getLevelName", "log", "debug", "info", "warning", "warn", "error",
                 "exception", "critical", "fatal", "NOTSET", "DEBUG", "INFO", "WARNING", "WARN", "ERROR",
                 "CRITICAL", "FATAL"},
                "reaches the harness's frames, files or sockets (logging.currentframe, its file and network "
                "handlers); its loggers, levels and stream handlers are what a kernel file may use"),
}
# Members of a forbidden module that do none of what made it forbidden: `@triton.testing.perf_report(
# triton.testing.Benchmark(...))` only describes a benchmark (its `.run()` times it, and the function it wraps
# is judged wherever code that runs reaches it).
HARMLESS_MEMBERS = {"triton.testing.perf_report", "triton.testing.Benchmark"}
# Attribute names that only matter to a cheat, whatever object they are read from.
FORBIDDEN_ATTRS = {
    "_getframe": "reads the harness's frames (sys._getframe)",
    "_getframemodulename": "reads the harness's frames",
    "_current_frames": "reads the harness's frames",
    "get_objects": "reads the harness's objects (gc.get_objects)",
    "get_referrers": "reads the harness's objects",
    "get_referents": "reads the harness's objects",
    "f_back": "walks up into the harness's frames",
    "f_locals": "reads a frame's locals",
    "f_globals": "reads a frame's globals",
    "f_builtins": "reads a frame's builtins",
    "f_code": "reads a frame's code",
    "tb_frame": "reaches a frame through a traceback",
    "tb_next": "walks a traceback into the harness's frames",
    "gi_frame": "reaches a frame through a generator",
    "cr_frame": "reaches a frame through a coroutine",
    "ag_frame": "reaches a frame through an async generator",
    "__traceback__": "reaches frames through a traceback",
    "__globals__": "reaches a function's globals",
    "__code__": "reads or replaces a function's code",
    "__closure__": "reaches a function's closure",
    "__defaults__": "replaces a function's defaults",
    "__kwdefaults__": "replaces a function's defaults",
    "__builtins__": "reaches the builtins",
    "__subclasses__": "walks the class hierarchy to reach hidden objects",
    "__bases__": "walks the class hierarchy to reach hidden objects",
    "__base__": "walks the class hierarchy to reach hidden objects",
    "__mro__": "walks the class hierarchy to reach hidden objects",
    "mro": "walks the class hierarchy to reach hidden objects",
    "__class__": "walks from an object to its class to reach hidden objects",
    "__dict__": "reads or changes a namespace directly",
    "__getattribute__": "reaches attributes behind the checks' back",
    "__setattr__": "sets attributes behind the checks' back (patching)",
    "__delattr__": "deletes attributes behind the checks' back (patching)",
    "__import__": "imports modules dynamically",
    "__loader__": "reaches the import machinery",
    "__spec__": "reaches the import machinery",
    "__reduce__": "reaches pickling hooks",
    "__reduce_ex__": "reaches pickling hooks",
    "sys": "reaches the interpreter's internals (sys)",
    "settrace": "traces the harness",
    "setprofile": "traces the harness",
    "addaudithook": "hooks the interpreter",
    "_C": "reaches torch's C internals",
    "_disable_current_modes": "switches off the harness's op audit",
    "_DisableTorchDispatch": "switches off the harness's op audit",
    "_pop_mode": "switches off the harness's op audit",
    "_push_mode": "switches off the harness's op audit",
    "_python_dispatch": "reaches torch's dispatch machinery",
    "_dynamo": "reaches torch's compiler",
    "_inductor": "reaches torch's compiler",
    "synchronize": "touches the timer's synchronisation",
    "Event": "touches the timer's events",
    "Stream": "uses a side CUDA stream the timer does not wait for",
    "set_stream": "switches CUDA streams",
    "streamCreate": "uses a side CUDA stream the timer does not wait for",
    "streamCreateWithFlags": "uses a side CUDA stream the timer does not wait for",
    "streamCreateWithPriority": "uses a side CUDA stream the timer does not wait for",
    "Thread": "starts threads",
    "Timer": "starts threads",
    "fork": "starts processes",
    "forkpty": "starts processes",
    "system": "runs shell commands",
    "popen": "runs shell commands",
    "Popen": "starts processes",
    "spawn": "starts processes",
    "posix_spawn": "starts processes",
    "execv": "replaces the process",
    "execve": "replaces the process",
    "execvp": "replaces the process",
    "execl": "replaces the process",
    "_exit": "exits the process to skip the verdict",
    "abort": "kills the process to skip the verdict",
    "kill": "sends signals",
    "killpg": "sends signals",
    "setsid": "leaves its session to escape the sandbox's kill",
    "setpgid": "leaves its process group to escape the sandbox's kill",
    "environ": "reads the environment",
    "getenv": "reads the environment",
    "putenv": "changes the environment",
    "expandvars": "reads the environment",
    "numpy": "copies tensor data to the host to compute there (.numpy())",
    "tolist": "copies tensor data to the host to compute there (.tolist())",
    "__array__": "copies tensor data to the host to compute there",
    "__array_interface__": "reaches raw host memory",
    "untyped_storage": "reaches a tensor's raw storage",
    "storage": "reaches a tensor's raw storage",
    "_storage": "reaches a tensor's raw storage",
    "set_": "swaps a tensor's storage behind the harness's back",
    "from_numpy": "computes on the host (numpy) instead of in a kernel",
    "frombuffer": "computes on the host instead of in a kernel",
    "from_dlpack": "hands tensor memory to another library (DLPack) to compute on",
    "to_dlpack": "hands tensor memory to another library (DLPack) to compute on",
    "__dlpack__": "hands tensor memory to another library (DLPack) to compute on",
    "__array_struct__": "reaches raw host memory",
    "memmove": "copies raw memory behind the harness's back (memmove)",
    "memset": "writes raw memory behind the harness's back (memset)",
    "from_address": "reaches raw memory by address",
    "addressof": "reaches raw memory by address",
    "string_at": "reads raw memory by address",
    "from_buffer": "reaches raw memory",
    "from_buffer_copy": "reaches raw memory",
    "__getstate__": "reads an object's namespace (its __dict__) behind the checks' back",
    # Tensor.apply_/map_/map2_ call a Python function on every element in C++, through no torch operator
    # the op audit sees: the values are computed on the host.
    "apply_": "runs Python on every element on the host, not a kernel (Tensor.apply_)",
    "map_": "runs Python on every element on the host, not a kernel (Tensor.map_)",
    "map2_": "runs Python on every element on the host, not a kernel (Tensor.map2_)",
    # NOTE: under the CPU Triton interpreter a block a kernel loaded is a tl.tensor whose .handle holds a
    # numpy array: Python that reaches it (in a kernel's body or in anything the body calls) computes on the
    # host. No kernel file has any other use for the name.
    "handle": "reaches a Triton interpreter tensor's host array (.handle): host compute, not a kernel",
}
# Builtins that must not be named at all: called, aliased or passed along, each hides what it reaches.
FORBIDDEN_NAMES = {
    "exec": "executes dynamic code",
    "eval": "evaluates dynamic code",
    "compile": "compiles dynamic code",
    "__import__": "imports modules dynamically",
    "__builtins__": "reaches the builtins (patching or dynamic lookup)",
    "__loader__": "reaches the import machinery",
    "__spec__": "reaches the import machinery",
    "__build_class__": "reaches the class machinery",
    "globals": "reads module globals dynamically",
    "locals": "reads frame locals dynamically",
    "vars": "reads namespaces dynamically",
    "setattr": "sets attributes dynamically (patching)",
    "delattr": "deletes attributes dynamically (patching)",
    "exit": "exits the process to skip the verdict",
    "quit": "exits the process to skip the verdict",
    "SystemExit": "exits the process to skip the verdict",
    "KeyboardInterrupt": "interrupts the harness",
    "breakpoint": "stops in a debugger",
    "open": "opens files",
    "memoryview": "reaches raw memory",
}
# Imports that are rejected even when the names they bind are never used: importing them is the cheat
# (kgen's own modules, the task's Model, the candidate's own module reached as a module).
ALWAYS_FORBIDDEN_IMPORTS = {"verifier", "profiler", "agent", "kgen_task", "candidate"}
# Module names that, read as an attribute of another module (torch.os, collections._sys, typing.sys),
# are the module itself under an alias: a way round the import checks. Names that are also ordinary
# functions or torch's own submodules (torch.select, torch.signal, torch.types, x.code) are left out.
ALIAS_MODULES = (set(FORBIDDEN_MODULES) - {"select", "code", "trace", "profile", "signal", "types", "resource",
                                           "platform", "site", "io", "string"}) | {"os", "importlib", "builtins"} \
    | set(MODULE_MEMBERS)
# Dunder names that make an object readable as an array by numpy or another library: host code that
# reads a tensor's memory without any torch call the op audit could see.
ARRAY_PROTOCOLS = {
    "__array_interface__": "exposes raw host memory to numpy (__array_interface__): host compute",
    "__array_struct__": "exposes raw host memory to numpy (__array_struct__): host compute",
    "__array__": "hands tensor data to numpy (__array__): host compute",
    "__dlpack__": "hands tensor memory to another library (DLPack): compute outside the kernels",
    "__dlpack_device__": "hands tensor memory to another library (DLPack): compute outside the kernels",
    "__array_ufunc__": "hooks numpy's ufuncs: host compute",
    "__array_function__": "hooks numpy's functions: host compute",
}
# Environment variables a kernel file may read: the ecosystem's own switches (an LLM-written file checks
# TRITON_INTERPRET or a TRITON_ debug flag). Anything else may be a secret and is "reads the environment".
ENV_READ_PREFIXES = ("TRITON_", "CUDA_", "PYTORCH_", "TORCH_")
# os may be imported for os.path; these are the only parts of it a kernel file has any use for.
OS_ALLOWED = {"path", "sep", "pathsep", "linesep", "curdir", "pardir", "name", "cpu_count", "fspath", "PathLike"}
OS_PATH_ALLOWED = {"join", "dirname", "basename", "abspath", "exists", "isfile", "isdir", "splitext", "split",
                   "normpath", "realpath", "sep"}
# Class methods that let code run at moments the harness does not choose.
FORBIDDEN_METHODS = {
    "__del__": "runs code when the harness collects garbage (__del__)",
}
# Names that stand for libraries the harness relies on even where the file never imports them.
PATCH_ROOTS = {"torch", "triton", "tl", "time", "sys", "os", "builtins", "numpy", "np", "F", "nn", "cupy", "cp",
               "json", "hmac", "hashlib", "math", "gc", "inspect", "verifier"}
KERNEL_BUILDERS = {"RawModule", "RawKernel", "load_inline", "ElementwiseKernel", "ReductionKernel"}


def _is_main_guard(node: ast.AST) -> bool:
    """`if __name__ == "__main__":` -- its body never runs inside the verifier (the module is not __main__)."""
    test = node.test if isinstance(node, ast.If) else None
    return (isinstance(test, ast.Compare) and isinstance(test.left, ast.Name) and test.left.id == "__name__"
            and len(test.ops) == 1 and isinstance(test.ops[0], ast.Eq)
            and isinstance(test.comparators[0], ast.Constant) and test.comparators[0].value == "__main__")


def _names_in(nodes) -> set[str]:
    """Names that nodes read, and those named in their strings: `typing.get_type_hints` turns a string
    annotation (`x: "Timer"`) into the object it names."""
    out = set()
    for node in nodes:
        for n in ast.walk(node):
            if isinstance(n, ast.Name):
                out.add(n.id)
            elif isinstance(n, ast.Constant) and isinstance(n.value, str) and len(n.value) < 1000:
                try:
                    out |= {m.id for m in ast.walk(ast.parse(n.value, mode="eval")) if isinstance(m, ast.Name)}
                except (SyntaxError, ValueError):
                    continue
    return out


# Decorators that wrap or register a function and never call it while decorating (resolved names). Any
# other decorator (one defined in the file above all) may call what it decorates at import, so the function
# it decorates is judged as code that runs.
NON_CALLING_DECORATORS = {
    "triton.jit", "triton.autotune", "triton.heuristics", "triton.runtime.jit.jit", "triton.constexpr_function",
    "torch.no_grad", "torch.inference_mode", "torch.enable_grad", "functools.lru_cache", "functools.cache",
    "functools.wraps", "staticmethod", "classmethod", "property", "contextlib.contextmanager",
    "dataclasses.dataclass", "abc.abstractmethod", "typing.overload", "triton.testing.perf_report",
}
# Bases whose class machinery calls none of a subclass's methods when the class statement runs (an Enum's
# does: it builds its members; a base defined in the file may, through __init_subclass__).
PASSIVE_BASES = {"object", "torch.nn.Module", "torch.nn.modules.module.Module"}


def _calls_what_it_decorates(dec: ast.AST, names: "_Names") -> bool:
    target = dec.func if isinstance(dec, ast.Call) else dec
    if names.resolve(target) in NON_CALLING_DECORATORS:
        return False
    # `@ms.setter` on a property's setter: property.setter only stores the function
    return not (isinstance(target, ast.Attribute) and target.attr in ("setter", "getter", "deleter")
                and isinstance(target.value, ast.Name) and not isinstance(dec, ast.Call))


def _signature_parts(f: ast.FunctionDef | ast.AsyncFunctionDef) -> list[ast.AST]:
    """What a `def` runs where it stands: its decorators, defaults and annotations."""
    return f.decorator_list + [f.args] + ([f.returns] if f.returns else [])


def _class_parts(c: ast.ClassDef) -> tuple[list[ast.AST], list[ast.AST]]:
    """(what the class statement runs at import, what runs only once the class is used: its method bodies)."""
    at_import: list[ast.AST] = c.decorator_list + c.bases + c.keywords
    on_use: list[ast.AST] = []
    for stmt in c.body:
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
            at_import += _signature_parts(stmt)
            on_use += stmt.body
        else:
            at_import.append(stmt)     # class attributes, nested classes: they run with the class statement
    return at_import, on_use


def _setter_owners(c: ast.ClassDef) -> set[int]:
    """id()s of the `ms` in `@ms.setter`: naming a property to add its setter calls nothing."""
    return {id(d.value) for stmt in c.body if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef))
            for d in stmt.decorator_list
            if isinstance(d, ast.Attribute) and d.attr in ("setter", "getter", "deleter") and isinstance(d.value, ast.Name)}


def _is_all_list(node: ast.AST) -> bool:
    return isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)) and all(
        isinstance(t, ast.Name) and t.id == "__all__"
        for t in (node.targets if isinstance(node, ast.Assign) else [node.target])) and isinstance(
        node.value, (ast.List, ast.Tuple)) and all(isinstance(e, ast.Constant) for e in node.value.elts)


def _unreachable_bodies(tree: ast.Module, names: "_Names") -> set[int]:
    """id()s of the functions (top-level ones, and methods of top-level classes) whose bodies nothing that runs
    in the verifier can call.

    A kernel file's `def benchmark():` (timers, sys.argv), or its `class Timer:` (a context manager around
    time.perf_counter), used only by its `__main__` block, never runs as module "candidate". A function or a
    class is reachable when its name appears in reachable code: import-time statements, the bodies of
    reachable functions and of reachable classes' methods, and what every `def` and `class` statement runs
    where it stands (decorators, defaults, annotations; a class's bases, keywords and class-level statements).
    ModelNew is always reachable (the harness builds it), and so is a class whose statement may call its own
    methods at import: one with a decorator that might (see NON_CALLING_DECORATORS), a metaclass, a base other
    than object or nn.Module (an Enum builds its members, a base's __init_subclass__ gets the class), or
    class-level code that names one of its methods. A decorated function is reachable unless every decorator
    is one that never calls it. Flow-insensitive: a name mentioned anywhere reachable counts, which can only
    keep more code under the checks."""
    defs = [n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))]
    # NOTE: `__all__ = ["ModelNew", "benchmark"]` names what `import *` takes, and nothing imports the candidate so
    outside = [n for n in tree.body if n not in defs and not _is_main_guard(n) and not _is_all_list(n)]
    outside += [x for n in tree.body if _is_main_guard(n) for x in n.orelse]
    seen = _names_in(outside)
    on_use: dict[int, list[ast.AST]] = {}
    reachable: set[int] = set()
    for d in defs:
        if isinstance(d, ast.ClassDef):
            at_import, on_use[id(d)] = _class_parts(d)
            setters = _setter_owners(d)
            mentioned = {n.id for part in at_import for n in ast.walk(part)
                         if isinstance(n, ast.Name) and id(n) not in setters}
            methods = {m.name for m in d.body if isinstance(m, (ast.FunctionDef, ast.AsyncFunctionDef))}
            seen |= mentioned
            if d.name == "ModelNew" or d.keywords or mentioned & methods \
                    or any(_calls_what_it_decorates(x, names) for x in d.decorator_list) \
                    or any(names.resolve(b) not in PASSIVE_BASES for b in d.bases):
                reachable.add(id(d))
        else:
            on_use[id(d)] = d.body
            seen |= _names_in(_signature_parts(d))
            if any(_calls_what_it_decorates(x, names) for x in d.decorator_list):
                reachable.add(id(d))
    for d in defs:
        if id(d) in reachable:
            seen |= _names_in(on_use[id(d)])
    grew = True
    while grew:
        grew = False
        for d in defs:
            if id(d) not in reachable and d.name in seen:
                reachable.add(id(d))
                seen |= _names_in(on_use[id(d)])
                grew = True
    out: set[int] = set()
    for d in defs:
        if id(d) in reachable:
            continue
        if isinstance(d, ast.ClassDef):
            out |= {id(m) for m in d.body if isinstance(m, (ast.FunctionDef, ast.AsyncFunctionDef))}
        else:
            out.add(id(d))
    return out


def _walk(tree: ast.Module, names: "_Names"):
    """Every node that can run when the candidate is imported and called.

    The body of a top-level `if __name__ == "__main__":` block (a kernel file's own check and
    benchmark) is skipped: it never runs as module "candidate", and `__name__` cannot be reassigned
    (rejected below). So are the bodies of top-level functions, and of top-level classes' methods, that
    only that block can reach (_unreachable_bodies); their decorators, defaults and annotations, and a
    class's bases and class-level statements, still run at import and are walked.
    """
    unreachable = _unreachable_bodies(tree, names)
    todo = deque(tree.body)
    while todo:
        node = todo.popleft()
        if node in tree.body and _is_main_guard(node):
            todo.extend(node.orelse)
            continue
        yield node
        if id(node) in unreachable:
            todo.extend(_signature_parts(node))
            continue
        todo.extend(ast.iter_child_nodes(node))


def _dotted(node: ast.AST) -> str:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
    return ".".join(reversed(parts))


def _root_name(node: ast.AST) -> str | None:
    while isinstance(node, (ast.Attribute, ast.Subscript, ast.Call, ast.Starred)):
        node = node.func if isinstance(node, ast.Call) else node.value
    return node.id if isinstance(node, ast.Name) else None


def _const_getattr(node: ast.AST) -> tuple[ast.AST, str] | None:
    """`getattr(obj, "name"[, default])` -> (obj, "name")."""
    if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("getattr", "hasattr")
            and len(node.args) >= 2 and isinstance(node.args[1], ast.Constant) and isinstance(node.args[1].value, str)):
        return node.args[0], node.args[1].value
    return None


class _Names:
    """Resolves local names to the modules and objects they were bound to.

    Flow-insensitive on purpose: a name bound anywhere to `torch.cuda` is read
    as `torch.cuda` everywhere, which can only make the checks stricter.
    """

    def __init__(self, tree: ast.Module):
        self.alias: dict[str, str] = {}
        self.modules: set[str] = set()   # local names bound by import statements (or to them)
        self.called: set[int] = set()    # id() of the nodes that are the function of a call
        self.used: set[str] = set()      # names read or bound in code that can run (not the __main__ block)
        self.used_dotted: set[str] = set()   # what those names and attribute chains resolve to (torch.profiler...)
        self.env_ok: set[int] = set()    # id() of os.environ nodes that only read an allowed switch
        # id() of `.__class__` nodes read only for their name (`self.__class__.__name__`): a string, nothing more
        self.class_names: set[int] = {
            id(node.value) for node in ast.walk(tree)
            if isinstance(node, ast.Attribute) and node.attr in ("__name__", "__qualname__")
            and isinstance(node.ctx, ast.Load) and isinstance(node.value, ast.Attribute)
            and node.value.attr == "__class__"}
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for a in node.names:
                    if a.asname:
                        self.alias[a.asname] = a.name
                        self.modules.add(a.asname)
                    else:
                        top = a.name.split(".")[0]
                        self.alias.setdefault(top, top)
                        self.modules.add(top)
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                for a in node.names:
                    local = a.asname or a.name
                    self.alias[local] = f"{node.module}.{a.name}"
                    self.modules.add(local)
        # Plain assignments of resolvable expressions extend the map (twice: aliases of aliases).
        for _ in range(2):
            for node in ast.walk(tree):
                if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
                    targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                    full = self.resolve(node.value)
                    if not full or full.split(".")[0] not in self.known_roots():
                        continue
                    for t in targets:
                        if isinstance(t, ast.Name) and t.id not in self.alias:
                            self.alias[t.id] = full
                            self.modules.add(t.id)

        # id() of the attribute chains that name a harmless member (triton.testing.perf_report), inner links too
        self.harmless: set[int] = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Load) \
                    and self.resolve(node) in HARMLESS_MEMBERS:
                inner = node
                while isinstance(inner, ast.Attribute):
                    self.harmless.add(id(inner))
                    inner = inner.value

    def known_roots(self) -> set[str]:
        return {v.split(".")[0] for v in self.alias.values()}

    def resolve(self, node: ast.AST) -> str:
        """The dotted name an expression stands for ("" when it is not a plain name chain)."""
        const = _const_getattr(node)
        if const:
            base = self.resolve(const[0])
            return f"{base}.{const[1]}" if base else ""
        if isinstance(node, ast.Attribute):
            base = self.resolve(node.value)
            return f"{base}.{node.attr}" if base else ""
        if isinstance(node, ast.Name):
            return self.alias.get(node.id, node.id)
        return ""

    def is_module_rooted(self, node: ast.AST) -> bool:
        root = _root_name(node)
        return root is not None and (root in self.modules or root in PATCH_ROOTS)


def _is_triton_jit(dec: ast.AST, names: _Names) -> bool:
    target = dec.func if isinstance(dec, ast.Call) else dec
    full = names.resolve(target)
    return full in {"triton.jit", "triton.autotune", "triton.heuristics", "triton.runtime.jit.jit"} or \
        _dotted(target) in {"jit", "autotune", "heuristics"}


def check_source(source: str) -> StaticProblem | None:
    """Return the first problem found, or None when the source may run."""
    if not source.strip():
        return StaticProblem("rejected", "the candidate file is empty")
    try:
        tree = ast.parse(source)
    except SyntaxError as exc:
        return StaticProblem("compile_error", f"not valid Python: line {exc.lineno}: {exc.msg}")
    except ValueError as exc:  # e.g. NUL bytes in the source
        return StaticProblem("compile_error", f"not valid Python: {exc}")

    classes = {n.name for n in ast.walk(tree) if isinstance(n, ast.ClassDef)}
    if "ModelNew" not in classes:
        named = ", ".join(sorted(classes)) or "none"
        return StaticProblem("rejected", f"no class ModelNew defined (classes found: {named})")

    names = _Names(tree)
    names.called = {id(n.func) for n in ast.walk(tree) if isinstance(n, ast.Call)}
    walked = list(_walk(tree, names))
    # NOTE: names read or bound anywhere that can run (the __main__ block excluded): an import whose names
    # never appear here binds a module nothing can reach, so importing it is harmless.
    names.used = {n.id for n in walked if isinstance(n, ast.Name)}
    names.used_dotted = {names.resolve(n) for n in walked
                         if (isinstance(n, (ast.Name, ast.Attribute)) or _const_getattr(n))
                         and id(n) not in names.harmless} - {""}
    names.env_ok = _allowed_env_reads(walked, names)
    # Judged in source order, so the reason names the first offending line a reader would find.
    nodes = sorted(enumerate(walked),
                   key=lambda p: (getattr(p[1], "lineno", 0), getattr(p[1], "col_offset", 0), p[0]))
    for _, node in nodes:
        problem = _check_node(node, names)
        if problem:
            return StaticProblem("rejected", f"line {node.lineno}: {problem}" if hasattr(node, "lineno")
                                 else problem)

    problem = _KernelBodies(tree, names).check()
    if problem:
        return StaticProblem("rejected", f"line {problem[0].lineno}: {problem[1]}")

    triton_kernels = {
        n.name for n in ast.walk(tree)
        if isinstance(n, ast.FunctionDef) and any(_is_triton_jit(d, names) for d in n.decorator_list)
    }
    cuda_builders = [names.resolve(n.func) for n in ast.walk(tree)
                     if isinstance(n, ast.Call) and names.resolve(n.func).split(".")[-1] in KERNEL_BUILDERS]
    if not triton_kernels and not cuda_builders:
        return StaticProblem("rejected", "no kernel found: define a @triton.jit function, or compile CUDA "
                                         "through cupy.RawModule or torch.utils.cpp_extension.load_inline")
    for call in walked:
        if isinstance(call, ast.Call) and names.resolve(call.func).split(".")[-1] == "load_inline" \
                and not _has_cuda_sources(call):
            return StaticProblem("rejected", f"line {call.lineno}: builds a C++ extension with no CUDA source "
                                             f"(load_inline without cuda_sources): host code is not a kernel")
    if triton_kernels and not cuda_builders:
        # NOTE: a kernel picked first and launched through a variable, a dict or an attribute
        # (`kernel = a if wide else b; kernel[grid](...)`, `self._kernel[grid](...)`) is launched all the same:
        # only a file whose code never names a kernel outside its definition is refused here (the run decides
        # the rest: "launched no kernel of its own")
        named = {n.id for n in walked if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)} | \
                {n.attr for n in walked if isinstance(n, ast.Attribute)}
        launched = {
            _root_name(n.func.value) for n in ast.walk(tree)
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Subscript)
        }
        if not (launched | named) & triton_kernels:
            names_ = ", ".join(sorted(triton_kernels))
            return StaticProblem("rejected", f"Triton kernel(s) {names_} defined but never launched "
                                             f"(no kernel[grid](...) call)")
    return None


def _has_cuda_sources(call: ast.Call) -> bool:
    """load_inline(name, cpp_sources, cuda_sources, ...) given a CUDA source (not None, not empty)."""
    value = next((k.value for k in call.keywords if k.arg == "cuda_sources"), None)
    if value is None and len(call.args) >= 3:
        value = call.args[2]
    if value is None:
        return False
    return not (isinstance(value, ast.Constant) and not value.value) and \
        not (isinstance(value, (ast.List, ast.Tuple)) and not value.elts)


def _allowed_env_reads(walked: list, names: "_Names") -> set[int]:
    """id()s of the os.environ / os.getenv nodes that only read one of the ecosystem's own switches.

    `os.environ.get("TRITON_INTERPRET")`, `os.getenv("TRITON_DEBUG", "0")`, `os.environ["CUDA_..."]`,
    `"TRITON_..." in os.environ`: a constant name with an allowed prefix (ENV_READ_PREFIXES)."""
    def allowed(key: ast.AST) -> bool:
        return isinstance(key, ast.Constant) and isinstance(key.value, str) and key.value.startswith(ENV_READ_PREFIXES)

    ok: set[int] = set()
    for node in walked:
        if isinstance(node, ast.Call) and node.args and allowed(node.args[0]) \
                and names.resolve(node.func) in ("os.environ.get", "os.getenv"):
            ok.add(id(node.func))
            if isinstance(node.func, ast.Attribute):
                ok.add(id(node.func.value))
        elif isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load) and allowed(node.slice) \
                and names.resolve(node.value) == "os.environ":
            ok.add(id(node.value))
        elif isinstance(node, ast.Compare) and allowed(node.left) and len(node.ops) == 1 \
                and isinstance(node.ops[0], (ast.In, ast.NotIn)) and names.resolve(node.comparators[0]) == "os.environ":
            ok.add(id(node.comparators[0]))
    return ok


def _check_import(node: ast.Import | ast.ImportFrom, names: "_Names") -> str | None:
    """Why an import is off limits, or None.

    A module whose import only binds a name (sys, time, threading...) is judged by whether that name can
    be reached from code that runs: an `import sys, time` at the top of a kernel file, used only by its
    `if __name__ == "__main__":` benchmark, binds names that nothing run by the harness reads."""
    if isinstance(node, ast.ImportFrom) and node.level:
        return "uses a relative import: a candidate is one file"
    used_note = "; it is used outside the file's `if __name__ == \"__main__\":` block"
    for a in node.names:
        if isinstance(node, ast.Import):
            name, local = a.name, a.asname or a.name.split(".")[0]
            full_names = [name]
        else:
            name, local = f"{node.module}.{a.name}", a.asname or a.name
            full_names = [node.module or "", name]
        reachable = local in names.used or a.name == "*"
        # `import torch.profiler` binds `torch`, which everything uses: what it adds is reached as
        # torch.profiler..., so it is reachable where code that runs names torch.profiler or below.
        sub_reachable = reachable
        if isinstance(node, ast.Import) and not a.asname and "." in name:
            sub_reachable = any(u == name or u.startswith(name + ".") for u in names.used_dotted)
        if isinstance(node, ast.ImportFrom) and name in HARMLESS_MEMBERS:
            continue
        for full in full_names:
            top = full.split(".")[0]
            if top in ALWAYS_FORBIDDEN_IMPORTS:
                return f"imports {full}: {FORBIDDEN_MODULES.get(top, 'imports its own module by name')}"
            if top in FORBIDDEN_MODULES:
                if reachable:
                    return f"imports {full}: {FORBIDDEN_MODULES[top]}{used_note}"
                continue
            why = _forbidden_dotted(full)
            # NOTE: a private module (torch._dynamo...) is rejected even unused: importing it runs its setup.
            # The others (torch.testing, triton.testing, torch.profiler) only bind names, judged like
            # `import time`: a `from triton.testing import do_bench` only __main__ uses passes.
            if why and (sub_reachable or _is_private(full)):
                return f"imports {full}: {why}"
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] not in FORBIDDEN_MODULES \
                and node.module != "os" and a.name.lstrip("_") in ALIAS_MODULES:
            return (f"imports {a.name} from {node.module}: the module {a.name.lstrip('_')} under another module's "
                    f"name ({_alias_why(a.name)})")
    return None


def _alias_why(attr: str) -> str:
    module = attr.lstrip("_")
    return FORBIDDEN_MODULES.get(module, "reaches the process and file system" if module == "os"
                                 else "reaches what a direct import of it would")


def _is_private(full: str) -> bool:
    parts = full.split(".")
    return parts[0] in ("torch", "triton", "cupy", "numpy") and any(
        p.startswith("_") and not (p.startswith("__") and p.endswith("__")) for p in parts[1:])


def _forbidden_dotted(full: str) -> str | None:
    """Why a resolved dotted name is off limits, or None."""
    parts = full.split(".")
    for prefix, why in FORBIDDEN_SUBMODULES.items():
        if full == prefix or full.startswith(prefix + "."):
            return why
    if _is_private(full):
        return f"reaches {parts[0]}'s private internals"
    if parts[0] in MODULE_MEMBERS and len(parts) > 1 and parts[1] not in MODULE_MEMBERS[parts[0]][0]:
        return MODULE_MEMBERS[parts[0]][1]
    if parts[0] == "os" and len(parts) > 1:
        if parts[1] in FORBIDDEN_ATTRS:
            return FORBIDDEN_ATTRS[parts[1]]
        if parts[1] not in OS_ALLOWED:
            return f"reaches the process and file system (os.{parts[1]})"
        if parts[1] == "path" and len(parts) > 2 and parts[2] not in OS_PATH_ALLOWED:
            return f"reaches the process and file system (os.path.{parts[2]})"
    return None


def _check_node(node: ast.AST, names: _Names) -> str | None:
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        return _check_import(node, names)

    if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in ARRAY_PROTOCOLS:
        return f"names {node.value} in a string: {ARRAY_PROTOCOLS[node.value]}"

    if isinstance(node, ast.Name):
        if node.id in ARRAY_PROTOCOLS:
            return f"uses {node.id}: {ARRAY_PROTOCOLS[node.id]}"
        if node.id in FORBIDDEN_NAMES:
            return f"uses {node.id}: {FORBIDDEN_NAMES[node.id]}"
        if node.id in ("getattr", "hasattr") and id(node) not in names.called:
            return f"passes {node.id} along: reaches attributes by computed names"
        if node.id == "__name__" and isinstance(node.ctx, (ast.Store, ast.Del)):
            return "assigns __name__: would run the file's __main__ block inside the harness"
        return None

    if isinstance(node, ast.Attribute):
        if id(node) in names.env_ok:
            return None
        full = names.resolve(node) if names.is_module_rooted(node) else ""
        if isinstance(node.ctx, (ast.Store, ast.Del)) and names.is_module_rooted(node):
            verb = "assigns" if isinstance(node.ctx, ast.Store) else "deletes"
            return f"{verb} {full or _dotted(node)}: monkey-patches a library the harness relies on"
        if node.attr in ARRAY_PROTOCOLS:
            return f"uses .{node.attr}: {ARRAY_PROTOCOLS[node.attr]}"
        if id(node) in names.harmless:
            return None
        # A module alias anywhere in the chain is the reason a reader needs (torch.os.system: "torch.os").
        inner = node
        while isinstance(inner, ast.Attribute):
            if names.is_module_rooted(inner.value) and inner.attr.lstrip("_") in ALIAS_MODULES:
                return (f"reaches the module {inner.attr.lstrip('_')} as {_dotted(inner) or inner.attr} "
                        f"(a module alias): {_alias_why(inner.attr)}")
            inner = inner.value
        # NOTE: calling synchronize() only waits (torch.cuda.synchronize(), stream.synchronize()): the timer
        # brackets its own events and synchronises itself. Naming it any other way (aliasing, assigning,
        # passing it along) is still rejected below.
        if node.attr == "synchronize" and id(node) in names.called and isinstance(node.ctx, ast.Load):
            return None
        if node.attr == "__class__" and id(node) in names.class_names:
            return None
        if node.attr in FORBIDDEN_ATTRS:
            return f"uses .{node.attr}: {FORBIDDEN_ATTRS[node.attr]}"
        why = _forbidden_dotted(full) if full else None
        if why:
            return f"uses {full}: {why}"

    if isinstance(node, ast.MatchClass):
        # `case object(__dict__=d):` reads the attribute with no ast.Attribute for the rules above to see
        for attr in node.kwd_attrs:
            if attr in FORBIDDEN_ATTRS:
                return f"reads .{attr} through a match pattern: {FORBIDDEN_ATTRS[attr]}"

    if isinstance(node, ast.Subscript) and isinstance(node.ctx, (ast.Store, ast.Del)) \
            and names.is_module_rooted(node.value):
        return f"writes into {names.resolve(node.value) or 'a module'}[...]: monkey-patches a library the harness relies on"

    if isinstance(node, ast.Call):
        const = _const_getattr(node)
        if const:
            attr = const[1]
            if attr in FORBIDDEN_ATTRS:
                return f"reaches .{attr} through getattr: {FORBIDDEN_ATTRS[attr]}"
            if names.is_module_rooted(const[0]) and attr.lstrip("_") in ALIAS_MODULES:
                return f"reaches the module {attr.lstrip('_')} through getattr (a module alias): {_alias_why(attr)}"
            full = names.resolve(node) if names.is_module_rooted(const[0]) else ""
            why = _forbidden_dotted(full) if full else None
            if why:
                return f"reaches {full} through getattr: {why}"
        elif isinstance(node.func, ast.Name) and node.func.id in ("getattr", "hasattr"):
            return f"calls {node.func.id}() with a computed name: hides what it reaches"
        if any(isinstance(a, ast.Name) and a.id in ("getattr", "hasattr") for a in node.args):
            return "passes getattr along: reaches attributes by computed names"

    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name in FORBIDDEN_METHODS:
        return f"defines {node.name}: {FORBIDDEN_METHODS[node.name]}"
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name in ARRAY_PROTOCOLS:
        return f"defines {node.name}: {ARRAY_PROTOCOLS[node.name]}"
    return None


# -- the bodies of @triton.jit functions -------------------------------------------------------------------------
#
# On a GPU a @triton.jit body compiles to device code: it can call Triton's language (tl.*, libdevice, tl.math)
# and other @triton.jit functions, and nothing else runs. Under the CPU interpreter the same body is plain
# Python, so a call to a Python helper or to numpy there runs on the host, on the block's values. These rules
# hold the body to what compiles.

# Python builtins a @triton.jit body may name: those Triton's code generator provides (len, list, range, float,
# int, isinstance, getattr, hasattr, print, min, max) and a few more that read no tensor's values.
KERNEL_BUILTINS = {"len", "list", "range", "float", "int", "isinstance", "getattr", "hasattr", "print", "min", "max",
                   "abs", "bool", "tuple", "zip", "enumerate", "str"}
# math in a kernel: its constants, and its functions on constant arguments (`1 / math.sqrt(2.0)`), which Triton
# folds at compile time.
MATH_CONSTANTS = {"pi", "e", "tau", "inf", "nan"}
# Triton functions that call a function they are given: name -> (its position in tl.<name>(...), its keyword).
# As a tensor's method (x.reduce(axis, fn)) it sits one place earlier.
TRITON_HIGHER_ORDER = {"reduce": (2, "combine_fn"), "associative_scan": (2, "combine_fn"),
                       "map_elementwise": (0, "scalar_fn")}
TRITON_JIT_DECORATORS = {"triton.jit", "triton.autotune", "triton.heuristics", "triton.runtime.jit.jit"}
# A @triton.constexpr_function is plain Python a kernel calls at compile time (under the interpreter, on whatever
# it is given): callable from a kernel, and its body held to the same rules.
TRITON_CONSTEXPR_FUNCTION = "triton.constexpr_function"
KERNEL_WHY = ("only Triton's language and other @triton.jit functions compile there (under the CPU interpreter "
              "it would run as Python)")


def _triton_decorators(f: ast.AST, names: _Names) -> set[str]:
    """The resolved names of a def's decorators (`@jit` from triton reads triton.jit)."""
    if not isinstance(f, ast.FunctionDef):
        return set()
    return {names.resolve(d.func if isinstance(d, ast.Call) else d) for d in f.decorator_list}


def _is_strict_jit(f: ast.AST, names: _Names) -> bool:
    """A def decorated with Triton's own jit, autotune, heuristics or constexpr_function (not a `jit` from
    anywhere else)."""
    return bool(_triton_decorators(f, names) & (TRITON_JIT_DECORATORS | {TRITON_CONSTEXPR_FUNCTION}))


def _is_kernel_like(f: ast.AST, names: _Names) -> bool:
    """A def whose body is held to the kernel rules: Triton's decorators, or a bare `jit`/`autotune`/`heuristics`
    that resolves to no other library (one defined in the file returns who knows what)."""
    return _is_strict_jit(f, names) or bool(_triton_decorators(f, names) & {"jit", "autotune", "heuristics"})


def _jit_wrapped(call: ast.AST, names: _Names) -> ast.AST | None:
    """`triton.jit(f)`, `triton.autotune(...)(triton.jit(f))`: the expression jit is applied to, else None."""
    if not (isinstance(call, ast.Call) and len(call.args) == 1):
        return None
    func = call.func.func if isinstance(call.func, ast.Call) else call.func
    if names.resolve(func) not in TRITON_JIT_DECORATORS:
        return None
    inner = _jit_wrapped(call.args[0], names)
    return inner if inner is not None else call.args[0]


def _scope_bindings(body: list) -> dict[str, list[ast.AST]]:
    """name -> what binds it in one scope (never inside a nested def, class or lambda): the def or class
    statement, the value assigned to it, or the statement that binds it otherwise (a loop, an import, a with)."""
    out: dict[str, list[ast.AST]] = {}
    todo = list(body)
    while todo:
        node = todo.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            out.setdefault(node.name, []).append(node)
            continue
        if isinstance(node, ast.Lambda):
            continue
        if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
            for t in node.targets if isinstance(node, ast.Assign) else [node.target]:
                if isinstance(t, ast.Name):
                    out.setdefault(t.id, []).append(node.value)
                else:
                    for n in ast.walk(t):
                        if isinstance(n, ast.Name):
                            out.setdefault(n.id, []).append(node)
            todo.append(node.value)
            continue
        if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            out.setdefault(node.id, []).append(node)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            for a in node.names:
                out.setdefault(a.asname or a.name.split(".")[0], []).append(node)
        elif isinstance(node, (ast.ExceptHandler, ast.MatchAs, ast.MatchStar)) and node.name:
            out.setdefault(node.name, []).append(node)
        elif isinstance(node, ast.MatchMapping) and node.rest:
            out.setdefault(node.rest, []).append(node)
        todo.extend(ast.iter_child_nodes(node))
    return out


class _KernelBodies:
    """Checks every @triton.jit function's body against what compiles on a GPU (see KERNEL_WHY)."""

    def __init__(self, tree: ast.Module, names: _Names):
        self.names = names
        self.parents = {id(c): n for n in ast.walk(tree) for c in ast.iter_child_nodes(n)}
        self.module = _scope_bindings(tree.body)
        for node in ast.walk(tree):   # `global X` in a function rebinds X at run time
            if isinstance(node, ast.Global):
                for name in node.names:
                    self.module.setdefault(name, []).append(node)
        self.jit_names = {n.name for n in ast.walk(tree) if _is_strict_jit(n, names)}
        self.kernels = [n for n in ast.walk(tree) if _is_kernel_like(n, names)]
        defs = {n.name: n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)}
        for node in ast.walk(tree):   # k = triton.jit(body): body is a kernel, k a @triton.jit function
            if isinstance(node, ast.Assign) and _jit_wrapped(node.value, names) is not None:
                inner = _jit_wrapped(node.value, names)
                if isinstance(inner, ast.Name) and inner.id in defs:
                    self.kernels.append(defs[inner.id])
                self.jit_names |= {t.id for t in node.targets if isinstance(t, ast.Name)}
        self.star_triton = any(isinstance(n, ast.ImportFrom) and n.module and n.module.split(".")[0] == "triton"
                               and any(a.name == "*" for a in n.names) for n in ast.walk(tree))
        self.launches = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Subscript)
                         and isinstance(n.func.value, ast.Name)]
        # what every name and attribute is assigned anywhere in the file (`fn = a if c else b`, `self.fn = a`)
        self.assigned: dict[str, list[ast.AST]] = {}
        for node in ast.walk(tree):
            if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
                for t in node.targets if isinstance(node, ast.Assign) else [node.target]:
                    key = t.id if isinstance(t, ast.Name) else f".{t.attr}" if isinstance(t, ast.Attribute) else None
                    if key:
                        self.assigned.setdefault(key, []).append(node.value)

    # -- the checks ----------------------------------------------------------------------------------------------

    def check(self) -> tuple[ast.AST, str] | None:
        for launch in sorted(self.launches, key=lambda n: (n.lineno, n.col_offset)):
            problem = self._check_launch(launch)
            if problem:
                return launch, problem
        for kernel in sorted(self.kernels, key=lambda n: n.lineno):
            problem = self._check_kernel(kernel)
            if problem:
                return problem
        return None

    def _check_launch(self, launch: ast.Call) -> str | None:
        """A kernel launched with a Python function or class among its arguments would call it as Python."""
        kernel = launch.func.value.id
        if not any(k.name == kernel for k in self.kernels) and kernel not in self.jit_names:
            return None
        for value in list(launch.args) + [k.value for k in launch.keywords]:
            if isinstance(value, ast.Lambda):
                return f"passes a lambda to the kernel {kernel}: {KERNEL_WHY}"
            if isinstance(value, ast.Name):
                for what in self.module.get(value.id, []):
                    if isinstance(what, ast.Lambda) or (isinstance(what, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
                                                        and what.name not in self.jit_names):
                        return f"passes the Python {'class' if isinstance(what, ast.ClassDef) else 'function'} " \
                               f"{value.id} to the kernel {kernel}: {KERNEL_WHY}"
        return None

    def _scopes(self, kernel: ast.FunctionDef) -> list[dict[str, list[ast.AST]]]:
        """The bindings of the functions around a nested kernel (innermost first), then the module's."""
        scopes = []
        node = self.parents.get(id(kernel))
        while node is not None:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                scope = _scope_bindings(node.body if isinstance(node.body, list) else [node.body])
                for a in _params(node):
                    scope.setdefault(a.arg, []).append(a)
                scopes.append(scope)
            node = self.parents.get(id(node))
        return scopes + [self.module]

    def _check_kernel(self, kernel: ast.FunctionDef) -> tuple[ast.AST, str] | None:
        params = {a.arg: a for a in _params(kernel)}
        local = _scope_bindings(kernel.body)
        env = _KernelEnv(self, kernel, params, local, self._scopes(kernel))
        for stmt in kernel.body:
            for node in ast.walk(stmt):
                problem = env.check_node(node)
                if problem:
                    kind = "@triton.constexpr_function" if TRITON_CONSTEXPR_FUNCTION in _triton_decorators(
                        kernel, self.names) else "@triton.jit kernel"
                    return node, f"{problem} inside the {kind} {kernel.name}: {KERNEL_WHY}"
        return None

    def launched_with_jit(self, kernel: ast.FunctionDef, param: str) -> bool:
        """Every launch of the kernel in the file passes this parameter a @triton.jit function (and there is one)."""
        order = [a.arg for a in kernel.args.posonlyargs + kernel.args.args]
        launches = [c for c in self.launches if c.func.value.id == kernel.name]
        for call in launches:
            value = next((k.value for k in call.keywords if k.arg == param), None)
            index = order.index(param) if param in order else len(call.args)
            if value is None and index < len(call.args) and not any(isinstance(a, ast.Starred) for a in call.args[:index + 1]):
                value = call.args[index]
            if not self.jit_valued(value):
                return False
        return bool(launches)

    def jit_valued(self, value: ast.AST | None, depth: int = 0) -> bool:
        """Whether value can only be a @triton.jit function of this file: its name, a conditional between such,
        or a name or attribute every assignment in the file gives one (followed a few steps)."""
        if value is None or depth > 4:
            return False
        if isinstance(value, ast.IfExp):
            return self.jit_valued(value.body, depth + 1) and self.jit_valued(value.orelse, depth + 1)
        if isinstance(value, ast.Name) and value.id in self.jit_names:
            return True
        key = value.id if isinstance(value, ast.Name) else f".{value.attr}" if isinstance(value, ast.Attribute) else None
        values = self.assigned.get(key, []) if key else []
        return bool(values) and all(self.jit_valued(v, depth + 1) for v in values)


def _params(f: ast.AST) -> list[ast.arg]:
    a = f.args
    return a.posonlyargs + a.args + a.kwonlyargs + ([a.vararg] if a.vararg else []) + ([a.kwarg] if a.kwarg else [])


class _KernelEnv:
    """One kernel's names: its parameters, its locals, the scopes around it."""

    def __init__(self, bodies: _KernelBodies, kernel: ast.FunctionDef, params: dict, local: dict, scopes: list):
        self.bodies, self.names, self.kernel = bodies, bodies.names, kernel
        self.params, self.local, self.scopes = params, local, scopes
        self.constexpr = {p for p, a in params.items() if a.annotation is not None and self._is_constexpr(a.annotation)}

    def _is_constexpr(self, annotation: ast.AST) -> bool:
        if isinstance(annotation, ast.Constant) and isinstance(annotation.value, str):
            return annotation.value.split(".")[-1] == "constexpr"
        return self.names.resolve(annotation) in ("triton.language.constexpr", "triton.language.core.constexpr")

    def _bindings(self, name: str) -> list[ast.AST] | None:
        for scope in self.scopes:
            if name in scope:
                return scope[name]
        return None

    def _called(self, node: ast.AST) -> bool:
        parent = self.bodies.parents.get(id(node))
        return isinstance(parent, ast.Call) and parent.func is node

    def _chain(self, name: ast.Name) -> ast.AST:
        """The longest attribute chain a name starts (np -> np.cumsum)."""
        node = name
        parent = self.bodies.parents.get(id(node))
        while isinstance(parent, ast.Attribute) and parent.value is node:
            node, parent = parent, self.bodies.parents.get(id(parent))
        return node

    def check_node(self, node: ast.AST) -> str | None:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            return "defines a function or class"
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            return "imports a module"
        if isinstance(node, (ast.Global, ast.Nonlocal)):
            return f"declares {', '.join(node.names)} {'global' if isinstance(node, ast.Global) else 'nonlocal'}"
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
            return self._check_name(node)
        if isinstance(node, ast.Call):
            return self._check_call(node)
        return None

    def _check_name(self, node: ast.Name) -> str | None:
        name = node.id
        if name in self.params or name in self.local:
            return None
        chain = self._chain(node)
        verb = "calls" if self._called(chain) else "uses"
        shown = _dotted(chain) or name
        full = self.names.resolve(chain) if name in self.names.alias else ""
        bindings = self._bindings(name)
        if bindings is None:
            if name in KERNEL_BUILTINS or self.bodies.star_triton:
                return None
            return f"{verb} {shown}, which is neither Triton's nor defined in this file,"
        for what in bindings:
            if isinstance(what, ast.FunctionDef) and what.name in self.bodies.jit_names:
                continue
            if isinstance(what, (ast.FunctionDef, ast.AsyncFunctionDef)):
                return f"{verb} {shown}, a Python function that is not @triton.jit,"
            if isinstance(what, ast.ClassDef):
                return f"{verb} the class {shown}"
            if isinstance(what, (ast.Import, ast.ImportFrom)) or (full and name in self.names.modules):
                problem = self._check_module_use(chain, full, verb, shown)
                if problem:
                    return problem
                continue
            if isinstance(what, ast.expr) and (self.const(what, set()) or _jit_wrapped(what, self.names) is not None):
                continue
            if isinstance(what, (ast.Assign, ast.AnnAssign)) and what.value is not None \
                    and isinstance(what.value, (ast.Tuple, ast.List)) and self.const(what.value, set()):
                continue   # `HALF, SQRT1_2 = tl.constexpr(0.5), tl.constexpr(0.7071)`: unpacked constants
            return f"{verb} {name}, a global that is not a constant,"
        return None

    def _check_module_use(self, chain: ast.AST, full: str, verb: str, shown: str) -> str | None:
        root = full.split(".")[0]
        if root == "triton":
            return None
        if root == "math":
            parent = self.bodies.parents.get(id(chain))
            if verb == "calls" and all(self.const(a, set()) for a in parent.args) \
                    and all(self.const(k.value, set()) for k in parent.keywords):
                return None
            if verb == "uses" and full.split(".")[-1] in MATH_CONSTANTS:
                return None
            return f"{verb} {shown} on a value that is not a constant"
        return f"{verb} {shown} ({full})" if full and full != shown else f"{verb} {shown}"

    def _check_call(self, call: ast.Call) -> str | None:
        func = call.func
        if isinstance(func, ast.Name) and func.id in self.params:
            if not self.bodies.launched_with_jit(self.kernel, func.id):
                return f"calls its argument {func.id}, which no launch in the file passes a @triton.jit function,"
        elif isinstance(func, ast.Name) and func.id in self.local:
            return f"calls {func.id}, a value rather than a @triton.jit function,"
        elif not isinstance(func, (ast.Name, ast.Attribute)):
            return "calls a computed function"
        last = func.attr if isinstance(func, ast.Attribute) else func.id
        if last in TRITON_HIGHER_ORDER:
            index, keyword = TRITON_HIGHER_ORDER[last]
            if isinstance(func, ast.Attribute) and self.names.resolve(func).split(".")[0] != "triton":
                index -= 1   # x.reduce(axis, fn)
            fn = next((k.value for k in call.keywords if k.arg == keyword), None)
            if fn is None and 0 <= index < len(call.args):
                fn = call.args[index]
            if isinstance(fn, ast.Name) and fn.id in self.params and not self.bodies.launched_with_jit(self.kernel, fn.id):
                return f"hands its argument {fn.id} to {last}, which no launch in the file passes a @triton.jit function,"
            if isinstance(fn, ast.Name) and fn.id in self.local and fn.id not in self.params:
                return f"hands {fn.id}, a value rather than a @triton.jit function, to {last}"
        return None

    def const(self, node: ast.AST, seen: set[str]) -> bool:
        """A value known where the kernel compiles: literals, constexpr parameters, Triton's constants and
        constructors on such values, math on them (never a tensor's values)."""
        if isinstance(node, ast.Constant):
            return True
        if isinstance(node, (ast.UnaryOp, ast.BinOp, ast.BoolOp, ast.Compare, ast.IfExp, ast.Tuple, ast.List)):
            return all(self.const(c, seen) for c in ast.iter_child_nodes(node) if isinstance(c, ast.expr))
        if isinstance(node, ast.Subscript):
            return self.const(node.value, seen) and self.const(node.slice, seen)
        if isinstance(node, ast.Name):
            if node.id in self.constexpr:
                return True
            if node.id in self.params or node.id in seen:
                return False
            full = self.names.resolve(node) if node.id in self.names.alias else ""
            if full.split(".")[0] == "triton" or (full.startswith("math.") and full.split(".")[-1] in MATH_CONSTANTS):
                return True
            values = self.local.get(node.id) if node.id in self.local else self._bindings(node.id)
            if not values:
                return node.id in KERNEL_BUILTINS
            return all(isinstance(v, ast.expr) and self.const(v, seen | {node.id}) for v in values)
        full = self.names.resolve(node) if isinstance(node, (ast.Attribute, ast.Call)) else ""
        if isinstance(node, ast.Attribute):
            root = _root_name(node)
            return root is not None and root in self.names.alias and (full.split(".")[0] == "triton" or (
                full.startswith("math.") and full.split(".")[-1] in MATH_CONSTANTS))
        if isinstance(node, ast.Call):
            func = self.names.resolve(node.func) if _root_name(node.func) in self.names.alias else ""
            if func.split(".")[0] == "triton" and func.split(".")[-1] == "constexpr":
                return True   # tl.constexpr(...): Triton takes the global as a constant whatever computed it on the host
            builtin = isinstance(node.func, ast.Name) and node.func.id in KERNEL_BUILTINS and self._bindings(node.func.id) is None
            if not (builtin or func.split(".")[0] in ("triton", "math")):
                return False
            return all(self.const(a, seen) or (isinstance(a, ast.Name) and a.id in self.bodies.jit_names)
                       for a in list(node.args) + [k.value for k in node.keywords])
        return False
