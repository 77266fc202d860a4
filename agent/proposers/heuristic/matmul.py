"""Emits the Triton source for a matmul program: out = epilogue(A @ B), the epilogue fused into the store.

One kernel: BLOCK_M x BLOCK_N output tiles, a K loop of tl.dot over BLOCK_K slices into an fp32
accumulator, programs launched in GROUP_M-row groups so that neighbouring programs reuse B's column tiles
from L2, and a batch grid axis for bmm (stride 0 for a factor shared across the batch). The epilogue
(bias, activation, scaling, a residual) runs on the accumulator before it leaves registers. fp32 factors
use input_precision="tf32x3" (TF32X3=1, the default: three TF32 tensor-core passes, about as accurate as
exact products) or "ieee" (exact products on the FMA units); one TF32 pass misses the 1e-4 fp32
tolerance. The launcher flattens linear's leading dims into M and views nn.Linear's weight as weight.t()
(a view: no copy).

The K loop's trip count K_TILES is a constexpr: Triton 3.6's interpreter cannot run a loop whose bound
is a run-time scalar under numpy >= 2.4; on the GPU this costs one compile per distinct K.

    source = emit(recognition, MatmulConfig(BLOCK_M=128, ...), note="...")
"""

from __future__ import annotations

from agent.proposers.heuristic.configs import MatmulConfig, describe
from agent.proposers.heuristic.expression import ExprWriter, helpers_for, kind_of, store_value
from agent.proposers.heuristic.modelnew import header, identifier, model_class
from agent.proposers.heuristic.program import Load, MatmulProgram, loads

TL_DTYPES = {"float32": "tl.float32", "float16": "tl.float16", "bfloat16": "tl.bfloat16"}


def _epilogue_operands(prog: MatmulProgram) -> list[int]:
    return loads(prog.out)


