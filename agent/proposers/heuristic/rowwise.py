"""Emits the Triton source for a row program: reductions over some dims, pointwise work around them.

The launcher views every operand as (outer, n, inner) around the reduced dims
(a view when the layout allows, a copy otherwise) and picks, at run time:
- one pass: the whole row (n rounded up to a power of two) sits in registers; short rows are packed
  ROWS to a program;
- looped: rows too long for that are walked in BLOCK_N steps, one pass per reduction and one to write,
  with softmax's max and sum of exponentials fused into one online pass (running max, rescaled sum, kept
  per lane and combined once after the loop).
When the reduced dims are the last ones each program takes ROWS whole rows; otherwise (a reduction over
a middle dim) each takes ROWS neighbouring positions of the trailing dims, so its loads stay contiguous.
A cross-entropy mean adds a one-program kernel that sums the per-row losses and divides by the count of
rows whose target is not ignore_index.

Loop trip counts are constexprs (NUM_STEPS): Triton 3.6's interpreter cannot run a loop whose bound is
a run-time scalar under numpy >= 2.4; on the GPU this costs one compile per distinct row length.

    source = emit(recognition, RowConfig(), note="...")
"""

from __future__ import annotations

from agent.proposers.heuristic.configs import RowConfig, describe
from agent.proposers.heuristic.expression import ExprWriter, helpers_for, kind_of, store_value
from agent.proposers.heuristic.modelnew import header, identifier, model_class
from agent.proposers.heuristic.program import Gather, Load, Op, Reduce, RowProgram, walk

NEG_INF = '-float("inf")'
POS_INF = 'float("inf")'


