"""The computation the recogniser found, in the form the emitters consume.

A program is an expression tree over *operands* (the tensors a kernel reads:
forward arguments, parameters, or views of them) plus the facts its family
needs: for a row program the reduced dims, for a matmul its two factors. Nodes
are frozen dataclasses, so equal subtrees compare and hash equal and the
emitters compute each of them once.

    from agent.proposers.heuristic.program import Load, Op, Const
    gelu_of_x = Op("gelu", (Load(0),))

Op names are kgen's own small vocabulary (see `expression.OPS`); casts are
`Op("cast", (x,), ("bfloat16",))`, rounding through the narrower type.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Union


class Unsupported(Exception):
    """The reference holds something no template computes; the message says what (one line)."""


@dataclass(frozen=True)
class Operand:
    """A tensor a kernel reads."""

    name: str                    # identifier in the generated code, e.g. "x", "linear_weight"
    expr: str                    # how ModelNew.forward obtains it: "x", "self.linear.weight", "x.chunk(2, -1)[0]"
    dtype: str                   # torch dtype name of the stored tensor, e.g. "float32"
    shape: tuple[int, ...]       # as traced with the task's small inputs (documentation and checks only)
    per_row: bool = False        # row programs: one value per row (cross-entropy targets), loaded once per row


@dataclass(frozen=True)
class Load:
    """An operand's value at the element being computed."""

    operand: int


@dataclass(frozen=True)
class Const:
    """A Python scalar from the reference (eps, a scale, a clamp bound)."""

    value: Union[float, int, bool]


@dataclass(frozen=True)
class Acc:
    """The matmul accumulator (fp32) at the element being computed."""


@dataclass(frozen=True)
class RowLen:
    """Number of reduced elements per row (read at run time)."""


@dataclass(frozen=True)
class Op:
    """A pointwise operation; attr holds its scalar settings (clamp bounds, exponent, target dtype)."""

    name: str
    args: tuple
    attr: tuple = ()


@dataclass(frozen=True)
class Reduce:
    """A reduction of a full-row expression over the reduced dims: "sum", "max" or "min"."""

    kind: str
    arg: object


@dataclass(frozen=True)
class Gather:
    """`value` taken at reduced index `index` of each row (cross-entropy's logit of the target class)."""

    value: object
    index: object


Node = Union[Load, Const, Acc, RowLen, Op, Reduce, Gather]


def children(node: Node) -> tuple:
    """The nodes a node reads."""
    if isinstance(node, Op):
        return tuple(node.args)
    if isinstance(node, Reduce):
        return (node.arg,)
    if isinstance(node, Gather):
        return (node.value, node.index)
    return ()


def walk(node: Node):
    """Every node of a tree once, children before parents."""
    seen: set = set()
    order: list = []

    def visit(n):
        if n in seen:
            return
        seen.add(n)
        for c in children(n):
            visit(c)
        order.append(n)

    visit(node)
    return order


def loads(node: Node) -> list[int]:
    """Operand indexes a tree reads, in first-read order."""
    return list(dict.fromkeys(n.operand for n in walk(node) if isinstance(n, Load)))


def remap(node: Node, mapping: dict[int, int]) -> Node:
    """The same tree with operand indexes renumbered."""
    if isinstance(node, Load):
        return Load(mapping[node.operand])
    if isinstance(node, Op):
        return Op(node.name, tuple(remap(a, mapping) for a in node.args), node.attr)
    if isinstance(node, Reduce):
        return Reduce(node.kind, remap(node.arg, mapping))
    if isinstance(node, Gather):
        return Gather(remap(node.value, mapping), remap(node.index, mapping))
    return node


@dataclass
class PointwiseProgram:
    """out = f(operands), elementwise over the operands' broadcast shape."""

    operands: list[Operand]
    out: Node
    out_dtype: str               # the reference output's dtype
    rank: int                    # rank of the output (fixed by the task; sizes are read at run time)

    family = "pointwise"


@dataclass
class RowProgram:
    """Reductions over dims [lo, hi) of a row space, and pointwise work around them.

    The row space is the broadcast shape of the full operands, seen at run time
    as (outer, n, inner): outer = the dims before lo, n = the reduced dims,
    inner = the dims after hi (1 when the reduced dims are the last ones).
    """

    operands: list[Operand]
    out: Node
    out_dtype: str
    rank: int                    # rank of the row space
    lo: int                      # first reduced dim (non-negative)
    hi: int                      # one past the last reduced dim
    out_per_row: bool            # the output has one value per row (sum, max, ...) rather than one per element
    keepdim: bool                # per-row output keeps the reduced dims as size 1
    finish: str | None = None    # "mean" or "sum": reduce the per-row values to one 0-d result (cross-entropy)
    target: int | None = None    # operand holding the targets, for finish="mean" (rows whose target is ignored)
    ignore_index: int = -100

    family = "rowwise"

    @property
    def last_dims(self) -> bool:
        """True when the reduced dims are the trailing ones: rows are contiguous runs."""
        return self.hi == self.rank


@dataclass
class MatmulProgram:
    """out = epilogue(A @ B), A (..., M, K) and B (..., K, N) given as operand views."""

    operands: list[Operand]
    a: int                       # operand index of A
    b: int                       # operand index of B (for nn.Linear: weight.t(), a view)
    out: Node                    # epilogue over Acc(); Acc() alone when there is none
    out_dtype: str
    dot_dtype: str               # dtype the products are taken in ("float32" -> exact IEEE products)
    a_rank: int
    b_rank: int
    ops: list[str] = field(default_factory=list)   # what the matmul came from, e.g. ["linear"]

    family = "matmul"

    @property
    def batched(self) -> bool:
        return self.b_rank > 2


Program = Union[PointwiseProgram, RowProgram, MatmulProgram]
