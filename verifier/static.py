"""Static checks on a candidate's source, on its syntax tree (never regexes).

    from verifier.static import check_source
    problem = check_source(source)   # None, or a StaticProblem(status, reason)

A candidate must define `ModelNew` and contain at least one kernel of its own:
a `@triton.jit` (or `@triton.autotune`-wrapped) function that it launches
(`kernel[grid](...)`), or CUDA C++ compiled through `cupy.RawModule` /
`cupy.RawKernel` or `torch.utils.cpp_extension.load_inline`. It must not reach
for the things that cheat a harness: threads, processes, side streams,
reading the harness's memory or frames, patching torch/triton/timing, writing
files or opening sockets. Each rule names the exploit it stops.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass


@dataclass(frozen=True)
class StaticProblem:
    status: str   # "compile_error" (not Python) or "rejected"
    reason: str


# Modules whose import means the candidate reaches outside its kernels.
FORBIDDEN_MODULES = {
    "threading": "starts threads (work the timer does not wait for)",
    "_thread": "starts threads (work the timer does not wait for)",
    "concurrent": "starts threads or processes (work the timer does not wait for)",
    "multiprocessing": "starts processes",
    "subprocess": "starts processes",
    "asyncio": "runs work outside the timed call",
    "gc": "reads the harness's objects (gc)",
    "inspect": "reads the harness's frames (inspect)",
    "ctypes": "reaches raw memory or native code (ctypes)",
    "socket": "opens network sockets",
    "urllib": "uses the network",
    "http": "uses the network",
    "requests": "uses the network",
    "signal": "installs signal handlers",
    "importlib": "imports modules dynamically",
    "builtins": "patches builtins",
    "pickle": "loads pickled objects",
    "marshal": "loads code objects",
    "shutil": "manipulates files",
    "tempfile": "writes files",
    "verifier": "imports the verifier",
    "profiler": "imports the profiler",
    "agent": "imports kgen itself",
    "kgen_task": "imports the task's own Model",
    "sys": "reaches the interpreter's internals (sys)",
    "time": "reads or patches timers",
}
# Attribute names that only matter to a cheat.
FORBIDDEN_ATTRS = {
    "_getframe": "reads the harness's frames (sys._getframe)",
    "get_objects": "reads the harness's objects (gc.get_objects)",
    "get_referrers": "reads the harness's objects",
    "f_back": "walks up into the harness's frames",
    "f_locals": "reads a frame's locals",
    "f_globals": "reads a frame's globals",
    "__globals__": "reaches a function's globals",
    "__subclasses__": "walks the class hierarchy to reach hidden objects",
    "Stream": "uses a side CUDA stream the timer does not wait for",
    "ExternalStream": None,  # allowed: cupy's wrapper of torch's *current* stream (checked below)
    "set_stream": "switches CUDA streams",
    "Thread": "starts threads",
    "fork": "starts processes",
    "system": "runs shell commands",
    "popen": "runs shell commands",
    "spawn": "starts processes",
    "execv": "replaces the process",
    "_exit": "exits the process to skip the verdict",
    "environ": "reads the environment",
    "getenv": "reads the environment",
    "compile": None,  # checked in context: torch.compile is rejected below
}
FORBIDDEN_CALLS = {
    "exec": "executes dynamic code",
    "eval": "evaluates dynamic code",
    "__import__": "imports modules dynamically",
    "globals": "reads module globals dynamically",
    "vars": "reads namespaces dynamically",
    "setattr": "sets attributes dynamically (patching)",
    "delattr": "deletes attributes dynamically (patching)",
    "exit": "exits the process to skip the verdict",
    "quit": "exits the process to skip the verdict",
    "breakpoint": "stops in a debugger",
    "open": "opens files",
}
# Roots whose attributes a candidate must never assign to (monkey-patching).
PATCH_ROOTS = {"torch", "triton", "time", "sys", "os", "builtins", "numpy", "np", "F", "nn", "cupy", "cp", "tl"}


def _root_name(node: ast.AST) -> str | None:
    while isinstance(node, (ast.Attribute, ast.Subscript, ast.Call)):
        node = node.value if not isinstance(node, ast.Call) else node.func
    return node.id if isinstance(node, ast.Name) else None


def _dotted(node: ast.AST) -> str:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
    return ".".join(reversed(parts))


def _is_triton_jit(dec: ast.AST) -> bool:
    target = dec.func if isinstance(dec, ast.Call) else dec
    name = _dotted(target)
    return name in {"triton.jit", "jit", "triton.autotune", "autotune", "triton.heuristics", "heuristics"}


def check_source(source: str) -> StaticProblem | None:
    """Return the first problem found, or None when the source may run."""
    try:
        tree = ast.parse(source)
    except SyntaxError as exc:
        return StaticProblem("compile_error", f"not valid Python: line {exc.lineno}: {exc.msg}")

    classes = {n.name for n in ast.walk(tree) if isinstance(n, ast.ClassDef)}
    if "ModelNew" not in classes:
        named = ", ".join(sorted(classes)) or "none"
        return StaticProblem("rejected", f"no class ModelNew defined (classes found: {named})")

    triton_kernels = {
        n.name for n in ast.walk(tree)
        if isinstance(n, ast.FunctionDef) and any(_is_triton_jit(d) for d in n.decorator_list)
    }
    cuda_builders = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            name = _dotted(node.func)
            if name.split(".")[-1] in {"RawModule", "RawKernel", "load_inline", "ElementwiseKernel", "ReductionKernel"}:
                cuda_builders.append(name)
    if not triton_kernels and not cuda_builders:
        return StaticProblem("rejected", "no kernel found: define a @triton.jit function, or compile CUDA "
                                         "through cupy.RawModule or torch.utils.cpp_extension.load_inline")
    if triton_kernels and not cuda_builders:
        launched = {
            _root_name(n.func.value) for n in ast.walk(tree)
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Subscript)
        }
        if not launched & triton_kernels:
            names = ", ".join(sorted(triton_kernels))
            return StaticProblem("rejected", f"Triton kernel(s) {names} defined but never launched (no kernel[grid](...) call)")

    for node in ast.walk(tree):
        problem = _check_node(node)
        if problem:
            return StaticProblem("rejected", problem)
    return None


def _check_node(node: ast.AST) -> str | None:
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
        if isinstance(node, ast.ImportFrom):
            names += [f"{node.module}.{a.name}" for a in node.names]
        for name in names:
            top = name.split(".")[0]
            if top in FORBIDDEN_MODULES:
                return f"imports {name}: {FORBIDDEN_MODULES[top]}"
            if name in {"torch._dynamo", "torch._inductor", "torch.multiprocessing", "torch.utils.flop_counter",
                        "torch.overrides", "torch.utils._python_dispatch"}:
                return f"imports {name}: reaches torch's compiler or dispatch machinery"
            if name.startswith("os.") or name == "os.path":
                continue
        if isinstance(node, ast.ImportFrom) and node.module == "os":
            bad = [a.name for a in node.names if a.name not in {"path"}]
            if bad:
                return f"imports {', '.join(bad)} from os: reaches the process and file system"
    if isinstance(node, ast.Attribute):
        if node.attr in FORBIDDEN_ATTRS and FORBIDDEN_ATTRS[node.attr]:
            return f"uses .{node.attr}: {FORBIDDEN_ATTRS[node.attr]}"
        dotted = _dotted(node)
        if dotted in {"torch.compile", "torch.jit.script", "torch.jit.trace", "torch._dynamo", "torch.ops"}:
            return f"uses {dotted}: torch would do the work"
        if dotted.startswith("torch.ops.") or dotted.startswith("torch._C") or dotted == "torch._C":
            return f"uses {dotted}: calls torch's operators directly"
        if dotted.startswith("torch.cuda.") and node.attr in {"synchronize", "Event", "graph", "CUDAGraph",
                                                             "set_sync_debug_mode", "_sleep"}:
            return f"uses {dotted}: touches the timer's synchronisation"
        if dotted in {"torch.nn.functional", "F"}:
            return None
    if isinstance(node, ast.Call):
        name = node.func.id if isinstance(node.func, ast.Name) else None
        if name in FORBIDDEN_CALLS:
            return f"calls {name}(): {FORBIDDEN_CALLS[name]}"
        if name == "getattr" and len(node.args) >= 2 and not isinstance(node.args[1], ast.Constant):
            return "calls getattr() with a computed name: hides what it reaches"
        if name == "getattr" and len(node.args) >= 2 and isinstance(node.args[1], ast.Constant):
            attr = str(node.args[1].value)
            if attr in FORBIDDEN_ATTRS and FORBIDDEN_ATTRS[attr]:
                return f"reaches .{attr} through getattr: {FORBIDDEN_ATTRS[attr]}"
    if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        for target in targets:
            if isinstance(target, ast.Attribute) and _root_name(target) in PATCH_ROOTS:
                return f"assigns {_dotted(target) or 'an attribute'}: monkey-patches a library the harness relies on"
    if isinstance(node, (ast.Global, ast.Nonlocal)):
        return None
    return None
