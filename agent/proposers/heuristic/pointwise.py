"""Emits the Triton source for a pointwise program: out = f(operands) over their broadcast shape.

Two kernels, and a third with INDEXED=1, one launcher that picks between them at run time:
- flat: every operand already has the output's contiguous layout; one 1-D pass, BLOCK elements per program;
- tiled: some operand is broadcast (stride 0) or strided (a transpose, a chunk); 2-D tiles over the last
  two output dims, each operand read through its own strides, so both sides of a transpose stay coalesced
  (Triton stages the tile through shared memory when the load and store orders differ);
- indexed (INDEXED=1): where every operand's last dim is contiguous or broadcast (a bias row, a per-row
  scale, a chunk), a 1-D pass like the flat one that computes each operand's offset from the flat index
  (32-bit, so only below 2**31 elements and offsets): no 2-D tile, no layout change, fewer registers.
  A transposed operand still takes the tiles.

    source = emit(recognition, PointwiseConfig(BLOCK=1024, TILE_C=64, num_warps=4), note="...")
"""

from __future__ import annotations

from agent.proposers.heuristic.configs import PointwiseConfig, describe
from agent.proposers.heuristic.expression import ExprWriter, helpers_for, kind_of, store_value
from agent.proposers.heuristic.modelnew import header, identifier, model_class
from agent.proposers.heuristic.program import PointwiseProgram


def _other(program: PointwiseProgram, i: int) -> str:
    from agent.proposers.heuristic.program import Load

    return "0.0" if kind_of(Load(i), program.operands) == "f" else "0"


def _strided_params(prog: PointwiseProgram, rank: int) -> list[str]:
    """Each operand's pointer and its strides over the output's `rank` dims, as kernel parameters."""
    return [f"    {op.name}_ptr, {', '.join(f'{op.name}_s{d}' for d in range(rank))},  # {op.expr}; its strides "
            "over the output's dims (0 where broadcast)" for op in prog.operands]


def _strided_header(name: str, prog: PointwiseProgram, rank: int, sizes: int) -> list[str]:
    """A strided kernel's first lines: the output, each operand with its strides, and size1 .. size{sizes-1}."""
    return ["@triton.jit", f"def {name}(", "    out_ptr,  # output, contiguous", *_strided_params(prog, rank),
            *[f"    size{d},  # size of output dim {d}" for d in range(1, sizes)]]


def _unravel(dims: int) -> list[str]:
    """Split the flat index in `rest` into i0 .. i{dims-1} over size1 .. size{dims-1}, last dim first."""
    lines = []
    for d in range(dims - 1, 0, -1):
        lines += [f"    i{d} = rest % size{d}", f"    rest = rest // size{d}"]
    return lines + ["    i0 = rest"]


def _compute_and_store(prog: PointwiseProgram, offset: str, out_offset: str, before_store=()) -> list[str]:
    """Load each operand at `offset` (a format with {name}), compute the program, store at `out_offset`
    (computed by the lines `before_store`, where given)."""
    ops = prog.operands
    writer = ExprWriter(ops, load=lambda i: f"tl.load({ops[i].name}_ptr + {offset.format(name=ops[i].name)}, "
                                            f"mask=mask, other={_other(prog, i)})")
    result = writer.value(prog.out)
    store = f"    tl.store(out_ptr + {out_offset}, {store_value(result, prog.out_dtype)}, mask=mask)"
    return writer.lines + [*before_store, store]


def _flat_kernel(k: str, prog: PointwiseProgram) -> list[str]:
    ops = prog.operands
    lines = [
        "@triton.jit",
        f"def {k}_flat_kernel(",
        "    out_ptr,  # output, contiguous",
    ]
    for op in ops:
        lines.append(f"    {op.name}_ptr,  # {op.expr}, contiguous, the output's shape")
    lines += [
        "    numel,  # elements of the output",
        "    BLOCK: tl.constexpr,  # elements per program",
        "):",
        "    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)",
        "    mask = offs < numel",
    ]
    return lines + _compute_and_store(prog, "offs", "offs")