class _RowKernel:
    """Writes one row kernel (one-pass or looped) for a row program."""

    def __init__(self, k: str, prog: RowProgram, looped: bool) -> None:
        self.k = k
        self.prog = prog
        self.is_looped = looped
        self.columns = not prog.last_dims     # reduced dims in the middle: programs span inner positions
        self.lines: list[str] = []
        self._pass = 0

    # -- pieces ----------------------------------------------------------------------------------

    def _other(self, i: int) -> str:
        return "0.0" if kind_of(Load(i), self.prog.operands) == "f" else "0"

    def _full_load(self, i: int, cols: str = "cols", mask: str = "col_mask") -> str:
        name = self.prog.operands[i].name
        return f"tl.load({name}_ptr + {name}_row + {cols} * {name}_sn, mask={mask}, other={self._other(i)})"

    def _row_load(self, i: int) -> str:
        name = self.prog.operands[i].name
        return f"tl.load({name}_ptr + {name}_row)"

    def _signature(self) -> list[str]:
        prog, k = self.prog, self.k
        kind = "looped" if self.is_looped else "one_pass"
        out_layout = "(outer, inner)" if prog.out_per_row else "(outer, n, inner)"
        if not self.columns:
            out_layout = "(outer,)" if prog.out_per_row else "(outer, n)"
        lines = ["@triton.jit", f"def {k}_{kind}_kernel(", f"    out_ptr,  # output, {out_layout}, contiguous"]
        for op in prog.operands:
            if op.per_row:
                strides = f"{op.name}_so, {op.name}_si" if self.columns else f"{op.name}_so"
                lines.append(f"    {op.name}_ptr, {strides},  # {op.expr}: one value per row; its strides")
            else:
                strides = f"{op.name}_so, {op.name}_sn" + (f", {op.name}_si" if self.columns else "")
                dims = "(outer, reduced, inner)" if self.columns else "(rows, reduced)"
                lines.append(f"    {op.name}_ptr, {strides},  # {op.expr}; its strides over {dims}")
        lines.append("    outer,  # size of the dims before the reduced ones" if self.columns else "    outer,  # number of rows")
        if self.columns:
            lines.append("    inner,  # size of the dims after the reduced ones")
        lines.append("    n,  # reduced elements per row")
        lines.append("    ROWS: tl.constexpr,  # rows per program" if not self.columns
                     else "    ROWS: tl.constexpr,  # inner positions per program (contiguous in memory)")
        if self.is_looped:
            lines.append("    BLOCK_N: tl.constexpr,  # reduced elements per step")
            lines.append("    NUM_STEPS: tl.constexpr,  # cdiv(n, BLOCK_N)")
        else:
            lines.append("    BLOCK_N: tl.constexpr,  # power of two >= n: the whole row in registers")
        lines.append("):")
        return lines

    def _preamble(self) -> list[str]:
        lines = []
        if self.columns:
            lines += [
                "    o = tl.program_id(0).to(tl.int64)  # index over the dims before the reduced ones",
                "    i = tl.program_id(1) * ROWS + tl.arange(0, ROWS)[:, None]  # positions in the dims after them",
                "    row_mask = i < inner",
                "    # positions past the end re-read the last one (their stores are masked): nothing computes on fills",
                "    i = tl.minimum(i, inner - 1).to(tl.int64)",
            ]
            for op in self.prog.operands:
                lines.append(f"    {op.name}_row = o * {op.name}_so + i * {op.name}_si")
        else:
            lines += [
                "    o = tl.program_id(0) * ROWS + tl.arange(0, ROWS)[:, None]  # [ROWS, 1] row indexes",
                "    row_mask = o < outer",
                "    # rows past the end re-read the last row (their stores are masked): nothing computes on fills",
                "    o = tl.minimum(o, outer - 1).to(tl.int64)",
            ]
            for op in self.prog.operands:
                lines.append(f"    {op.name}_row = o * {op.name}_so")
        return lines

    def _out_offset(self, per_row: bool) -> str:
        if self.columns:
            return "o * inner + i" if per_row else "(o * n + cols) * inner + i"
        return "o" if per_row else "o * n + cols"

    def _store(self, writer: ExprWriter, value: str, per_row: bool) -> None:
        mask = "row_mask" if per_row else "mask"
        if self.prog.finish is None:
            value = store_value(value, self.prog.out_dtype)   # a finished program stores fp32 per-row values
        writer.emit(f"tl.store(out_ptr + {self._out_offset(per_row)}, {value}, mask={mask})")

    def _gather(self, parent: ExprWriter):
        """The callback computing a Gather: the value re-read at each row's index."""
        def gather(node: Gather) -> str:
            idx = parent.value(node.index)
            self._pass += 1
            gmask = f"gmask{self._pass}"
            parent.emit(f"{gmask} = ({idx} >= 0) & ({idx} < n)  # an ignored target (e.g. -100) reads nothing")
            child = ExprWriter(
                self.prog.operands, parent=parent, prefix=f"g{self._pass}_",
                load=lambda i: self._full_load(i, cols=idx, mask=gmask),
            )
            child.lines = parent.lines   # same scope: statements land in place
            return child.value(node.value)
        return gather

    # -- one pass --------------------------------------------------------------------------------

    def one_pass(self) -> list[str]:
        lines = self._signature() + self._preamble()
        lines += ["    cols = tl.arange(0, BLOCK_N)[None, :]", "    col_mask = cols < n", "    mask = row_mask & col_mask"]
        ops = self.prog.operands

        def load(i: int) -> str:
            return self._row_load(i) if ops[i].per_row else self._full_load(i)

        writer = ExprWriter(ops, load=load)

        def reduce(node: Reduce) -> str:
            arg = writer.value(node.arg)
            fill = {"sum": "0.0", "max": NEG_INF, "min": POS_INF}[node.kind]
            return f"tl.{node.kind}(tl.where(col_mask, {arg}, {fill}), axis=1)[:, None]"

        writer.reduce = reduce
        writer.gather = self._gather(writer)
        result = writer.value(self.prog.out)
        self._store(writer, result, self.prog.out_per_row)
        return lines + writer.lines

    # -- looped ----------------------------------------------------------------------------------

    def _step_header(self, writer: ExprWriter, stores: bool = False) -> None:
        writer.emit("for step in range(NUM_STEPS):")
        writer.emit("    cols = step * BLOCK_N + tl.arange(0, BLOCK_N)[None, :]")
        writer.emit("    col_mask = cols < n")
        if stores:
            writer.emit("    mask = row_mask & col_mask")

    def _body(self, main: ExprWriter) -> ExprWriter:
        self._pass += 1
        return ExprWriter(self.prog.operands, parent=main, prefix=f"p{self._pass}_", indent="        ",
                          load=lambda i: self._full_load(i))

    def looped(self) -> list[str]:
        lines = self._signature() + self._preamble()
        ops = self.prog.operands

        def top_load(i: int) -> str:
            if not ops[i].per_row:
                raise ValueError("a full-row operand read outside the row loop")
            return self._row_load(i)

        def no_reduce(node: Reduce) -> str:
            raise ValueError("a reduction used before its pass")

        main = ExprWriter(ops, load=top_load, reduce=no_reduce)
        main.gather = self._gather(main)
        reductions = [n for n in walk(self.prog.out) if isinstance(n, Reduce)]
        done: set = set()
        for red in reductions:
            if red in done:
                continue
            partner = _online_partner(red, reductions)
            if partner is not None:
                self._online_pass(main, red, partner)
                done.update((red, partner))
            else:
                self._reduce_pass(main, red)
                done.add(red)
        if self.prog.out_per_row:
            self._store(main, main.value(self.prog.out), per_row=True)
        else:
            body = self._body(main)
            result = body.value(self.prog.out)   # row-wide values land in main.lines first, before the loop
            self._store(body, result, per_row=False)
            main.emit("# last pass: compute and write the row")
            self._step_header(main, stores=True)
            main.lines += body.lines
        return lines + main.lines

    def _reduce_pass(self, main: ExprWriter, red: Reduce) -> None:
        body = self._body(main)
        arg = body.value(red.arg)
        acc = f"acc{self._pass}"
        fill = {"sum": "0.0", "max": NEG_INF, "min": POS_INF}[red.kind]
        main.emit(f"# pass {self._pass}: {red.kind} over the row")
        main.emit(f"{acc} = tl.full([ROWS, BLOCK_N], {fill}, tl.float32)")
        self._step_header(main)
        main.lines += body.lines
        if red.kind == "sum":
            main.emit(f"    {acc} += tl.where(col_mask, {arg}, 0.0)")
        else:
            main.emit(f"    {acc} = tl.{red.kind}imum({acc}, tl.where(col_mask, {arg}, {fill}))")
        name = f"r{self._pass}"
        main.emit(f"{name} = tl.{red.kind}({acc}, axis=1)[:, None]")
        main.names[red] = name

    def _online_pass(self, main: ExprWriter, red_max: Reduce, red_sum: Reduce) -> None:
        body = self._body(main)
        e = body.value(red_max.arg)
        m, s = f"m{self._pass}", f"s{self._pass}"
        # NOTE: a running max and sum per row, reduced across warps at every step, was 15% slower on the
        # H200 for log_softmax (0.867 against 0.736 ms) and 7% for cross_entropy: each step waited on the
        # reduction before its loads could issue
        main.emit(f"# pass {self._pass}: running max and rescaled sum of exponentials (online softmax), one of each")
        main.emit("# per lane, so that no step waits on a reduction across warps; the lanes are combined after the loop")
        main.emit(f"{m}_lane = tl.full([ROWS, BLOCK_N], {NEG_INF}, tl.float32)")
        main.emit(f"{s}_lane = tl.zeros([ROWS, BLOCK_N], dtype=tl.float32)")
        self._step_header(main)
        main.lines += body.lines
        main.emit(f"    e = tl.where(col_mask, {e}, {NEG_INF})")
        main.emit(f"    m_new = tl.maximum({m}_lane, e)")
        main.emit(f"    ref = tl.where(m_new == {NEG_INF}, 0.0, m_new)  # a lane that has seen nothing keeps a zero sum")
        main.emit(f"    {s}_lane = {s}_lane * tl.exp({m}_lane - ref) + tl.exp(e - ref)")
        main.emit(f"    {m}_lane = m_new")
        main.emit(f"{m} = tl.max({m}_lane, axis=1)[:, None]")
        main.emit(f"ref = tl.where({m} == {NEG_INF}, 0.0, {m})")
        main.emit(f"{s} = tl.sum({s}_lane * tl.exp({m}_lane - ref), axis=1)[:, None]")
        main.names[red_max] = m
        main.names[red_sum] = s


