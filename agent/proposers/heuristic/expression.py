"""Turns a program's expression tree into Triton statements, one variable per distinct node.

Every float value is computed in fp32 whatever the operands' dtype (bf16 and
fp16 inputs are widened on load), and narrowed once, on store. A cast in the
reference to a narrower float type is kept as a round trip through that type,
so the rounding the reference does in the middle of a chain happens here too.

    w = ExprWriter(load=lambda i: f"tl.load(p{i} + offs, mask=mask, other=0.0)", operands=ops)
    name = w.value(tree)        # w.lines now holds the statements computing `name`

Families plug in what differs: how an operand is loaded at the current
element (`load`), how a row reduction or a gather is computed (`reduce`,
`gather`), and an enclosing writer (`parent`) that owns the values that are
constant along a row, so a looped row kernel computes them once, outside its loops.
"""

from __future__ import annotations

import math
from typing import Callable

from agent.proposers.heuristic.program import Acc, Const, Gather, Load, Node, Op, Operand, Reduce, RowLen

FLOAT_DTYPES = {"float32", "float16", "bfloat16", "float64"}

# Every op the emitters can write, with its arity; the recogniser maps aten ops onto these.
OPS = {
    "add": 2, "sub": 2, "mul": 2, "div": 2, "maximum": 2, "minimum": 2,
    "gt": 2, "ge": 2, "lt": 2, "le": 2, "eq": 2, "ne": 2, "and": 2, "or": 2,
    "neg": 1, "exp": 1, "log": 1, "sqrt": 1, "rsqrt": 1, "abs": 1, "reciprocal": 1, "erf": 1,
    "sin": 1, "cos": 1, "sigmoid": 1, "tanh": 1, "relu": 1, "gelu": 1, "gelu_tanh": 1, "silu": 1,
    "not": 1, "clamp": 1, "pow": 1, "rpow": 1, "cast": 1, "leaky_relu": 1, "elu": 1, "softplus": 1,
    "hardsigmoid": 1, "hardswish": 1, "mish": 1,
    "where": 3,
}
COMPARISONS = {"gt": ">", "ge": ">=", "lt": "<", "le": "<=", "eq": "==", "ne": "!="}
BOOL_OPS = set(COMPARISONS) | {"and", "or", "not"}


def literal(value) -> str:
    """A Python scalar as Triton source: 2 -> '2', 0.5 -> '0.5', inf -> 'float("inf")'."""
    if isinstance(value, bool):
        return "True" if value else "False"
    if isinstance(value, int):
        return str(value)
    value = float(value)
    if math.isnan(value):
        return 'float("nan")'
    if math.isinf(value):
        return 'float("inf")' if value > 0 else '-float("inf")'
    text = repr(value)
    return text if any(c in text for c in ".en") else text + ".0"


def kind_of(node: Node, operands: list[Operand]) -> str:
    """'f' (computed in fp32), 'b' (bool) or 'i' (integer) for a node."""
    if isinstance(node, Load):
        dtype = operands[node.operand].dtype
        if dtype == "bool":
            return "b"
        return "f" if dtype in FLOAT_DTYPES else "i"
    if isinstance(node, Const):
        if isinstance(node.value, bool):
            return "b"
        return "i" if isinstance(node.value, int) else "f"
    if isinstance(node, Op):
        if node.name in BOOL_OPS:
            return "b"
        if node.name == "where":
            kinds = {kind_of(a, operands) for a in node.args[1:]}
            return "f" if "f" in kinds else kinds.pop()
        return "f"
    if isinstance(node, RowLen):
        return "i"
    return "f"


# Rounds fp32 to the nearest bf16 (ties to even), keeping fp32. Written out because Triton's interpreter
# truncates when it converts fp32 to bf16 (fp_downcast_rounding="rtne" included), which leaves results a
# bf16 ulp or two from torch's; on the GPU it gives what the hardware conversion gives.
ROUND_BF16_SOURCE = """@triton.jit
def round_to_bf16(x):
    \"\"\"fp32 -> the nearest bf16 value (ties to even), still fp32: exact under the interpreter too.\"\"\"
    bits = x.to(tl.uint32, bitcast=True)
    bits = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16) << 16
    return bits.to(tl.float32, bitcast=True)
"""