def _tiled_kernel(k: str, prog: PointwiseProgram) -> list[str]:
    ops = prog.operands
    rank = max(2, prog.rank)
    lead = rank - 2
    lines = _strided_header(f"{k}_tiled_kernel", prog, rank, sizes=lead)
    lines += [
        "    rows,  # size of the second-to-last output dim",
        "    cols,  # size of the last output dim",
        "    BLOCK_R: tl.constexpr,  # tile rows",
        "    BLOCK_C: tl.constexpr,  # tile columns",
        "):",
        "    row_blocks = tl.cdiv(rows, BLOCK_R)",
        "    lead = tl.program_id(0) // row_blocks  # index over the dims before the last two",
        "    r = (tl.program_id(0) % row_blocks) * BLOCK_R + tl.arange(0, BLOCK_R)[:, None]",
        "    c = tl.program_id(1) * BLOCK_C + tl.arange(0, BLOCK_C)[None, :]",
        "    mask = (r < rows) & (c < cols)",
        "    # 64-bit offsets: a transposed operand's column stride times a column index can pass 2**31",
        "    r = r.to(tl.int64)",
        "    c = c.to(tl.int64)",
    ]
    if lead:
        lines += ["    rest = lead.to(tl.int64)", *_unravel(lead)]
    for op in ops:
        terms = [f"i{d} * {op.name}_s{d}" for d in range(lead)]
        terms += [f"r * {op.name}_s{lead}", f"c * {op.name}_s{lead + 1}"]
        lines.append(f"    {op.name}_off = {' + '.join(terms)}")
    return lines + _compute_and_store(prog, "{name}_off", "out_off",
                                      ["    out_off = lead.to(tl.int64) * rows * cols + r * cols + c"])


def _indexed_kernel(k: str, prog: PointwiseProgram) -> list[str]:
    ops = prog.operands
    rank = prog.rank
    lines = _strided_header(f"{k}_indexed_kernel", prog, rank, sizes=rank)
    lines += [
        "    numel,  # elements of the output (numel + BLOCK below 2**31: the index arithmetic is 32-bit)",
        "    BLOCK: tl.constexpr,  # elements per program",
    ]
    for op in ops:
        lines.append(f"    {op.name}_FLAT: tl.constexpr,  # {op.expr} has the output's contiguous layout: read at offs")
    lines += [
        "):",
        "    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)",
        "    mask = offs < numel",
        "    # the output index of each element, last dim first",
        "    rest = offs",
        *_unravel(rank),
    ]
    for op in ops:
        # an operand laid out like the output is read at offs itself, so its loads stay vectorised
        lines += [f"    if {op.name}_FLAT:",
                  f"        {op.name}_off = offs",
                  "    else:",
                  f"        {op.name}_off = {' + '.join(f'i{d} * {op.name}_s{d}' for d in range(rank))}"]
    return lines + _compute_and_store(prog, "{name}_off", "offs")


