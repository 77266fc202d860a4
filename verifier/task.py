"""Loading tasks: KernelBench-format reference ops, and suites of them.

A task file defines `class Model(nn.Module)`, `get_inputs()` and
`get_init_inputs()`; kgen's optional extras are `get_small_inputs()`, `ATOL`
and `RTOL`. Any KernelBench task file loads unchanged.

    from verifier.task import load_task
    task = load_task("tasks/softmax.py")      # raises TaskError with a one-line reason

`load_task` imports the file to check it (task files are the user's own code,
trusted as such); the input generators are called on torch's meta device, so
checking a task with 4096x4096 inputs costs no memory.
"""

from __future__ import annotations

import ast
import importlib.util
import sys
import types
from pathlib import Path

from verifier.records import Task


class TaskError(Exception):
    """A task file that cannot be used; the message is one line naming the file."""


def import_task_module(path: Path, name: str = "kgen_task", overrides: dict | None = None,
                       device: str | None = None) -> types.ModuleType:
    """Execute a task file as a module (also used inside the sandbox).

    `overrides` ({"batch_size": 31, "shape": (3, 5)}, e.g. a Task's `small_overrides`) replaces the values
    of those module-level constants where the file assigns them, before anything reads them: sizes
    computed from them at import (`shape = (batch_size, dim)`) follow. Lists stand for tuples (JSON
    has no tuples). `device="cpu"` makes the task's own functions device-neutral for a CPU check:
    `.cuda()`, `device="cuda"` and `.to("cuda")` in get_inputs, get_init_inputs, their small forms
    and Model land on the CPU (verifier.devices), and a get_small_init_inputs() stands in for
    get_init_inputs(), as get_small_inputs() does for get_inputs().
    """
    path = Path(path)
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise TaskError(f"{path}: cannot be imported as a Python module")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # NOTE: dataclasses and pickling inside tasks need the module registered
    if overrides:
        source = path.read_text(encoding="utf-8")
        tree = with_constants(ast.parse(source, filename=str(path)), overrides, path)
        exec(compile(tree, str(path), "exec"), module.__dict__)  # noqa: S102 - the task is the user's own code
    else:
        spec.loader.exec_module(module)
    if device == "cpu":
        _cpu_view(module, path)
    return module


def size_constants(tree: ast.Module) -> dict[str, int | tuple[int, ...]]:
    """The module-level constants a file assigns a literal integer, or a tuple of them, in source order.

    `batch_size = 4096`, `M = 1024 * 2` (KernelBench writes sizes so), `dim: int = 393216`,
    `rows, cols = 127, 781` and `shape = (64, 128)` count; bools, floats, negative numbers and anything
    computed from names (`shape = (batch_size, dim)`) do not: that follows the constants it reads.
    """
    found: dict[str, int | tuple[int, ...]] = {}
    for node in tree.body:
        for target, value in _assignments(node):
            literal = _int_literal(value)
            if literal is not None:
                found[target.id] = literal
    return found


def with_constants(tree: ast.Module, overrides: dict, path: Path | str = "task") -> ast.Module:
    """`tree` with the module-level assignments of the overridden constants changed to the new values."""
    known = size_constants(tree)
    overrides = {k: tuple(v) if isinstance(v, list) else v for k, v in overrides.items()}
    unknown = [k for k in overrides if k not in known]
    if unknown:
        listed = ", ".join(f"{k}={v!r}".replace(" ", "") for k, v in known.items()) or "none"
        raise TaskError(f"{path}: {', '.join(unknown)} is not a module-level integer constant of the task "
                        f"(its constants: {listed})")
    for key, value in overrides.items():
        if isinstance(known[key], tuple) != isinstance(value, tuple) or not _ints(value):
            raise TaskError(f"{path}: {key} is {known[key]!r} in the task; {value!r} cannot replace it "
                            f"(an integer for an integer, a tuple of integers for a tuple)")
    for node in tree.body:
        for target, value in _assignments(node):
            if target.id in overrides and _int_literal(value) is not None:
                new = ast.copy_location(ast.Constant(overrides[target.id]), value)
                _replace(node, value, ast.fix_missing_locations(new))
    return tree