def _kernel(k: str, prog: MatmulProgram, config: MatmulConfig) -> list[str]:
    ops = prog.operands
    a, b = ops[prog.a], ops[prog.b]
    epi = _epilogue_operands(prog)
    lines = [
        "@triton.jit",
        f"def {k}_matmul_kernel(",
        f"    a_ptr,  # A = {a.expr}: (batch, M, K) through its strides",
        f"    b_ptr,  # B = {b.expr}: (batch, K, N) through its strides",
        "    out_ptr,  # output: (batch, M, N), contiguous",
    ]
    for i in epi:
        op = ops[i]
        lines.append(f"    {op.name}_ptr, {op.name}_sb, {op.name}_sm, {op.name}_sn,  # {op.expr}; strides over the output's (batch, M, N)")
    lines += [
        "    M, N, K,  # sizes of the product",
        "    a_sb, a_sm, a_sk,  # A's strides (a_sb is 0 when A is shared across the batch)",
        "    b_sb, b_sk, b_sn,  # B's strides",
        "    BLOCK_M: tl.constexpr,  # output tile rows",
        "    BLOCK_N: tl.constexpr,  # output tile columns",
        "    BLOCK_K: tl.constexpr,  # K slice per step",
        "    GROUP_M: tl.constexpr,  # row tiles per launch group (L2 reuse of B's tiles)",
        "    K_TILES: tl.constexpr,  # cdiv(K, BLOCK_K)",
        *(["    UPCAST_DOT: tl.constexpr,  # True on the CPU interpreter (see the K loop)"]
          if prog.dot_dtype == "bfloat16" else []),
        "):",
        "    pid = tl.program_id(0)",
        "    batch = tl.program_id(1).to(tl.int64)",
        "    # grouped order: GROUP_M row tiles sweep the same column tiles together, so B's tiles stay in L2",
        "    num_pid_m = tl.cdiv(M, BLOCK_M)",
        "    num_pid_n = tl.cdiv(N, BLOCK_N)",
        "    num_pid_in_group = GROUP_M * num_pid_n",
        "    first_pid_m = (pid // num_pid_in_group) * GROUP_M",
        "    group_size_m = tl.minimum(num_pid_m - first_pid_m, GROUP_M)",
        "    pid_m = first_pid_m + (pid % num_pid_in_group) % group_size_m",
        "    pid_n = (pid % num_pid_in_group) // group_size_m",
        "    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)",
        "    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)",
        "    offs_k = tl.arange(0, BLOCK_K)",
        "    # rows and columns past the edge wrap onto valid ones (their results are never stored): no M/N masks in the loop",
        "    a_rows = offs_m % M",
        "    b_cols = offs_n % N",
        "    a_ptrs = a_ptr + batch * a_sb + a_rows[:, None] * a_sm + offs_k[None, :] * a_sk",
        "    b_ptrs = b_ptr + batch * b_sb + offs_k[:, None] * b_sk + b_cols[None, :] * b_sn",
        "    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)",
        "    for kt in range(K_TILES):",
        "        k_left = K - kt * BLOCK_K",
        "        a = tl.load(a_ptrs, mask=offs_k[None, :] < k_left, other=0.0)",
        "        b = tl.load(b_ptrs, mask=offs_k[:, None] < k_left, other=0.0)",
    ]
    dot = TL_DTYPES[prog.dot_dtype]
    if a.dtype != prog.dot_dtype:
        lines.append(f"        a = a.to({dot})")
    if b.dtype != prog.dot_dtype:
        lines.append(f"        b = b.to({dot})")
    if prog.dot_dtype == "float32" and config.TF32X3:
        lines.append('        # three TF32 passes on the tensor cores (a = hi + lo: hi*hi + hi*lo + lo*hi), about as accurate')
        lines.append('        # as exact fp32 products; one TF32 pass (a 10-bit mantissa) misses the 1e-4 fp32 tolerance')
        lines.append('        acc = tl.dot(a, b, acc, input_precision="tf32x3")')
    elif prog.dot_dtype == "float32":
        lines.append('        acc = tl.dot(a, b, acc, input_precision="ieee")  # exact fp32 products: TF32 misses 1e-4')
    elif prog.dot_dtype == "bfloat16":
        lines += [
            "        if UPCAST_DOT:",
            "            # CPU interpreter only: its tl.dot multiplies bf16 bit patterns as integers (Triton 3.6);",
            "            # bf16 products are exact in fp32, so the result is the one the tensor cores give",
            '            acc = tl.dot(a.to(tl.float32), b.to(tl.float32), acc, input_precision="ieee")',
            "        else:",
            "            acc = tl.dot(a, b, acc)  # bf16 tensor cores, fp32 accumulation",
        ]
    else:
        lines.append("        acc = tl.dot(a, b, acc)  # fp32 accumulation")
    lines += [
        "        a_ptrs += BLOCK_K * a_sk",
        "        b_ptrs += BLOCK_K * b_sk",
        "    mask = (offs_m[:, None] < M) & (offs_n[None, :] < N)",
    ]

    def load(i: int) -> str:
        op = ops[i]
        other = "0.0" if kind_of(Load(i), ops) == "f" else "0"
        return (f"tl.load({op.name}_ptr + batch * {op.name}_sb + offs_m[:, None] * {op.name}_sm"
                f" + offs_n[None, :] * {op.name}_sn, mask=mask, other={other})")

    writer = ExprWriter(ops, load=load)
    result = writer.value(prog.out)
    if writer.lines:
        lines.append("    # epilogue, on the fp32 accumulator before it leaves registers")
    lines += writer.lines
    lines += [
        "    out_off = batch * M * N + offs_m[:, None] * N + offs_n[None, :]",
        f"    tl.store(out_ptr + out_off, {store_value(result, prog.out_dtype)}, mask=mask)",
    ]
    return lines