def _launcher(k: str, prog: PointwiseProgram, config: PointwiseConfig) -> list[str]:
    ops = prog.operands
    names = [op.name for op in ops]
    bnames = [f"{n}_b" for n in names]
    rank = prog.rank
    lines = [
        f"BLOCK = {config.BLOCK}  # elements per program (flat, indexed) and per tile (tiled)",
        f"TILE_C = {config.TILE_C}  # tiled kernel: columns per tile",
        f"NUM_WARPS = {config.num_warps}",
        "",
        "",
        f"def {k}_pointwise({', '.join(names)}):",
        '    """Launch the kernel over the operands\' broadcast shape; returns a new contiguous tensor."""',
        f"    shape = torch.broadcast_shapes({', '.join(n + '.shape' for n in names)})" if len(names) > 1
        else f"    shape = {names[0]}.shape",
        f"    out = torch.empty(shape, device={names[0]}.device, dtype=torch.{prog.out_dtype})",
        "    if out.numel() == 0:",
        "        return out",
        *[f"    {b} = {n}.expand(shape)  # a view: stride 0 on broadcast dims" for n, b in zip(names, bnames)],
        f"    if {' and '.join(b + '.is_contiguous()' for b in bnames)}:",
        "        # every operand already has the output's layout: one flat pass",
        "        numel = out.numel()",
        f"        {k}_flat_kernel[(triton.cdiv(numel, BLOCK),)](",
        f"            out, {', '.join(bnames)}, numel, BLOCK=BLOCK, num_warps=NUM_WARPS,",
        "        )",
        "        return out",
    ]
    if rank == 0:
        lines.append("    raise ValueError('a 0-d output with strided operands cannot happen')")
        return lines
    if config.INDEXED:
        views = ", ".join(bnames) + ("," if len(bnames) == 1 else "")
        lines += [
            f"    views = ({views})",
            "    # 32-bit index arithmetic: the last block's offsets (up to numel + BLOCK) must stay below 2**31",
            "    if (out.numel() + BLOCK < 2**31 and all(v.stride(-1) in (0, 1) for v in views)",
            "            and max(sum((n - 1) * s for n, s in zip(v.shape, v.stride())) for v in views) < 2**31):",
            "        # every operand's last dim is contiguous or broadcast: one 1-D pass, each operand's offset",
            "        # computed from the flat output index",
            "        numel = out.numel()",
            f"        {k}_indexed_kernel[(triton.cdiv(numel, BLOCK),)](",
            f"            out, {', '.join(f'{b}, *{b}.stride()' for b in bnames)},",
            "            *shape[1:], numel, BLOCK=BLOCK,",
            *[f"            {n}_FLAT={b}.is_contiguous()," for n, b in zip(names, bnames)],
            "            num_warps=NUM_WARPS,",
            "        )",
            "        return out",
        ]
    lines.append("    # broadcast or strided operands: 2-D tiles over the last two dims, each operand read through its strides")
    if rank < 2:
        pad = 2 - rank
        lines.append(f"    full = (1,) * {pad} + tuple(shape)")
        stride_args = [f"{b}, *((0,) * {pad} + {b}.stride())" for b in bnames]
    else:
        lines.append("    full = tuple(shape)")
        stride_args = [f"{b}, *{b}.stride()" for b in bnames]
    lines += [
        "    rows, cols = full[-2], full[-1]",
        "    block_c = min(TILE_C, triton.next_power_of_2(cols))",
        "    block_r = max(1, min(BLOCK // block_c, triton.next_power_of_2(rows)))",
    ]
    lead = max(2, rank) - 2
    outer = "math.prod(full[:-2]) * " if lead else ""
    lines.append(f"    grid = ({outer}triton.cdiv(rows, block_r), triton.cdiv(cols, block_c))")
    sizes = "".join(f"full[{d}], " for d in range(1, lead))
    lines.append(f"    {k}_tiled_kernel[grid](")
    lines.append("        out,")
    lines += [f"        {arg}," for arg in stride_args]
    lines.append(f"        {sizes}rows, cols,")
    lines.append("        BLOCK_R=block_r, BLOCK_C=block_c, num_warps=NUM_WARPS,")
    lines.append("    )")
    lines.append("    return out")
    return lines


def emit(rec, config: PointwiseConfig, note: str) -> str:
    """The full candidate source for a recognised pointwise program."""
    prog: PointwiseProgram = rec.program
    k = identifier(rec.task_name)
    kernels = "\n".join(_flat_kernel(k, prog))
    if prog.rank > 0:
        kernels += "\n\n\n" + "\n".join(_tiled_kernel(k, prog))
        if config.INDEXED:
            kernels += "\n\n\n" + "\n".join(_indexed_kernel(k, prog))
    parts = [header(rec.task_name, "pointwise", rec.describe(), note or describe(config), uses_math=prog.rank > 2)]
    parts += ["", helpers_for(kernels) + kernels, "", "", "\n".join(_launcher(k, prog, config))]
    parts.append("")
    parts.append(model_class(rec.task_name, "pointwise", rec.init_signature, rec.init_lines, rec.forward_args,
                             f"{k}_pointwise", [op.expr for op in prog.operands]))
    return "\n".join(parts)