def _assignments(node: ast.stmt):
    """(Name target, value expression) pairs a module-level statement binds, tuple unpacking included."""
    if isinstance(node, ast.Assign):
        for target in node.targets:
            if isinstance(target, ast.Name):
                yield target, node.value
            elif isinstance(target, ast.Tuple) and isinstance(node.value, ast.Tuple) \
                    and len(target.elts) == len(node.value.elts):
                for t, v in zip(target.elts, node.value.elts):
                    if isinstance(t, ast.Name):
                        yield t, v
    elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None:
        yield node.target, node.value


def _replace(node: ast.stmt, old: ast.expr, new: ast.expr) -> None:
    if getattr(node, "value", None) is old:
        node.value = new
        return
    elts = node.value.elts  # a tuple unpacking: the element in place
    elts[next(i for i, e in enumerate(elts) if e is old)] = new


_FOLDED = {ast.Add: lambda a, b: a + b, ast.Mult: lambda a, b: a * b, ast.Sub: lambda a, b: a - b,
           ast.FloorDiv: lambda a, b: a // b if b else None, ast.Pow: lambda a, b: a ** b if 0 <= b <= 64 else None,
           ast.LShift: lambda a, b: a << b if 0 <= b <= 64 else None}


def _int_literal(value: ast.expr) -> int | tuple[int, ...] | None:
    """The value of an integer written with literals only (`4096`, `1024 * 2`, `2 ** 20`), or a tuple of them."""
    if isinstance(value, ast.Constant) and type(value.value) is int and value.value >= 0:
        return value.value
    if isinstance(value, ast.BinOp) and type(value.op) in _FOLDED:
        left, right = _int_literal(value.left), _int_literal(value.right)
        if type(left) is int and type(right) is int:
            folded = _FOLDED[type(value.op)](left, right)
            return folded if folded is not None and folded >= 0 else None
        return None
    if isinstance(value, ast.Tuple) and value.elts:
        items = [_int_literal(e) for e in value.elts]
        if all(type(i) is int for i in items):
            return tuple(items)
    return None


def _ints(value) -> bool:
    items = value if isinstance(value, tuple) else (value,)
    return all(type(i) is int and i > 0 for i in items)


def _cpu_view(module: types.ModuleType, path: Path) -> None:
    """The task as a CPU check uses it: small init inputs where given, and CUDA placements on the CPU."""
    small_init = getattr(module, "get_small_init_inputs", None)
    if callable(small_init):
        module.get_init_inputs = small_init
    from verifier.devices import mentions_cuda

    if not mentions_cuda(path.read_text(encoding="utf-8")):
        return  # NOTE: nothing of the task names CUDA: its calls run as written, with no mode in between
    for fn_name in ("get_inputs", "get_init_inputs", "get_small_inputs"):
        fn = getattr(module, fn_name, None)
        if callable(fn):
            setattr(module, fn_name, _on_cpu(fn))
    model = getattr(module, "Model", None)
    if isinstance(model, type):
        for method in ("__init__", "forward"):
            if method in vars(model):
                setattr(model, method, _on_cpu(vars(model)[method]))


def _on_cpu(fn):
    import functools

    from verifier.devices import on_device

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        with on_device("cpu"):
            return fn(*args, **kwargs)

    return wrapper


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__


def _call_on_meta(fn, label: str, path: Path) -> None:
    """Call an input generator cheaply: on the meta device when it allows, else for real."""
    import torch

    from verifier.devices import on_device

    try:
        with torch.device("meta"), on_device("meta"):   # .cuda() and device="cuda" land on meta too
            out = fn()
    except Exception:  # noqa: BLE001 - some generators need real data (.item()): call for real
        try:
            if torch.cuda.is_available():
                out = fn()
            else:
                with on_device("cpu"):                 # a CUDA-placed task on a machine without CUDA
                    out = fn()
        except Exception as exc:  # the task's own code failed: that is the user's error to see
            raise TaskError(f"{path}: {label}() raised {_one_line(exc)}") from exc
    if not isinstance(out, (list, tuple)):
        raise TaskError(f"{path}: {label}() must return a list of inputs, got {type(out).__name__}")


