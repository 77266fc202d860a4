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


def import_task_module(path: Path, name: str = "kgen_task") -> types.ModuleType:
    """Execute a task file as a module (also used inside the sandbox)."""
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise TaskError(f"{path}: cannot be imported as a Python module")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # NOTE: dataclasses and pickling inside tasks need the module registered
    spec.loader.exec_module(module)
    return module


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__


def _call_on_meta(fn, label: str, path: Path) -> None:
    """Call an input generator cheaply: on the meta device when it allows, else for real."""
    import torch

    try:
        with torch.device("meta"):
            out = fn()
    except Exception:  # noqa: BLE001 - some generators need real data (.item(), .cuda()): call for real
        try:
            out = fn()
        except Exception as exc:  # the task's own code failed: that is the user's error to see
            raise TaskError(f"{path}: {label}() raised {_one_line(exc)}") from exc
    if not isinstance(out, (list, tuple)):
        raise TaskError(f"{path}: {label}() must return a list of inputs, got {type(out).__name__}")


def load_task(path: str | Path) -> Task:
    """Load and check a task file; raise TaskError with a one-line reason if it is unusable."""
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

    return Task(
        path=path,
        name=path.stem,
        source=source,
        atol=_float_attr(module, "ATOL", path),
        rtol=_float_attr(module, "RTOL", path),
        has_small_inputs=has_small,
    )


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
