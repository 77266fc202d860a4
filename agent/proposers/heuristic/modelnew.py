"""Writes the parts of a candidate file around its kernels: the header, and ModelNew.

ModelNew takes the task's constructor arguments and holds the reference's
parameters under the same names, so `load_state_dict(strict=True)` from a
`Model` works; it never builds or imports the task's `Model`. Parameter shapes
are written in terms of the constructor's arguments where they follow one
(`nn.Linear(in_features, out_features)`), found by building the reference on
the meta device with each integer argument changed and seeing which sizes move.

    signature, lines = parameter_holders(Model, [768, 3072], Model(768, 3072))
    # "in_features, out_features", ["self.linear = nn.Linear(in_features, out_features, bias=True)"]
"""

from __future__ import annotations

import inspect

from agent.proposers.heuristic.program import Unsupported

PROBE_STEP = 7   # added to one integer constructor argument at a time; odd so that a size it scales is recognisable


def _signature(model_cls) -> tuple[str, list[str]]:
    """Model.__init__'s parameters as source text (annotations dropped), and the positional names."""
    params = list(inspect.signature(model_cls.__init__).parameters.values())[1:]
    parts, positional, star_done = [], [], False
    for p in params:
        if p.kind is p.VAR_POSITIONAL:
            parts.append(f"*{p.name}")
            star_done = True
            continue
        if p.kind is p.VAR_KEYWORD:
            parts.append(f"**{p.name}")
            continue
        if p.kind is p.KEYWORD_ONLY and not star_done:
            parts.append("*")
            star_done = True
        text = p.name
        if p.default is not p.empty:
            default = repr(p.default)
            text += f"={default}" if _is_literal(default) else "=None"
        parts.append(text)
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD):
            positional.append(p.name)
    return ", ".join(parts), positional


def _is_literal(text: str) -> bool:
    import ast

    try:
        ast.literal_eval(text)
        return True
    except (ValueError, SyntaxError):
        return False


def _probe_sizes(model_cls, init_values: list, names: list[str], shapes: dict) -> dict:
    """{(state key, dim): expression} for sizes that follow one integer constructor argument."""
    import torch

    follows: dict = {}
    for i, value in enumerate(init_values):
        if i >= len(names) or isinstance(value, bool) or not isinstance(value, int):
            continue
        probe = list(init_values)
        probe[i] = value + PROBE_STEP
        try:
            with torch.device("meta"):
                other = model_cls(*probe)
            moved = {k: tuple(v.shape) for k, v in other.state_dict().items()}
        except Exception:  # the constructor rejects the probe value: that argument stays unlinked
            continue
        for key, shape in shapes.items():
            new = moved.get(key)
            if new is None or len(new) != len(shape):
                continue
            for d, (old, now) in enumerate(zip(shape, new)):
                delta = now - old
                if delta == 0 or delta % PROBE_STEP:
                    continue
                scale = delta // PROBE_STEP
                if old == scale * value:
                    expr = names[i] if scale == 1 else f"{scale} * {names[i]}"
                    follows.setdefault((key, d), []).append(expr)
    return {k: v[0] for k, v in follows.items() if len(v) == 1}