def load_task(path: str | Path, small_shapes: dict | None = None, device: str = "auto") -> Task:
    """Load and check a task file; raise TaskError with a one-line reason if it is unusable.

    Where the task will be checked on the CPU (`device` "cpu", or "auto" on a machine without CUDA),
    or when `small_shapes` (constant -> value, `--small-shapes`) is given, it also decides the shapes
    that check uses (verifier.shapes.plan_cpu_check): the Task's `small_overrides` and `derived_note`
    say what they are; a task too large for the CPU with nothing small to check it on is a TaskError.
    """
    path = Path(path)
    if not path.exists():
        raise TaskError(f"{path}: no such file")
    if path.is_dir():
        raise TaskError(f"{path}: is a directory, expected a task .py file")
    try:
        source = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise TaskError(f"{path}: not UTF-8 text") from None
    try:
        tree = ast.parse(source, filename=str(path))
    except SyntaxError as exc:
        raise TaskError(f"{path}: not valid Python (line {exc.lineno}: {exc.msg})") from None
    defined = {n.name for n in tree.body if isinstance(n, (ast.ClassDef, ast.FunctionDef))}
    for required in ("Model", "get_inputs", "get_init_inputs"):
        if required not in defined and not _assigned(tree, required):
            kind = "class" if required == "Model" else "function"
            raise TaskError(f"{path}: no {kind} {required} defined")

    try:
        module = import_task_module(path.resolve(), f"kgen_task_{path.stem}")
    except TaskError:
        raise
    except Exception as exc:
        raise TaskError(f"{path}: importing it raised {_one_line(exc)}") from exc

    _call_on_meta(module.get_init_inputs, "get_init_inputs", path)
    _call_on_meta(module.get_inputs, "get_inputs", path)
    has_small = callable(getattr(module, "get_small_inputs", None))
    if has_small:
        _call_on_meta(module.get_small_inputs, "get_small_inputs", path)
    if callable(getattr(module, "get_small_init_inputs", None)):
        _call_on_meta(module.get_small_init_inputs, "get_small_init_inputs", path)

    overrides, note = None, ""
    if small_shapes or _checked_on_cpu(device):
        from verifier.shapes import plan_cpu_check

        plan = plan_cpu_check(path, small_shapes)
        overrides, note = (dict(plan.overrides) or None), plan.note

    return Task(
        path=path,
        name=path.stem,
        source=source,
        atol=_float_attr(module, "ATOL", path),
        rtol=_float_attr(module, "RTOL", path),
        has_small_inputs=has_small,
        small_overrides=overrides,
        derived_note=note,
    )


def _checked_on_cpu(device: str) -> bool:
    if device == "cpu":
        return True
    if device != "auto":
        return False
    import torch

    return not torch.cuda.is_available()


def _assigned(tree: ast.Module, name: str) -> bool:
    """True when a module-level assignment binds `name` (e.g. `Model = SomeOtherModel`)."""
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in node.targets):
            return True
        if isinstance(node, (ast.Import, ast.ImportFrom)) and any((a.asname or a.name) == name for a in node.names):
            return True
    return False


def _float_attr(module: types.ModuleType, name: str, path: Path) -> float | None:
    value = getattr(module, name, None)
    if value is None:
        return None
    try:
        return float(value)
    except (TypeError, ValueError):
        raise TaskError(f"{path}: {name} must be a number, got {value!r}") from None


def load_suite(path: str | Path) -> list[Path]:
    """A suite is a directory of task files or a text file listing them (one per line, # comments)."""
    path = Path(path)
    if not path.exists():
        raise TaskError(f"{path}: no such suite (a directory of tasks or a text file listing them)")
    if path.is_dir():
        files = sorted(p for p in path.glob("*.py") if not p.name.startswith("_"))
        if not files:
            raise TaskError(f"{path}: directory holds no task .py files")
        return files
    if path.suffix == ".py":
        return [path]
    files = []
    for lineno, raw in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        entry = Path(line)
        if not entry.is_absolute():
            # relative entries resolve against the list's folder, then the working directory
            candidate = path.parent / entry
            entry = candidate if candidate.exists() else entry
        if not entry.exists():
            raise TaskError(f"{path}:{lineno}: listed task {line} does not exist")
        files.append(entry)
    if not files:
        raise TaskError(f"{path}: suite list names no tasks")
    return files