def narrow(x: str, dtype: str) -> str:
    """x rounded to a narrower float dtype as torch rounds (to nearest), still an fp32 value."""
    if dtype == "bfloat16":
        return f"round_to_bf16({x})"
    if dtype == "float16":
        return f"{x}.to(tl.float16).to(tl.float32)"
    return x


def store_value(x: str, dtype: str) -> str:
    """x converted for a store into a tensor of `dtype`."""
    if dtype == "bfloat16":
        return f"round_to_bf16({x}).to(tl.bfloat16)"   # exact: the value is already a bf16 one
    if dtype == "float16":
        return f"{x}.to(tl.float16)"
    return x


def helpers_for(kernel_text: str) -> str:
    """The jit helpers a kernel text calls, as source to put before it."""
    return ROUND_BF16_SOURCE + "\n\n" if "round_to_bf16(" in kernel_text else ""


def pow_text(x: str, p: float) -> str:
    """x ** p for a scalar exponent: products for small integers, exp2/log2 otherwise."""
    if p == int(p) and 0 <= p <= 8:
        p = int(p)
        return "1.0" if p == 0 else " * ".join([x] * p)
    if p == int(p) and -8 <= p < 0:
        return f"1.0 / ({' * '.join([x] * int(-p))})"
    if p == 0.5:
        return f"tl.sqrt({x})"
    if p == -0.5:
        return f"tl.rsqrt({x})"
    # x ** p = 2 ** (p * log2 x): NaN for x < 0, as torch gives for a non-integer exponent
    return f"tl.exp2({literal(p)} * tl.log2({x}))"


def tanh_text(x: str) -> str:
    # tl has no tanh and the interpreter cannot run libdevice; 1 - 2/(e^2x + 1) saturates to +-1 cleanly
    return f"(1.0 - 2.0 / (tl.exp(2.0 * {x}) + 1.0))"


def op_text(name: str, a: list[str], attr: tuple) -> str:
    """The Triton expression for one op applied to already-named values."""
    if name in COMPARISONS:
        return f"{a[0]} {COMPARISONS[name]} {a[1]}"
    simple = {
        "add": "{0} + {1}", "sub": "{0} - {1}", "mul": "{0} * {1}", "div": "{0} / {1}",
        "maximum": "tl.maximum({0}, {1})", "minimum": "tl.minimum({0}, {1})",
        "and": "{0} & {1}", "or": "{0} | {1}", "not": "{0} == 0",
        "neg": "-{0}", "exp": "tl.exp({0})", "log": "tl.log({0})", "sqrt": "tl.sqrt({0})",
        "rsqrt": "tl.rsqrt({0})", "abs": "tl.abs({0})", "reciprocal": "1.0 / {0}", "erf": "tl.erf({0})",
        "sin": "tl.sin({0})", "cos": "tl.cos({0})", "sigmoid": "tl.sigmoid({0})",
        "relu": "tl.maximum({0}, 0.0)", "silu": "{0} * tl.sigmoid({0})",
        "gelu": "0.5 * {0} * (1.0 + tl.erf({0} * 0.7071067811865476))",
        "hardsigmoid": "tl.minimum(tl.maximum({0} / 6.0 + 0.5, 0.0), 1.0)",
        "hardswish": "{0} * tl.minimum(tl.maximum({0} / 6.0 + 0.5, 0.0), 1.0)",
        "where": "tl.where({0}, {1}, {2})",
    }
    if name in simple:
        return simple[name].format(*a)
    x = a[0]
    if name == "tanh":
        return tanh_text(x)
    if name == "gelu_tanh":
        # 0.5 x (1 + tanh(u)) with 1 + tanh(u) = 2 - 2 / (e^2u + 1), u = sqrt(2/pi) (x + 0.044715 x^3)
        return f"0.5 * {x} * (2.0 - 2.0 / (tl.exp(1.5957691216057308 * ({x} + 0.044715 * {x} * {x} * {x})) + 1.0))"
    if name == "clamp":
        lo, hi = attr
        out = x
        if lo is not None:
            out = f"tl.maximum({out}, {literal(lo)})"
        if hi is not None:
            out = f"tl.minimum({out}, {literal(hi)})"
        return out
    if name == "pow":
        return pow_text(x, float(attr[0]))
    if name == "rpow":
        return f"tl.exp2({x} * {literal(math.log2(float(attr[0])))})"
    if name == "cast":
        return narrow(x, attr[0])
    if name == "leaky_relu":
        return f"tl.where({x} > 0.0, {x}, {x} * {literal(attr[0])})"
    if name == "elu":
        return f"tl.where({x} > 0.0, {x}, {literal(attr[0])} * (tl.exp({x}) - 1.0))"
    if name == "softplus":
        beta, threshold = attr
        return (f"tl.where({x} * {literal(beta)} > {literal(threshold)}, {x}, "
                f"tl.log(1.0 + tl.exp({x} * {literal(beta)})) / {literal(beta)})")
    if name == "mish":
        return f"{x} * {tanh_text(f'tl.log(1.0 + tl.exp({x}))')}"
    raise ValueError(f"no Triton text for op {name!r}")


