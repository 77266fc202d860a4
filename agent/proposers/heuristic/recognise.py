"""Recognises which op family a task's reference belongs to, from its torch.export graph.

    rec = recognise("tasks/softmax.py")
    rec.family            # "rowwise"
    rec.describe()        # "rowwise: softmax over dim 1 of x (61, 3001) float32 ..."
    recognise("tasks/cumsum.py").reason
    # "no template for aten.cumsum; configure an LLM with --model"

Why torch.export and not torch.fx.symbolic_trace: symbolic_trace records the
reference as written (torch.softmax, F.softmax, x.softmax, nn.Softmax, `x @ w`,
x.float() are six spellings of three things), keeps nn.Linear/nn.LayerNorm as
opaque submodule calls, and gives no shapes without a separate ShapeProp.
torch.export lowers every spelling to one aten op with its defaults filled in
(aten.softmax.int, aten.linear.default, aten.to.dtype), lifts parameters to
named inputs (so "linear.weight" comes with its state_dict key), and attaches a
fake tensor with shape and dtype to every node. Its graph is a sequence of
aten ops, which is exactly the vocabulary the op families are defined in.

The trace uses the task's small inputs for structure (ranks, dtypes,
broadcasting); a second trace on the meta device with get_inputs() gives the
benchmark sizes the configuration walk tunes for, at no memory cost. Neither
size is baked into a kernel: launchers read sizes at run time.

Families: pointwise chains (broadcasting, scalars, casts), reductions over
contiguous dims (softmax, log_softmax, layer_norm, rms_norm, sum/mean/amax/
amin/max/min/var/std/logsumexp/norm, cross_entropy) with pointwise work around
them, and mm/matmul/bmm/linear/addmm with a pointwise epilogue. Anything else
is `Recognition.unsupported` with the reason, never an exception.

Over 450 lines on purpose: one walk over the exported graph decides the
family, and the three families' matchers share its node helpers; apart,
each would re-walk the graph.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

from agent.proposers.heuristic.configs import Problem
from agent.proposers.heuristic.modelnew import parameter_holders
from agent.proposers.heuristic.program import (
    Acc, Const, Gather, Load, MatmulProgram, Op, Operand, PointwiseProgram, Program, Reduce,
    RowLen, RowProgram, Unsupported, loads, remap, walk,
)

LLM_HINT = "configure an LLM with --model"

# aten ops that only move data or check metadata: the value passes through unchanged
IDENTITY_OPS = {"clone", "contiguous", "alias", "detach", "lift_fresh_copy", "lift_fresh"}
# bookkeeping nodes export inserts; they compute nothing
SKIPPED_OPS = {"_assert_tensor_metadata", "_assert_scalar", "sym_constrain_range_for_size"}
UNARY_OPS = {
    "neg": "neg", "exp": "exp", "log": "log", "sqrt": "sqrt", "rsqrt": "rsqrt", "abs": "abs",
    "reciprocal": "reciprocal", "erf": "erf", "sin": "sin", "cos": "cos", "sigmoid": "sigmoid",
    "tanh": "tanh", "relu": "relu", "silu": "silu", "hardsigmoid": "hardsigmoid",
    "hardswish": "hardswish", "mish": "mish", "logical_not": "not",
}
BINARY_OPS = {
    "add": "add", "sub": "sub", "mul": "mul", "div": "div", "true_divide": "div",
    "maximum": "maximum", "minimum": "minimum", "gt": "gt", "ge": "ge", "lt": "lt", "le": "le",
    "eq": "eq", "ne": "ne", "logical_and": "and", "logical_or": "or",
}
# Names the generated launchers and kernels use themselves (alone, or as the stem of a_ptr, out_off,
# target_ptr, ...): an operand called so is renamed, e.g. a forward argument `b` becomes `b_in`.
RESERVED_NAMES = {
    "a", "b", "a3", "b3", "out", "loss", "target", "result", "shape", "out_shape", "full", "grid", "numel",
    "rows", "cols", "block", "block_c", "block_r", "block_n", "outer", "inner", "n", "m", "kk", "batch",
    "batch_shape", "step", "math", "torch", "triton", "tl", "nn", "self", "ModelNew",
}
TORCH_DTYPES = {"float32", "float16", "bfloat16", "float64", "int64", "int32", "int16", "int8", "uint8", "bool"}


@dataclass
class Recognition:
    """What the heuristic proposer found in a task's reference, or why it found nothing it can do."""

    task_name: str
    family: str | None                      # "pointwise", "rowwise", "matmul"; None when unsupported
    program: Program | None = None
    reason: str = ""                        # why there is no template, ending with what to do
    ops: tuple[str, ...] = ()               # the reference's aten ops, in graph order
    forward_args: tuple[str, ...] = ()      # Model.forward's tensor arguments
    input_shapes: tuple = ()                # (shape, dtype) of each forward argument, small inputs
    full_shapes: tuple = ()                 # shapes of get_inputs(), the benchmark sizes
    init_signature: str = ""                # Model.__init__'s parameters, e.g. "in_features, out_features"
    init_lines: tuple[str, ...] = ()        # ModelNew.__init__ statements that hold the parameters
    problem: Problem | None = None          # benchmark sizes the configuration walk tunes for

    @classmethod
    def unsupported(cls, task_name: str, reason: str, ops: tuple[str, ...] = ()) -> "Recognition":
        if LLM_HINT not in reason:
            reason = f"{reason}; {LLM_HINT}"
        return cls(task_name=task_name, family=None, reason=reason, ops=ops)

    @property
    def supported(self) -> bool:
        return self.family is not None

    def describe(self) -> str:
        """A short account for a person: family, ops, operands and sizes."""
        if not self.supported:
            return f"{self.task_name}: no heuristic template ({self.reason})"
        prog = self.program
        ops = ", ".join(dict.fromkeys(o.split(".")[1] if o.startswith("aten.") else o for o in self.ops))
        lines = [f"{self.task_name}: {self.family} kernel for {ops}"]
        if isinstance(prog, RowProgram):
            what = "one value per row" if prog.out_per_row else "one value per element"
            lines.append(f"reduced dims [{prog.lo}, {prog.hi}) of a rank-{prog.rank} row space, {what}"
                         + (f", then the {prog.finish} over rows" if prog.finish else ""))
        if isinstance(prog, MatmulProgram):
            epilogue = "none" if isinstance(prog.out, Acc) else "fused into the accumulator's store"
            lines.append(f"A @ B in {prog.dot_dtype} with fp32 accumulation; epilogue: {epilogue}")
        for op in prog.operands:
            lines.append(f"  operand {op.name} = {op.expr}: {tuple(op.shape)} {op.dtype}")
        lines.append(f"  output dtype {prog.out_dtype}")
        if self.problem is not None:
            lines.append(f"  benchmark size: {self.problem.describe()}")
        return "\n".join(lines)