def _online_partner(red: Reduce, reductions: list) -> Reduce | None:
    """For max(E), the sum(exp(E - max(E))) among the reductions, if there is one."""
    if red.kind != "max":
        return None
    want = Reduce("sum", Op("exp", (Op("sub", (red.arg, red)),)))
    return want if want in reductions else None


def _finish_kernel(k: str, prog: RowProgram) -> list[str]:
    ignore = prog.ignore_index
    return [
        "@triton.jit",
        f"def {k}_finish_kernel(",
        "    out_ptr,  # the 0-d result",
        "    loss_ptr,  # one value per row, contiguous, float32",
        "    target_ptr,  # one target per row, contiguous",
        "    rows,  # number of rows",
        f"    MEAN: tl.constexpr,  # divide by the number of rows whose target is not {ignore}",
        "    BLOCK: tl.constexpr,  # rows per step",
        "    NUM_STEPS: tl.constexpr,  # cdiv(rows, BLOCK)",
        "):",
        "    total = tl.zeros([BLOCK], dtype=tl.float32)",
        "    count = tl.zeros([BLOCK], dtype=tl.float32)",
        "    for step in range(NUM_STEPS):",
        "        offs = step * BLOCK + tl.arange(0, BLOCK)",
        "        mask = offs < rows",
        "        total += tl.load(loss_ptr + offs, mask=mask, other=0.0)",
        f"        t = tl.load(target_ptr + offs, mask=mask, other={ignore})",
        f"        count += tl.where(t != {ignore}, 1.0, 0.0)",
        "    result = tl.sum(total, axis=0)",
        "    if MEAN:",
        "        result = result / tl.sum(count, axis=0)",
        f"    tl.store(out_ptr, {store_value('result', prog.out_dtype)})",
    ]