class ExprWriter:
    """Writes the statements computing expression nodes into `lines`, each distinct node once."""

    def __init__(
        self,
        operands: list[Operand],
        load: Callable[[int], str],
        *,
        indent: str = "    ",
        prefix: str = "v",
        parent: "ExprWriter | None" = None,
        reduce: Callable[[Reduce], str] | None = None,
        gather: Callable[[Gather], str] | None = None,
        acc: str = "acc",
        row_len: str = "n",
    ) -> None:
        self.operands = operands
        self.load = load
        self.indent = indent
        self.prefix = prefix
        self.parent = parent
        self.reduce = reduce
        self.gather = gather
        self.acc = acc
        self.row_len = row_len
        self.lines: list[str] = []
        self.names: dict[Node, str] = {}
        self._count = 0
        self._row_class: dict[Node, bool] = {}

    def is_row_class(self, node: Node) -> bool:
        """True when a node has one value per row (no full-row operand below it outside a reduction)."""
        if node in self._row_class:
            return self._row_class[node]
        if isinstance(node, Load):
            result = self.operands[node.operand].per_row
        elif isinstance(node, (Const, RowLen, Reduce, Gather)):
            result = True
        elif isinstance(node, Acc):
            result = False
        else:
            result = all(self.is_row_class(a) for a in node.args)
        self._row_class[node] = result
        return result

    def _fresh(self) -> str:
        self._count += 1
        return f"{self.prefix}{self._count}"

    def emit(self, text: str) -> None:
        self.lines.append(self.indent + text)

    def value(self, node: Node) -> str:
        """The name (or literal) holding a node's value, writing its statements first if needed."""
        if isinstance(node, Const):
            return literal(node.value)
        if isinstance(node, RowLen):
            return self.row_len
        if isinstance(node, Acc):
            return self.acc
        if node in self.names:
            return self.names[node]
        if self.parent is not None and self.is_row_class(node):
            return self.parent.value(node)
        if isinstance(node, Load):
            text = self.load(node.operand)
            if kind_of(node, self.operands) == "f":
                text += ".to(tl.float32)"
        elif isinstance(node, Reduce):
            if self.reduce is None:
                raise ValueError("a row reduction outside a row program")
            text = self.reduce(node)
        elif isinstance(node, Gather):
            if self.gather is None:
                raise ValueError("a gather outside a row program")
            text = self.gather(node)
            if text.isidentifier():   # the gathered value already has a name
                self.names[node] = text
                return text
        elif isinstance(node, Op):
            args = [self._operand_text(a, node, i) for i, a in enumerate(node.args)]
            text = op_text(node.name, args, node.attr)
            if args and text == args[0]:   # an identity (a cast to fp32): no new variable
                self.names[node] = text
                return text
        else:
            raise ValueError(f"unknown node {node!r}")
        name = self._fresh()
        self.emit(f"{name} = {text}")
        self.names[node] = name
        return name

    def _operand_text(self, arg: Node, op: Op, position: int) -> str:
        """An op's argument, widened to fp32 when a float op reads an integer or bool value."""
        name = self.value(arg)
        if op.name in BOOL_OPS or (op.name == "where" and position == 0):
            return name
        if kind_of(arg, self.operands) != "f" and not isinstance(arg, (Const, RowLen)):
            return f"{name}.to(tl.float32)"
        return name