def recognise(task) -> Recognition:
    """Recognise the family of a task (a Task, or the path of a task file)."""
    import torch

    from verifier.task import import_task_module

    path = Path(getattr(task, "path", task))
    name = path.stem
    # the task is the user's code: whatever fails in it is a reason to give, not a crash of kgen
    try:
        # NOTE: as the CPU check imports it (verifier.shapes): with the derived small sizes, device-neutral;
        # a KernelBench-size task traced at full size would build GBs of inputs in kgen's own process
        overrides = getattr(task, "small_overrides", None)
        on_cpu = not torch.cuda.is_available()
        module = import_task_module(path.resolve(), f"kgen_heuristic_{name}", overrides=overrides if on_cpu else None,
                                    device="cpu" if on_cpu else None)
        init_values = list(module.get_init_inputs())
        make_inputs = getattr(module, "get_small_inputs", None) or module.get_inputs
        with torch.random.fork_rng(devices=[]):   # seeded for repeatability, leaving the caller's RNG as it was
            torch.manual_seed(0)
            inputs = list(make_inputs())
            model = module.Model(*init_values)
    except Exception as exc:
        return Recognition.unsupported(name, f"building the reference raised {_first_line(exc)}")
    if not all(isinstance(x, torch.Tensor) for x in inputs):
        return Recognition.unsupported(name, "forward takes non-tensor inputs, which the templates do not read")
    try:
        exported = torch.export.export(model, tuple(inputs))
    except Exception as exc:
        return Recognition.unsupported(name, f"torch.export could not trace Model.forward ({_first_line(exc)})")

    ops = tuple(
        str(n.target) for n in exported.graph.nodes
        if n.op == "call_function" and _base(n) not in SKIPPED_OPS and str(n.target) != "<built-in function getitem>"
    )
    reader = _GraphReader(exported)
    try:
        program = reader.read()
        signature, init_lines = parameter_holders(module.Model, init_values, model)
    except Unsupported as exc:
        return Recognition.unsupported(name, str(exc), ops)
    except Exception as exc:  # a graph shape the reader does not expect: say so rather than stop the run
        return Recognition.unsupported(name, f"the recogniser could not read the graph ({_first_line(exc)})", ops)

    problem = _problem(module, init_values, reader, program)
    return Recognition(
        task_name=name,
        family=program.family,
        program=program,
        ops=ops,
        forward_args=tuple(reader.user_inputs),
        input_shapes=tuple((tuple(x.shape), str(x.dtype).replace("torch.", "")) for x in inputs),
        full_shapes=problem[1],
        init_signature=signature,
        init_lines=tuple(init_lines),
        problem=problem[0],
    )


def _first_line(exc: BaseException) -> str:
    text = (str(exc).strip().splitlines() or [""])[0][:200]
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


# ------------------------------------------------------------------------------------------------
# reading the graph


@dataclass
class _Val:
    """What the reader knows of one graph value."""

    ir: object = None                   # expression node (None for tuples)
    shape: tuple = ()
    dtype: str = "float32"
    cls: str = "full"                   # "full" (one value per element), "row" (per row), "scalar"
    operand: int | None = None          # set when the value is an operand itself, so views can make new operands
    items: list | None = None           # tuple results (chunk, max.dim)
    unusable: str = ""                  # a tuple item no template computes (max.dim's indices)


def _base(node) -> str:
    """'aten.softmax.int' -> 'softmax'."""
    text = str(node.target)
    parts = text.split(".")
    return parts[1] if parts[0] == "aten" and len(parts) > 1 else text


def _dtype_name(dtype) -> str:
    return str(dtype).replace("torch.", "")


def _shape(node) -> tuple:
    val = node.meta.get("val")
    return tuple(int(s) for s in val.shape) if hasattr(val, "shape") else ()


def _bind(node) -> dict:
    """The node's arguments by schema name, defaults filled in."""
    schema = node.target._schema
    bound = {}
    for i, arg in enumerate(schema.arguments):
        if i < len(node.args) and not arg.kwarg_only:
            bound[arg.name] = node.args[i]
        elif arg.name in node.kwargs:
            bound[arg.name] = node.kwargs[arg.name]
        elif arg.has_default_value():
            bound[arg.name] = arg.default_value
        else:
            bound[arg.name] = None
    return bound


def _broadcasts_to(shape: tuple, target: tuple) -> bool:
    if len(shape) > len(target):
        return False
    for s, t in zip(reversed(shape), reversed(target)):
        if s != t and s != 1:
            return False
    return True