def parameter_holders(model_cls, init_values: list, model) -> tuple[str, list[str]]:
    """ModelNew.__init__'s signature text and the statements that create its parameters."""
    import torch

    signature, names = _signature(model_cls)
    state = model.state_dict()
    shapes = {k: tuple(v.shape) for k, v in state.items()}
    sizes = _probe_sizes(model_cls, init_values, names, shapes) if shapes else {}

    def dims(key: str) -> list[str]:
        return [sizes.get((key, d), str(s)) for d, s in enumerate(shapes[key])]

    def dtype_arg(tensor) -> str:
        return "" if tensor.dtype == torch.float32 else f", dtype={tensor.dtype}"

    def empty(key: str, tensor) -> str:
        shape = ", ".join(dims(key))
        return f"torch.empty(({shape}{',' if len(shapes[key]) == 1 else ''}){dtype_arg(tensor)})"

    lines: list[str] = []
    made = {""}

    def ensure(path: str) -> None:
        """Create plain containers for the parents of a submodule path."""
        parts = path.split(".")
        for j in range(1, len(parts)):
            parent = ".".join(parts[:j])
            if parent not in made:
                lines.append(f"self.{parent} = nn.Module()")
                made.add(parent)

    for path, module in model.named_modules():
        own_params = dict(module.named_parameters(recurse=False))
        own_buffers = dict(module.named_buffers(recurse=False))
        hidden = getattr(module, "_non_persistent_buffers_set", set())
        for bname in own_buffers:
            if bname in hidden:
                where = f"{path}.{bname}" if path else bname
                raise Unsupported(f"non-persistent buffer {where}: its values are not in the state_dict")
        if not own_params and not own_buffers:
            continue
        prefix = f"{path}." if path else ""
        ensure(path)
        typed = _typed_module(module, prefix, dims, dtype_arg) if path else None
        if typed is not None:
            lines.append(f"self.{path} = {typed}")
            made.add(path)
            continue
        if path and path not in made:
            lines.append(f"self.{path} = nn.Module()")
            made.add(path)
        owner = f"self.{path}" if path else "self"
        for pname, tensor in own_params.items():
            lines.append(f"{owner}.{pname} = nn.Parameter({empty(prefix + pname, tensor)})")
        for bname, tensor in own_buffers.items():
            lines.append(f"{owner}.register_buffer({bname!r}, {empty(prefix + bname, tensor)})")
    return signature, lines


def _typed_module(module, prefix: str, dims, dtype_arg) -> str | None:
    """nn.Linear/nn.LayerNorm/nn.RMSNorm rebuilt from sizes, or None for any other module."""
    import torch.nn as nn

    params = dict(module.named_parameters(recurse=False))
    if list(module.named_buffers(recurse=False)):
        return None
    if type(module) is nn.Linear:
        w = dims(prefix + "weight")
        return f"nn.Linear({w[1]}, {w[0]}, bias={module.bias is not None}{dtype_arg(module.weight)})"
    if type(module) is nn.LayerNorm and "weight" in params:
        shape = ", ".join(dims(prefix + "weight")) + ("," if len(module.normalized_shape) == 1 else "")
        return (f"nn.LayerNorm(({shape}), eps={module.eps!r}, elementwise_affine=True, "
                f"bias={module.bias is not None}{dtype_arg(module.weight)})")
    if hasattr(nn, "RMSNorm") and type(module) is nn.RMSNorm and "weight" in params:
        shape = ", ".join(dims(prefix + "weight")) + ("," if len(module.normalized_shape) == 1 else "")
        return f"nn.RMSNorm(({shape}), eps={module.eps!r}, elementwise_affine=True{dtype_arg(module.weight)})"
    return None


def header(task_name: str, family: str, account: str, note: str, uses_math: bool) -> str:
    """The file's docstring and imports."""
    account = account.replace('"""', "'''")
    imports = ["import math", ""] if uses_math else []
    return "\n".join([
        f'"""{task_name}: {family} Triton kernel written by kgen\'s heuristic proposer.',
        "",
        account,
        "",
        f"Configuration: {note}",
        "Sizes are read at run time; constants (eps, dims, scales) are those of the traced reference.",
        '"""',
        "",
        *imports,
        "import torch",
        "import torch.nn as nn",
        "import triton",
        "import triton.language as tl",
        "",
    ])


def model_class(task_name: str, family: str, signature: str, init_lines: tuple[str, ...],
                forward_args: tuple[str, ...], launcher: str, operand_exprs: list[str]) -> str:
    """`class ModelNew`: parameter holders, and a forward that only launches."""
    sig = f", {signature}" if signature else ""
    body = [f"        {line}" for line in init_lines]
    call_args = ", ".join(operand_exprs)
    return "\n".join([
        "",
        "class ModelNew(nn.Module):",
        f'    """{task_name} as a {family} Triton kernel; holds the reference\'s parameters under the same names.',
        "",
        "    The submodules only hold parameters (state_dict keys match Model's); forward never calls them.",
        '    """',
        "",
        f"    def __init__(self{sig}):",
        "        super().__init__()",
        *body,
        "",
        f"    def forward(self, {', '.join(forward_args)}):",
        f"        return {launcher}({call_args})",
        "",
    ])


def identifier(name: str) -> str:
    """A task name usable as a Python identifier prefix."""
    out = "".join(c if c.isalnum() or c == "_" else "_" for c in name)
    return out if out and not out[0].isdigit() else f"k_{out}"