def _launcher(k: str, prog: RowProgram, config: RowConfig) -> list[str]:
    ops = prog.operands
    names = [op.name for op in ops]
    full = [op.name for op in ops if not op.per_row]
    lo, hi = prog.lo, prog.hi
    columns = not prog.last_dims
    lines = [
        f"ONE_PASS_MAX = {config.ONE_PASS_MAX}  # longest row (power of two) held whole in registers",
        f"LOOP_BLOCK = {config.LOOP_BLOCK}  # elements per step along longer rows",
        f"TILE = {config.TILE}  # elements per program: short rows are packed several to a program",
        f"NUM_WARPS = {config.num_warps}",
        "",
        "",
        f"def {k}_rowwise({', '.join(names)}):",
        f'    """Reduce over dims [{lo}, {hi}) of the rank-{prog.rank} row space; returns a new tensor."""',
    ]
    if len(full) > 1:
        lines.append(f"    shape = torch.broadcast_shapes({', '.join(n + '.shape' for n in full)})")
    else:
        lines.append(f"    shape = {full[0]}.shape")
    lines += [
        f"    outer, n, inner = math.prod(shape[:{lo}]), math.prod(shape[{lo}:{hi}]), math.prod(shape[{hi}:])",
    ]
    if prog.out_per_row:
        mid = f" + (1,) * {hi - lo}" if prog.keepdim else ""
        lines.append(f"    out_shape = tuple(shape[:{lo}]){mid} + tuple(shape[{hi}:])")
    args = []
    for op in ops:
        if op.per_row:
            lines.append(f"    {op.name}3 = {op.name}.reshape(outer, 1, inner)  # one value per row")
            args.append(f"{op.name}3, {op.name}3.stride(0)" + (f", {op.name}3.stride(2)" if columns else ""))
        else:
            expand = ".expand(shape)" if len(full) > 1 else ""
            lines.append(f"    {op.name}3 = {op.name}{expand}.reshape(outer, n, inner)  # a view unless the layout forbids")
            args.append(f"{op.name}3, {op.name}3.stride(0), {op.name}3.stride(1)" + (f", {op.name}3.stride(2)" if columns else ""))
    device = f"{names[0]}.device"
    finish = prog.finish is not None
    if prog.out_per_row:
        dtype = "torch.float32" if finish else f"torch.{prog.out_dtype}"
        lines.append(f"    out = torch.empty((outer, inner), device={device}, dtype={dtype})")
    else:
        lines.append(f"    out = torch.empty((outer, n, inner), device={device}, dtype=torch.{prog.out_dtype})")
    sizes = "outer, inner, n" if columns else "outer, n"

    def launch(kernel: str, grid: str, indent: str, constexprs: str) -> list[str]:
        pad = indent + "    "
        return [f"{indent}{k}_{kernel}_kernel[{grid}](", f"{pad}out,", *[f"{pad}{a}," for a in args],
                f"{pad}{sizes},", f"{pad}{constexprs}, num_warps=NUM_WARPS,", f"{indent})"]

    lines.append("    if outer * inner > 0 and n > 0:")
    if columns:
        lines += [
            "        # strided rows: ROWS neighbouring inner positions per program, the reduced dim in steps",
            "        rows = min(triton.next_power_of_2(inner), 64)",
            "        step = min(triton.next_power_of_2(n), max(1, TILE // rows))",
            "        grid = (outer, triton.cdiv(inner, rows))",
            "        if step >= n:",
            *launch("one_pass", "grid", "            ", "ROWS=rows, BLOCK_N=step"),
            "        else:",
            *launch("looped", "grid", "            ", "ROWS=rows, BLOCK_N=step, NUM_STEPS=triton.cdiv(n, step)"),
        ]
    else:
        lines += [
            "        block_n = triton.next_power_of_2(n)",
            "        if block_n <= ONE_PASS_MAX:",
            "            rows = max(1, min(TILE // block_n, triton.next_power_of_2(outer)))",
            *launch("one_pass", "(triton.cdiv(outer, rows),)", "            ", "ROWS=rows, BLOCK_N=block_n"),
            "        else:",
            "            rows = max(1, min(TILE // LOOP_BLOCK, triton.next_power_of_2(outer)))",
            *launch("looped", "(triton.cdiv(outer, rows),)", "            ",
                    "ROWS=rows, BLOCK_N=LOOP_BLOCK, NUM_STEPS=triton.cdiv(n, LOOP_BLOCK)"),
        ]
    if finish:
        t = ops[prog.target].name
        lines += [
            f"    result = torch.empty((), device={device}, dtype=torch.{prog.out_dtype})",
            "    block = min(1024, triton.next_power_of_2(max(1, outer * inner)))",
            f"    {k}_finish_kernel[(1,)](",
            f"        result, out, {t}3.reshape(-1), outer * inner,",
            f"        MEAN={prog.finish == 'mean'}, BLOCK=block, NUM_STEPS=triton.cdiv(outer * inner, block), num_warps=4,",
            "    )",
            "    return result",
        ]
    elif prog.out_per_row:
        lines.append("    return out.view(out_shape)")
    else:
        lines.append("    return out.view(shape)")
    return lines


def emit(rec, config: RowConfig, note: str) -> str:
    """The full candidate source for a recognised row program."""
    prog: RowProgram = rec.program
    k = identifier(rec.task_name)
    kernels = "\n".join(_RowKernel(k, prog, looped=False).one_pass())
    kernels += "\n\n\n" + "\n".join(_RowKernel(k, prog, looped=True).looped())
    if prog.finish:
        kernels += "\n\n\n" + "\n".join(_finish_kernel(k, prog))
    parts = [header(rec.task_name, "rowwise", rec.describe(), note or describe(config), uses_math=True), ""]
    parts += [helpers_for(kernels) + kernels, "", "", "\n".join(_launcher(k, prog, config)), ""]
    parts.append(model_class(rec.task_name, "rowwise", rec.init_signature, rec.init_lines, rec.forward_args,
                             f"{k}_rowwise", [op.expr for op in prog.operands]))
    return "\n".join(parts)