class _GraphReader:
    """Walks an exported graph from its output back to its inputs, building one program."""

    def __init__(self, exported) -> None:
        from torch.export.graph_signature import InputKind

        self.graph = exported.graph
        self.operands: list[Operand] = []
        self.origin: list[tuple] = []      # per operand: (0, forward arg position) or (1, state position)
        self.vals: dict = {}
        self.user_inputs: list[str] = []
        self.state_targets: dict[str, str] = {}
        for spec in exported.graph_signature.input_specs:
            if spec.kind == InputKind.USER_INPUT:
                self.user_inputs.append(spec.arg.name)
            elif spec.kind in (InputKind.PARAMETER, InputKind.BUFFER):
                self.state_targets[spec.arg.name] = spec.target
            else:
                self.state_targets[spec.arg.name] = ""   # lifted constants: no template reads them
        self.matmul: dict | None = None
        self.span: tuple | None = None     # (lo, hi, row-space shape)
        self.anchor: str | None = None     # graph node whose shape is the row space (benchmark sizes)
        self.finish: str | None = None
        self.target: int | None = None
        self.ignore_index = -100

    # -- entry -----------------------------------------------------------------------------------

    def read(self) -> Program:
        output = next(n for n in self.graph.nodes if n.op == "output")
        results = output.args[0]
        if not isinstance(results, (list, tuple)) or len(results) != 1:
            raise Unsupported(f"forward returns {len(results)} tensors; the templates write one output")
        out_node = results[0]
        out = self.val(out_node)
        self.out_shape = out.shape
        if out.items is not None or out.ir is None:
            raise Unsupported("forward returns a tuple; the templates write one output")
        out_dtype = _dtype_name(out_node.meta["val"].dtype)
        if out_dtype not in ("float32", "float16", "bfloat16"):
            raise Unsupported(f"the output is {out_dtype}; the templates write float32, float16 or bfloat16")
        if isinstance(out.ir, Const):
            raise Unsupported("forward returns a constant")
        if self.matmul is not None:
            return self._matmul_program(out, out_dtype)
        if self.span is not None:
            return self._row_program(out, out_dtype)
        return self._pointwise_program(out, out_dtype)

    def _prune(self, out_ir, keep: list[int]) -> tuple[list[Operand], dict[int, int]]:
        """Keep only the operands the program reads: forward's arguments in order, then parameters."""
        used = sorted(set(keep + loads(out_ir)), key=lambda i: (self.origin[i], i))
        mapping = {old: new for new, old in enumerate(used)}
        return [self.operands[i] for i in used], mapping

    def _pointwise_program(self, out: _Val, out_dtype: str) -> PointwiseProgram:
        if not loads(out.ir):
            raise Unsupported("the output reads no input")
        operands, mapping = self._prune(out.ir, [])
        for op in operands:
            if not _broadcasts_to(op.shape, out.shape):
                raise Unsupported(f"{op.expr} {op.shape} does not broadcast to the output {out.shape}")
        return PointwiseProgram(operands, remap(out.ir, mapping), out_dtype, rank=len(out.shape))

    def _row_program(self, out: _Val, out_dtype: str) -> RowProgram:
        lo, hi, space = self.span
        keep = [self.target] if self.target is not None else []
        operands, mapping = self._prune(out.ir, keep)
        for op in operands:
            if op.per_row:
                continue
            if not _broadcasts_to(op.shape, space):
                raise Unsupported(f"{op.expr} {op.shape} does not broadcast to the reduced tensor's {space}")
        if out.cls == "full":
            if out.shape != space:
                raise Unsupported(f"the output {out.shape} is not the shape of the reduced tensor {space}")
            per_row, keepdim = False, False
        else:
            keepdim = len(out.shape) == len(space)
            if not self._row_form(out.shape) and not (self.finish and out.shape == ()):
                raise Unsupported(f"the output {out.shape} is neither {space} nor one value per row")
            per_row = True
        return RowProgram(
            operands, remap(out.ir, mapping), out_dtype, rank=len(space), lo=lo, hi=hi,
            out_per_row=per_row, keepdim=keepdim, finish=self.finish,
            target=mapping[self.target] if self.target is not None else None,
            ignore_index=self.ignore_index,
        )

    def _matmul_program(self, out: _Val, out_dtype: str) -> MatmulProgram:
        mm = self.matmul
        if any(isinstance(n, (Reduce, Gather)) for n in walk(out.ir)):
            raise Unsupported("a matmul followed by a row reduction (e.g. softmax) has no template")
        operands, mapping = self._prune(out.ir, [mm["a"], mm["b"]])
        a, b = mapping[mm["a"]], mapping[mm["b"]]
        if out.shape != mm["shape"]:
            raise Unsupported(f"the output {out.shape} is not the matmul's {mm['shape']}")
        for i, op in enumerate(operands):
            if i in (a, b) and i not in loads(remap(out.ir, mapping)):
                continue
            if not _broadcasts_to(op.shape, out.shape):
                raise Unsupported(f"{op.expr} {op.shape} does not broadcast to the matmul output {out.shape}")
        return MatmulProgram(
            operands, a=a, b=b, out=remap(out.ir, mapping), out_dtype=out_dtype, dot_dtype=mm["dtype"],
            a_rank=mm["a_rank"], b_rank=mm["b_rank"], ops=[mm["kind"]],
        )

    # -- values ----------------------------------------------------------------------------------

    def val(self, node) -> _Val:
        if node in self.vals:
            return self.vals[node]
        if node.op == "placeholder":
            result = self._placeholder(node)
        elif node.op == "call_function":
            result = self._call(node)
        else:
            raise Unsupported(f"graph node {node.op} {node.target} has no template")
        self.vals[node] = result
        return result

    def _arg(self, value) -> _Val:
        """A graph argument: a node's value, or a Python scalar as a constant."""
        import torch.fx

        if isinstance(value, torch.fx.Node):
            v = self.val(value)
            if v.unusable:
                raise Unsupported(v.unusable)
            return v
        if isinstance(value, (bool, int, float)):
            return _Val(ir=Const(value), shape=(), dtype="float32", cls="scalar")
        raise Unsupported(f"argument {value!r} has no template")

    def _new_operand(self, name: str, expr: str, dtype: str, shape: tuple, origin: tuple,
                     per_row: bool = False) -> int:
        taken = {o.name for o in self.operands}
        if name in RESERVED_NAMES or name.isupper():
            name = f"{name}_in"
        base, i = name, 1
        while name in taken:
            i += 1
            name = f"{base}{i}"
        self.operands.append(Operand(name, expr, dtype, tuple(shape), per_row))
        self.origin.append(origin)
        return len(self.operands) - 1

    def _placeholder(self, node) -> _Val:
        dtype = _dtype_name(node.meta["val"].dtype)
        if dtype == "float64":
            raise Unsupported("float64 inputs: the templates compute in fp32")
        if dtype not in TORCH_DTYPES:
            raise Unsupported(f"{dtype} inputs have no template")
        if node.name in self.user_inputs:
            name, expr = node.name, node.name
            origin = (0, self.user_inputs.index(node.name))
        else:
            target = self.state_targets.get(node.name, "")
            if not target:
                raise Unsupported(f"a tensor constant ({node.name}) in forward has no template")
            name, expr = target.replace(".", "_"), f"self.{target}"
            origin = (1, list(self.state_targets).index(node.name))
        index = self._new_operand(name, expr, dtype, _shape(node), origin)
        return _Val(ir=Load(index), shape=_shape(node), dtype=dtype, operand=index)

    def _call(self, node) -> _Val:
        import operator

        if node.target is operator.getitem:
            tup = self.val(node.args[0])
            if tup.items is None:
                raise Unsupported("indexing a tensor inside forward has no template")
            return tup.items[node.args[1]]
        base = _base(node)
        if not str(node.target).startswith("aten."):
            raise Unsupported(f"no template for {node.target}")
        args = _bind(node)
        shape, dtype = _shape(node), _dtype_name(getattr(node.meta.get("val"), "dtype", "float32"))

        if base in IDENTITY_OPS or (base == "dropout" and (not args.get("train") or not args.get("p"))):
            return self._arg(node.args[0])
        if base in UNARY_OPS:
            return self._pointwise(UNARY_OPS[base], [self._arg(node.args[0])], shape, dtype)
        if base in BINARY_OPS:
            return self._binary(base, node, args, shape, dtype)
        handler = getattr(self, f"_op_{base}", None)
        if handler is None:
            raise Unsupported(f"no template for aten.{base}")
        return handler(node, args, shape, dtype)

    # -- pointwise -------------------------------------------------------------------------------

    def _pointwise(self, name: str, vals: list[_Val], shape: tuple, dtype: str, attr: tuple = ()) -> _Val:
        classes = {v.cls for v in vals}
        if "row" in classes and "full" in classes:
            for v in vals:
                if v.cls == "row" and not self._row_form(v.shape, keepdim_only=True):
                    raise Unsupported(
                        f"a per-row value of shape {v.shape} broadcast against the full tensor without keepdim")
        cls = "full" if "full" in classes else ("row" if "row" in classes else "scalar")
        if cls == "row" and len({v.shape for v in vals if v.cls == "row"}) > 1:
            raise Unsupported("per-row values of different shapes combined")
        return _Val(ir=Op(name, tuple(v.ir for v in vals), attr), shape=shape, dtype=dtype, cls=cls)

    def _binary(self, base: str, node, args: dict, shape: tuple, dtype: str) -> _Val:
        x, y = self._arg(node.args[0]), self._arg(node.args[1])
        alpha = args.get("alpha")
        if base in ("add", "sub") and alpha not in (None, 1):
            y = self._pointwise("mul", [y, self._arg(alpha)], y.shape, y.dtype)
        if base == "div" and args.get("rounding_mode") is not None:
            raise Unsupported(f"no template for aten.div with rounding_mode={args['rounding_mode']!r}")
        return self._pointwise(BINARY_OPS[base], [x, y], shape, dtype)

    def _op_rsub(self, node, args, shape, dtype):
        x, y = self._arg(node.args[0]), self._arg(node.args[1])
        alpha = args.get("alpha")
        if alpha not in (None, 1):
            x = self._pointwise("mul", [x, self._arg(alpha)], x.shape, x.dtype)
        return self._pointwise("sub", [y, x], shape, dtype)

    def _op_where(self, node, args, shape, dtype):
        vals = [self._arg(a) for a in node.args[:3]]
        return self._pointwise("where", vals, shape, dtype)

    def _op_pow(self, node, args, shape, dtype):
        overload = str(node.target).split(".")[-1]
        if overload == "Tensor_Scalar":
            return self._pointwise("pow", [self._arg(node.args[0])], shape, dtype, (float(node.args[1]),))
        if overload == "Scalar" and float(node.args[0]) > 0:
            return self._pointwise("rpow", [self._arg(node.args[1])], shape, dtype, (float(node.args[0]),))
        raise Unsupported(f"no template for aten.pow.{overload} (a tensor exponent)")

    def _op_square(self, node, args, shape, dtype):
        return self._pointwise("pow", [self._arg(node.args[0])], shape, dtype, (2.0,))

    def _clamp(self, node, lo, hi, shape, dtype):
        for bound in (lo, hi):
            if bound is not None and not isinstance(bound, (int, float)):
                raise Unsupported("no template for clamp with tensor bounds")
        return self._pointwise("clamp", [self._arg(node.args[0])], shape, dtype, (lo, hi))

    def _op_clamp(self, node, args, shape, dtype):
        return self._clamp(node, args.get("min"), args.get("max"), shape, dtype)

    def _op_clamp_min(self, node, args, shape, dtype):
        return self._clamp(node, args.get("min"), None, shape, dtype)

    def _op_clamp_max(self, node, args, shape, dtype):
        return self._clamp(node, None, args.get("max"), shape, dtype)

    def _op_hardtanh(self, node, args, shape, dtype):
        return self._clamp(node, args.get("min_val", -1.0), args.get("max_val", 1.0), shape, dtype)

    def _op_relu6(self, node, args, shape, dtype):
        return self._clamp(node, 0.0, 6.0, shape, dtype)

    def _op_gelu(self, node, args, shape, dtype):
        name = "gelu_tanh" if args.get("approximate") == "tanh" else "gelu"
        return self._pointwise(name, [self._arg(node.args[0])], shape, dtype)

    def _op_leaky_relu(self, node, args, shape, dtype):
        slope = args.get("negative_slope", 0.01)
        return self._pointwise("leaky_relu", [self._arg(node.args[0])], shape, dtype, (float(slope),))

    def _op_elu(self, node, args, shape, dtype):
        if args.get("scale", 1) != 1 or args.get("input_scale", 1) != 1:
            raise Unsupported("no template for aten.elu with scale or input_scale (selu/celu)")
        return self._pointwise("elu", [self._arg(node.args[0])], shape, dtype, (float(args.get("alpha", 1.0)),))

    def _op_softplus(self, node, args, shape, dtype):
        attr = (float(args.get("beta", 1.0)), float(args.get("threshold", 20.0)))
        return self._pointwise("softplus", [self._arg(node.args[0])], shape, dtype, attr)

    def _cast(self, node, target_dtype, shape) -> _Val:
        x = self._arg(node.args[0])
        target = _dtype_name(target_dtype) if target_dtype is not None else x.dtype
        if target == x.dtype:
            return x
        if target not in ("float32", "float16", "bfloat16", "float64"):
            raise Unsupported(f"a cast to {target} has no template")
        v = self._pointwise("cast", [x], shape, target, (target,))
        return v

    def _op_to(self, node, args, shape, dtype):
        if args.get("device") is not None and "dtype" not in args:
            raise Unsupported("moving tensors between devices in forward has no template")
        return self._cast(node, args.get("dtype"), shape)

    def _op__to_copy(self, node, args, shape, dtype):
        return self._cast(node, args.get("dtype"), shape)

    def _op_type_as(self, node, args, shape, dtype):
        return self._cast(node, node.args[1].meta["val"].dtype, shape)

    # -- views -----------------------------------------------------------------------------------

    def _view_of_operand(self, node, suffix: str, call: str, shape: tuple) -> _Val:
        x = self._arg(node.args[0])
        if x.operand is None:
            if shape == x.shape:
                return x
            if x.cls == "row" and self._row_form(shape):
                return _Val(ir=x.ir, shape=shape, dtype=x.dtype, cls="row")
            raise Unsupported(f"aten.{_base(node)} of a computed value (shape {x.shape} -> {shape}) has no template")
        src = self.operands[x.operand]
        index = self._new_operand(f"{src.name}_{suffix}", f"{src.expr}.{call}", src.dtype, shape,
                                  self.origin[x.operand], src.per_row)
        return _Val(ir=Load(index), shape=shape, dtype=x.dtype, cls=x.cls, operand=index)

    def _op_t(self, node, args, shape, dtype):
        return self._view_of_operand(node, "t", "t()", shape)

    def _op_transpose(self, node, args, shape, dtype):
        return self._view_of_operand(node, "t", f"transpose({args['dim0']}, {args['dim1']})", shape)

    def _op_numpy_T(self, node, args, shape, dtype):
        # x.T: every dim reversed (a 2-D transpose, the way matmuls with a transposed factor are written), written
        # as t() or permute(): the op audit allows those views, not aten::numpy_T
        rank = len(node.args[0].meta["val"].shape)
        return self._view_of_operand(node, "t", "t()" if rank <= 2 else f"permute({', '.join(map(str, range(rank - 1, -1, -1)))})",
                                     shape)

    def _op_permute(self, node, args, shape, dtype):
        dims = ", ".join(str(d) for d in args["dims"])
        return self._view_of_operand(node, "p", f"permute({dims})", shape)

    def _op_unsqueeze(self, node, args, shape, dtype):
        x = self._arg(node.args[0])
        if x.operand is not None and x.shape and shape[-len(x.shape):] == x.shape:
            # leading size-1 dims change nothing once the operand is broadcast by strides (scale[None, :]);
            # operand=None: later views must not reinterpret the stored tensor with the new rank
            return _Val(ir=x.ir, shape=shape, dtype=x.dtype, cls=x.cls)
        return self._view_of_operand(node, "u", f"unsqueeze({args['dim']})", shape)

    def _op_squeeze(self, node, args, shape, dtype):
        dims = args.get("dim", args.get("dims"))
        call = "squeeze()" if dims is None else f"squeeze({dims if isinstance(dims, int) else tuple(dims)})"
        return self._view_of_operand(node, "s", call, shape)

    def _reshape(self, node, args, shape, dtype):
        x = self._arg(node.args[0])
        if shape == x.shape:
            return x
        if x.cls == "row" and self._row_form(shape):
            return _Val(ir=x.ir, shape=shape, dtype=x.dtype, cls="row")
        raise Unsupported(f"aten.{_base(node)} to a new shape {shape} bakes sizes in; no template")

    _op_view = _reshape
    _op_reshape = _reshape
    _op__unsafe_view = _reshape
    _op_flatten = _reshape
    _op_expand = _reshape

    def _op_slice(self, node, args, shape, dtype):
        x = self._arg(node.args[0])
        dim = args.get("dim", 0)
        size = x.shape[dim] if x.shape else 0
        start, end, step = args.get("start") or 0, args.get("end"), args.get("step", 1)
        if start == 0 and step == 1 and (end is None or end >= size):
            return x
        raise Unsupported("slicing with fixed bounds bakes sizes in; no template")

    def _op_select(self, node, args, shape, dtype):
        return self._view_of_operand(node, f"{args['index']}", f"select({args['dim']}, {args['index']})", shape)

    def _tuple_of_views(self, node, call_of, shapes) -> _Val:
        x = self._arg(node.args[0])
        if x.operand is None:
            raise Unsupported(f"aten.{_base(node)} of a computed value has no template")
        src = self.operands[x.operand]
        items = []
        for i, shape in enumerate(shapes):
            index = self._new_operand(f"{src.name}_{i}", f"{src.expr}.{call_of(i)}", src.dtype, shape,
                                      self.origin[x.operand])
            items.append(_Val(ir=Load(index), shape=shape, dtype=x.dtype, operand=index))
        return _Val(items=items)

    def _op_chunk(self, node, args, shape, dtype):
        shapes = [tuple(v.shape) for v in node.meta["val"]]
        chunks, dim = args["chunks"], args.get("dim", 0)
        return self._tuple_of_views(node, lambda i: f"chunk({chunks}, {dim})[{i}]", shapes)

    def _op_split(self, node, args, shape, dtype):
        shapes = [tuple(v.shape) for v in node.meta["val"]]
        size, dim = args.get("split_size"), args.get("dim", 0)
        x = self._arg(node.args[0])
        total = x.shape[dim]
        chunks = len(shapes)
        if not isinstance(size, int) or -(-total // chunks) != size:
            raise Unsupported("split into unequal or listed sizes bakes sizes in; no template")
        return self._tuple_of_views(node, lambda i: f"chunk({chunks}, {dim})[{i}]", shapes)

    def _op_unbind(self, node, args, shape, dtype):
        shapes = [tuple(v.shape) for v in node.meta["val"]]
        dim = args.get("dim", 0)
        return self._tuple_of_views(node, lambda i: f"select({dim}, {i})", shapes)

    # -- row reductions --------------------------------------------------------------------------

    def _row_form(self, shape: tuple, keepdim_only: bool = False) -> bool:
        """Is `shape` one value per row: the row space with the reduced dims 1 (keepdim) or removed?"""
        if self.span is None:
            return False
        lo, hi, space = self.span
        keep = space[:lo] + (1,) * (hi - lo) + space[hi:]
        if shape == keep:
            return True
        return not keepdim_only and shape == space[:lo] + space[hi:]

    def _span(self, x: _Val, dims, node) -> tuple[int, int]:
        """Normalise reduced dims, check they are contiguous and agree with earlier reductions."""
        rank = len(x.shape)
        if x.cls != "full":
            raise Unsupported("a reduction of an already reduced value has no template")
        if dims is None or (isinstance(dims, (list, tuple)) and len(dims) == 0):
            raise Unsupported(f"aten.{_base(node)} over every dim (a reduction to one value) has no template")
        if rank == 0:
            raise Unsupported("a reduction of a 0-d tensor")
        dims = sorted({d % rank for d in ([dims] if isinstance(dims, int) else dims)})
        lo, hi = dims[0], dims[-1] + 1
        if dims != list(range(lo, hi)):
            raise Unsupported(f"a reduction over non-adjacent dims {dims} has no template")
        if self.span is None:
            self.span = (lo, hi, x.shape)
            self.anchor = node.args[0].name
        elif (self.span[0], self.span[1]) != (lo, hi) or self.span[2] != x.shape:
            raise Unsupported("reductions over different dims or shapes in one forward have no template")
        if self.matmul is not None:
            raise Unsupported("a matmul followed by a row reduction has no template")
        return lo, hi

    def _reduce(self, kind: str, x: _Val, node, dims, shape, dtype) -> _Val:
        self._span(x, dims, node)
        return _Val(ir=Reduce(kind, x.ir), shape=shape, dtype=dtype, cls="row")

    def _mean_of(self, x: _Val, node, dims, shape, dtype) -> _Val:
        self._span(x, dims, node)
        return _Val(ir=Op("div", (Reduce("sum", x.ir), RowLen())), shape=shape, dtype=dtype, cls="row")

    def _op_sum(self, node, args, shape, dtype):
        return self._reduce("sum", self._arg(node.args[0]), node, args.get("dim"), shape, dtype)

    def _op_mean(self, node, args, shape, dtype):
        return self._mean_of(self._arg(node.args[0]), node, args.get("dim"), shape, dtype)

    def _op_amax(self, node, args, shape, dtype):
        return self._reduce("max", self._arg(node.args[0]), node, args.get("dim"), shape, dtype)

    def _op_amin(self, node, args, shape, dtype):
        return self._reduce("min", self._arg(node.args[0]), node, args.get("dim"), shape, dtype)

    def _max_min(self, kind: str, node, args):
        if "dim" not in args or args["dim"] is None:
            raise Unsupported(f"aten.{_base(node)} over every dim (a reduction to one value) has no template")
        shapes = [tuple(v.shape) for v in node.meta["val"]]
        values = self._reduce(kind, self._arg(node.args[0]), node, args["dim"], shapes[0], "float32")
        values.dtype = _dtype_name(node.meta["val"][0].dtype)
        indices = _Val(unusable=f"the indices of aten.{_base(node)} (an argmax) have no template")
        return _Val(items=[values, indices])

    def _op_max(self, node, args, shape, dtype):
        return self._max_min("max", node, args)

    def _op_min(self, node, args, shape, dtype):
        return self._max_min("min", node, args)

    def _variance(self, x: _Val, node, dims, correction, shape, dtype) -> Op:
        self._span(x, dims, node)
        mean = Op("div", (Reduce("sum", x.ir), RowLen()))
        centred = Op("sub", (x.ir, mean))
        total = Reduce("sum", Op("mul", (centred, centred)))
        count = RowLen() if not correction else Op("sub", (RowLen(), Const(correction)))
        return Op("div", (total, count))

    def _op_var(self, node, args, shape, dtype):
        correction = args.get("correction")
        correction = 1 if correction is None else correction
        ir = self._variance(self._arg(node.args[0]), node, args.get("dim"), correction, shape, dtype)
        return _Val(ir=ir, shape=shape, dtype=dtype, cls="row")

    def _op_std(self, node, args, shape, dtype):
        correction = args.get("correction")
        correction = 1 if correction is None else correction
        ir = self._variance(self._arg(node.args[0]), node, args.get("dim"), correction, shape, dtype)
        return _Val(ir=Op("sqrt", (ir,)), shape=shape, dtype=dtype, cls="row")

    def _op_logsumexp(self, node, args, shape, dtype):
        x = self._arg(node.args[0])
        self._span(x, args.get("dim"), node)
        m = Reduce("max", x.ir)
        s = Reduce("sum", Op("exp", (Op("sub", (x.ir, m)),)))
        return _Val(ir=Op("add", (Op("log", (s,)), m)), shape=shape, dtype=dtype, cls="row")

    def _op_linalg_vector_norm(self, node, args, shape, dtype):
        if args.get("ord", 2) != 2:
            raise Unsupported(f"no template for a vector norm of order {args.get('ord')}")
        x = self._arg(node.args[0])
        self._span(x, args.get("dim"), node)
        return _Val(ir=Op("sqrt", (Reduce("sum", Op("mul", (x.ir, x.ir))),)), shape=shape, dtype=dtype, cls="row")

    def _softmax_parts(self, x: _Val, node, dim):
        self._span(x, [dim], node)
        m = Reduce("max", x.ir)
        shifted = Op("sub", (x.ir, m))
        return shifted, Reduce("sum", Op("exp", (shifted,)))

    def _op_softmax(self, node, args, shape, dtype):
        shifted, s = self._softmax_parts(self._arg(node.args[0]), node, args["dim"])
        return _Val(ir=Op("div", (Op("exp", (shifted,)), s)), shape=shape, dtype=dtype)

    def _op_log_softmax(self, node, args, shape, dtype):
        shifted, s = self._softmax_parts(self._arg(node.args[0]), node, args["dim"])
        return _Val(ir=Op("sub", (shifted, Op("log", (s,)))), shape=shape, dtype=dtype)

    _op__softmax = _op_softmax
    _op__log_softmax = _op_log_softmax

    def _op_layer_norm(self, node, args, shape, dtype):
        x = self._arg(node.args[0])
        k = len(args["normalized_shape"])
        rank = len(x.shape)
        self._span(x, list(range(rank - k, rank)), node)
        mean = Op("div", (Reduce("sum", x.ir), RowLen()))
        centred = Op("sub", (x.ir, mean))
        var = Op("div", (Reduce("sum", Op("mul", (centred, centred))), RowLen()))
        y = Op("mul", (centred, Op("rsqrt", (Op("add", (var, Const(float(args.get("eps", 1e-5))))),)),))
        if args.get("weight") is not None:
            y = Op("mul", (y, self._arg(args["weight"]).ir))
        if args.get("bias") is not None:
            y = Op("add", (y, self._arg(args["bias"]).ir))
        return _Val(ir=y, shape=shape, dtype=dtype)

    def _op_rms_norm(self, node, args, shape, dtype):
        import torch

        x = self._arg(node.args[0])
        k = len(args["normalized_shape"])
        rank = len(x.shape)
        self._span(x, list(range(rank - k, rank)), node)
        eps = args.get("eps")
        if eps is None:  # torch's default: the input dtype's machine epsilon
            eps = torch.finfo(getattr(torch, x.dtype)).eps
        ms = Op("div", (Reduce("sum", Op("mul", (x.ir, x.ir))), RowLen()))
        y = Op("mul", (x.ir, Op("rsqrt", (Op("add", (ms, Const(float(eps)))),))))
        if args.get("weight") is not None:
            y = Op("mul", (y, self._arg(args["weight"]).ir))
        return _Val(ir=y, shape=shape, dtype=dtype)

    def _op_cross_entropy_loss(self, node, args, shape, dtype):
        if args.get("weight") is not None:
            raise Unsupported("cross_entropy with class weights has no template")
        if args.get("label_smoothing"):
            raise Unsupported("cross_entropy with label smoothing has no template")
        logits = self._arg(node.args[0])
        target_node = node.args[1]
        target = self.val(target_node)
        if target.operand is None or target.dtype not in ("int64", "int32"):
            raise Unsupported("cross_entropy against class probabilities (not integer targets) has no template")
        rank = len(logits.shape)
        class_dim = 0 if rank == 1 else 1
        self._span(logits, [class_dim], node)
        t_op = self.operands[target.operand]
        self.operands[target.operand] = Operand(t_op.name, t_op.expr, t_op.dtype, t_op.shape, per_row=True)
        t = Load(target.operand)
        m = Reduce("max", logits.ir)
        lse = Op("add", (Op("log", (Reduce("sum", Op("exp", (Op("sub", (logits.ir, m)),))),)), m))
        ignore = int(args.get("ignore_index", -100))
        valid = Op("ne", (t, Const(ignore)))
        loss = Op("where", (valid, Op("sub", (lse, Gather(logits.ir, t))), Const(0.0)))
        reduction = {0: None, 1: "mean", 2: "sum"}[int(args.get("reduction", 1))]
        self.finish, self.target, self.ignore_index = reduction, target.operand, ignore
        return _Val(ir=loss, shape=shape if reduction is None else (), dtype=dtype, cls="row")

    # -- matmul ----------------------------------------------------------------------------------

    def _factor(self, v: _Val, which: str) -> int:
        """The operand a matmul factor is read from (a cast on the way is done on load)."""
        ir = v.ir
        while isinstance(ir, Op) and ir.name == "cast":
            ir = ir.args[0]
        if not isinstance(ir, Load):
            raise Unsupported(f"the matmul's {which} is computed in forward (a prologue); no template")
        return ir.operand

    def _matmul(self, node, a: _Val, b_operand: int, b_rank: int, kind: str, shape, dtype) -> _Val:
        if self.matmul is not None:
            raise Unsupported("more than one matmul in forward has no template")
        if self.span is not None:
            raise Unsupported("a matmul mixed with a row reduction has no template")
        if len(a.shape) < 2 or b_rank < 2:
            raise Unsupported("a matrix-vector product (a 1-d factor) has no template")
        self.matmul = {
            "a": self._factor(a, "left factor"), "b": b_operand, "kind": kind, "dtype": a.dtype,
            "a_rank": len(a.shape), "b_rank": b_rank, "shape": shape, "node": node.name,
            "a_node": node.args[0].name if kind != "addmm" else node.args[1].name,
        }
        return _Val(ir=Acc(), shape=shape, dtype=dtype)

    def _op_linear(self, node, args, shape, dtype):
        x, w = self._arg(node.args[0]), self._arg(node.args[1])
        wi = self._factor(w, "weight")
        src = self.operands[wi]
        bt = self._new_operand(f"{src.name}_t", f"{src.expr}.t()", src.dtype, tuple(reversed(src.shape)),
                               self.origin[wi])
        out = self._matmul(node, x, bt, 2, "linear", shape, dtype)
        if args.get("bias") is not None:
            bias = self._arg(args["bias"])
            return _Val(ir=Op("add", (out.ir, bias.ir)), shape=shape, dtype=dtype)
        return out

    def _mm(self, node, kind, shape, dtype, a_arg, b_arg):
        a, b = self._arg(a_arg), self._arg(b_arg)
        if a.dtype != b.dtype:
            raise Unsupported(f"a matmul of {a.dtype} by {b.dtype} has no template")
        return self._matmul(node, a, self._factor(b, "right factor"), len(b.shape), kind, shape, dtype)

    def _op_mm(self, node, args, shape, dtype):
        return self._mm(node, "mm", shape, dtype, node.args[0], node.args[1])

    def _op_bmm(self, node, args, shape, dtype):
        return self._mm(node, "bmm", shape, dtype, node.args[0], node.args[1])

    def _op_matmul(self, node, args, shape, dtype):
        return self._mm(node, "matmul", shape, dtype, node.args[0], node.args[1])

    def _op_addmm(self, node, args, shape, dtype):
        out = self._mm(node, "addmm", shape, dtype, node.args[1], node.args[2])
        bias = self._arg(node.args[0])
        alpha, beta = args.get("alpha", 1), args.get("beta", 1)
        acc = out.ir if alpha == 1 else Op("mul", (out.ir, Const(alpha)))
        if beta == 0:
            return _Val(ir=acc, shape=shape, dtype=dtype)
        b = bias.ir if beta == 1 else Op("mul", (bias.ir, Const(beta)))
        return _Val(ir=Op("add", (acc, b)), shape=shape, dtype=dtype)


# ------------------------------------------------------------------------------------------------
# benchmark sizes


def _last_dims_contiguous(program: PointwiseProgram, reader: _GraphReader, model, inputs) -> bool:
    """Whether every operand's last dim is contiguous or broadcast at the benchmark sizes, i.e. whether the
    launcher will take the 1-D indexed pass (INDEXED=1) rather than keep the 2-D tiles (a transpose).

    The operands' expressions are evaluated on the meta tensors; True when they cannot be (the launcher
    decides at run time in any case).
    """
    if model is None or inputs is None:
        return True
    names = dict(zip(reader.user_inputs, inputs), self=model)
    try:
        views = [eval(op.expr, {"__builtins__": {}}, names) for op in program.operands]  # noqa: S307 - our own expressions
        return all(v.dim() == 0 or v.shape[-1] == 1 or v.stride(-1) in (0, 1) for v in views)
    except Exception:
        return True


def _problem(module, init_values, reader: _GraphReader, program: Program) -> tuple[Problem, tuple]:
    """Sizes of the benchmark inputs (get_inputs), traced on the meta device; small sizes if that fails."""
    import torch

    shapes: dict[str, tuple] = {}
    full_inputs: tuple = ()
    model = inputs = None
    try:
        with torch.device("meta"):
            model = module.Model(*init_values)
            inputs = list(module.get_inputs())
        exported = torch.export.export(model, tuple(inputs))
        shapes = {n.name: _shape(n) for n in exported.graph.nodes if n.op != "output"}
        full_inputs = tuple(tuple(x.shape) for x in inputs)
        out_node = next(n for n in exported.graph.nodes if n.op == "output").args[0][0]
        shapes["__out__"] = _shape(out_node)
    except Exception:  # a reference that cannot run on meta: tune for the traced small sizes instead
        shapes = {n.name: _shape(n) for n in reader.graph.nodes if n.op != "output"}
        out_node = next(n for n in reader.graph.nodes if n.op == "output").args[0][0]
        shapes["__out__"] = _shape(out_node)

    floats = [op.dtype for op in program.operands if op.dtype in ("float32", "float16", "bfloat16")]
    main_dtype = floats[0] if floats else "float32"
    if isinstance(program, PointwiseProgram):
        size = math.prod(shapes["__out__"])
        # the flat kernel runs when every operand is a whole tensor of the output's shape (no view, no broadcast)
        out_shape = reader.out_shape
        flat = all(op.shape == out_shape and "(" not in op.expr for op in program.operands)
        indexable = flat or _last_dims_contiguous(program, reader, model, inputs)
        return Problem("pointwise", main_dtype, numel=size, flat=flat, indexable=indexable), full_inputs
    if isinstance(program, RowProgram):
        space = shapes.get(reader.anchor) or reader.span[2]
        lo, hi = program.lo, program.hi
        outer, n, inner = math.prod(space[:lo]), math.prod(space[lo:hi]), math.prod(space[hi:])
        return Problem("rowwise", main_dtype, rows=outer * inner, row_len=n, inner=inner), full_inputs
    mm = reader.matmul
    out = shapes.get(mm["node"]) or mm["shape"]
    a_shape = shapes.get(mm["a_node"]) or program.operands[program.a].shape
    k = a_shape[-1]
    if program.batched:
        batch, m = math.prod(out[:-2]), out[-2]
    else:
        batch, m = 1, math.prod(out[:-1])
    return Problem("matmul", program.dot_dtype, m=m, n=out[-1], k=k, batch=batch), full_inputs