def _launcher(k: str, prog: MatmulProgram, config: MatmulConfig) -> list[str]:
    ops = prog.operands
    names = [op.name for op in ops]
    a, b = names[prog.a], names[prog.b]
    epi = [names[i] for i in _epilogue_operands(prog)]
    lines = [
        f"BLOCK_M = {config.BLOCK_M}",
        f"BLOCK_N = {config.BLOCK_N}",
        f"BLOCK_K = {config.BLOCK_K}",
        f"GROUP_M = {config.GROUP_M}",
        f"NUM_WARPS = {config.num_warps}",
        f"NUM_STAGES = {config.num_stages}  # software pipelining depth of the K loop",
        "",
        "",
        f"def {k}_matmul({', '.join(names)}):",
        f'    """epilogue({a} @ {b}); returns a new contiguous tensor."""',
    ]
    if prog.batched:
        lines += [
            f"    batch_shape = torch.broadcast_shapes({a}.shape[:-2], {b}.shape[:-2])",
            f"    m, kk, n = {a}.shape[-2], {a}.shape[-1], {b}.shape[-1]",
            "    out_shape = (*batch_shape, m, n)",
            "    # shared factors keep stride 0 over the batch; merging the batch dims is a view when the layout allows",
            f"    a3 = {a}.expand(*batch_shape, m, kk).reshape(-1, m, kk)",
            f"    b3 = {b}.expand(*batch_shape, kk, n).reshape(-1, kk, n)",
        ]
    else:
        lines += [
            f"    kk, n = {a}.shape[-1], {b}.shape[-1]",
            f"    out_shape = (*{a}.shape[:-1], n)",
            "    # leading dims of A flatten into M (a view when the layout allows); one batch",
            f"    a3 = {a}.reshape(-1, kk).unsqueeze(0)",
            f"    b3 = {b}.unsqueeze(0)",
        ]
    if prog.dot_dtype == "float32" and config.TF32X3:
        lines += [
            "    # TF32 tensor-core products read both factors K-major: an N-major B ran 1.3-1.4x slower on the H200",
            "    # (4096^3: 2.43 ms against 1.82 ms); one copy of a factor costs far less",
            "    # (a factor shared across the batch, stride 0, is copied once)",
            "    if a3.stride(2) != 1 and a3.size(2) > 1:",
            "        a3 = (a3[:1] if a3.stride(0) == 0 else a3).contiguous().expand(a3.shape)",
            "    if b3.stride(1) != 1 and b3.size(1) > 1:",
            "        b3 = (b3[:1] if b3.stride(0) == 0 else b3).transpose(1, 2).contiguous().transpose(1, 2).expand(b3.shape)",
        ]
    elif prog.dot_dtype == "float32":
        lines += [
            "    if b3.stride(1) == 1 and b3.stride(2) != 1:",
            "        # fp32 products run on the FMA units, which read a K-major B (nn.Linear's weight.t()) about 1.9x",
            "        # slower than an N-major one (H200, 16384x3072x768: 3.64 ms against 1.94 ms); one copy of B is cheaper",
            "        b3 = b3.contiguous()",
        ]
    lines += [
        "    batch, m, _ = a3.shape",
        f"    out = torch.empty((batch, m, n), device={a}.device, dtype=torch.{prog.out_dtype})",
        "    if out.numel() == 0:",
        "        return out.view(out_shape)",
    ]
    epi_args = []
    for e in epi:
        lines.append(f"    {e}3 = {e}.expand(out_shape).reshape(batch, m, n)  # stride 0 where broadcast")
        epi_args.append(f"{e}3, *{e}3.stride()")
    lines += [
        "    grid = (triton.cdiv(m, BLOCK_M) * triton.cdiv(n, BLOCK_N), batch)",
        f"    {k}_matmul_kernel[grid](",
        "        a3, b3, out,",
        *[f"        {arg}," for arg in epi_args],
        "        m, n, kk, *a3.stride(), *b3.stride(),",
        "        BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, BLOCK_K=BLOCK_K, GROUP_M=GROUP_M, K_TILES=triton.cdiv(kk, BLOCK_K),",
        *(["        UPCAST_DOT=not a3.is_cuda,"] if prog.dot_dtype == "bfloat16" else []),
        "        num_warps=NUM_WARPS, num_stages=NUM_STAGES,",
        "    )",
        "    return out.view(out_shape)",
    ]
    return lines


def emit(rec, config: MatmulConfig, note: str) -> str:
    """The full candidate source for a recognised matmul program."""
    prog: MatmulProgram = rec.program
    k = identifier(rec.task_name)
    kernels = "\n".join(_kernel(k, prog, config))
    parts = [header(rec.task_name, "matmul", rec.describe(), note or describe(config), uses_math=False), ""]
    parts += [helpers_for(kernels) + kernels, "", "", "\n".join(_launcher(k, prog, config)), ""]
    parts.append(model_class(rec.task_name, "matmul", rec.init_signature, rec.init_lines, rec.forward_args,
                             f"{k}_matmul", [op.expr for op in prog.operands]))
    return "\n".join(parts)
