"""The configuration space of each template, and the walk through it that the profiler's diagnosis steers.

    choices = first_round(problem, on_gpu=True, n=2, tried=set())
    choices[0].note   # "matmul BLOCK_M=128 BLOCK_N=128 ...: default for 4096x4096x4096 (MxNxK) bfloat16 on the GPU"
    later = next_round(problem, best=choices[0].config, diagnosis=diag, on_gpu=True, n=2, tried=...)

Round 1 is a default per family and benchmark size: tuned values on a GPU,
small blocks on the CPU, where the Triton interpreter runs them. Each later
round starts from the best configuration so far and takes the moves its
diagnosis calls for, most pressing first: a 16-bit matmul with busy tensor
cores and warps waiting on each other for a 128x256 tile on two warp groups;
long-scoreboard stalls (waiting on global memory) call for deeper pipelining or
wider loads, and in row kernels for the warps that give each thread 64 bytes of
a step (the best for one-pass rows on the H200); a tiled pointwise kernel held back by barriers or
registers for the 1-D indexed pass in small programs; occupancy limited by
registers (or spills) for smaller tiles, then for matmul half the tile on half
the warps, for row and pointwise kernels more warps (fewer elements, so fewer
registers, per thread); a tail effect (a last wave that leaves most SMs idle)
for tile sizes that fill the SMs. Neighbours of the best configuration fill
the round when the diagnosis says nothing new, or when there is none (no GPU,
no ncu). A kernel at 85% or more of speed-of-light (memory- or compute-bound)
stops the walk. No configuration is proposed twice: notes carry the
configuration, and `parse_note` reads them back from the run's history.

Over 450 lines on purpose: the three families' walks read one diagnosis the
same way (`stalls`, `_occupancy_moves`, `_tail`) and go through one `_pick`;
split by family, each file would import the others' halves.
"""

from __future__ import annotations

import dataclasses
import math
import re
from dataclasses import dataclass

from profiler.records import Diagnosis, Occupancy

SOL_STOP_PCT = 85.0          # at this % of speed-of-light, another configuration cannot gain enough to matter
ROW_BYTES_PER_THREAD = 64    # row kernels waiting on memory: the bytes a thread loads a step (fastest for one-pass rows)
H200_SMS = 132
SMEM_BUDGET_BYTES = 200 * 1024   # of the H200's 227 KiB per block, leaving room for the epilogue's layout change
DTYPE_BYTES = {"float32": 4, "float16": 2, "bfloat16": 2, "float64": 8}


@dataclass(frozen=True)
class Problem:
    """The benchmark sizes (get_inputs) a configuration is tuned for."""

    family: str
    dtype: str                  # the main input's dtype (matmul: the dtype of the products)
    numel: int = 0              # pointwise: output elements
    flat: bool = True           # pointwise: every operand is the output's shape (the flat kernel runs)
    indexable: bool = True      # pointwise: every operand's last dim is contiguous or broadcast (INDEXED=1 runs)
    rows: int = 0               # rowwise: number of rows (outer * inner)
    row_len: int = 0            # rowwise: reduced elements per row
    inner: int = 1              # rowwise: elements after the reduced dims (1: rows are contiguous in memory)
    m: int = 0                  # matmul: rows of the output (batch dims flattened for linear)
    n: int = 0                  # matmul: columns of the output
    k: int = 0                  # matmul: reduction length
    batch: int = 1              # matmul: independent products (bmm)

    @property
    def elem_bytes(self) -> int:
        return DTYPE_BYTES.get(self.dtype, 4)

    def describe(self) -> str:
        if self.family == "pointwise":
            return f"{self.numel} elements {self.dtype}" + ("" if self.flat else " (strided or broadcast operands)")
        if self.family == "rowwise":
            layout = "contiguous rows" if self.inner == 1 else f"strided rows (inner {self.inner})"
            return f"{self.rows} rows x {self.row_len} {self.dtype}, {layout}"
        batch = f"{self.batch} x " if self.batch > 1 else ""
        return f"{batch}{self.m}x{self.n}x{self.k} (MxNxK) {self.dtype}"


@dataclass(frozen=True)
class PointwiseConfig:
    BLOCK: int = 1024           # elements per program (flat kernel) and per tile (strided kernel)
    TILE_C: int = 64            # strided kernel: columns per tile (rows per tile = BLOCK // TILE_C)
    num_warps: int = 4
    INDEXED: int = 0            # 1: broadcast or strided operands whose last dim is contiguous or broadcast are
                                # read by a 1-D pass with index arithmetic instead of 2-D tiles


@dataclass(frozen=True)
class RowConfig:
    ONE_PASS_MAX: int = 2048    # longest row (rounded up to a power of two) held whole in registers
    LOOP_BLOCK: int = 1024      # elements per step along rows longer than that
    TILE: int = 4096            # elements per program: short rows are packed several to a program
    num_warps: int = 4


@dataclass(frozen=True)
class MatmulConfig:
    BLOCK_M: int = 32
    BLOCK_N: int = 32
    BLOCK_K: int = 32
    GROUP_M: int = 8            # row-tiles per group in the launch order, for L2 reuse of B
    num_warps: int = 4
    num_stages: int = 1
    TF32X3: int = 0             # fp32 products: 1, three TF32 tensor-core passes (a = hi + lo; hi*hi + hi*lo + lo*hi);
    #                             0, exact IEEE products on the FMA units


CONFIG_TYPES = {"pointwise": PointwiseConfig, "rowwise": RowConfig, "matmul": MatmulConfig}
# Fields added after notes were first written: a note shows them only when they differ from the default,
# and a note without them reads back with the default.
OPTIONAL_FIELDS = {"INDEXED", "TF32X3"}
Config = PointwiseConfig | RowConfig | MatmulConfig


@dataclass(frozen=True)
class Choice:
    """A configuration to propose and why it was chosen."""

    family: str
    config: Config
    why: str

    @property
    def note(self) -> str:
        return f"{self.family} {describe(self.config)}: {self.why}"


def describe(config: Config) -> str:
    """'BLOCK_M=128 BLOCK_N=128 ...' in field order (an optional field only when it is not its default)."""
    return " ".join(f"{f.name}={getattr(config, f.name)}" for f in dataclasses.fields(config)
                    if f.name not in OPTIONAL_FIELDS or getattr(config, f.name) != f.default)


def parse_note(note: str) -> tuple[str, Config] | None:
    """The (family, config) a note was written for, or None when the note is not one of these."""
    head = note.split(":", 1)[0].split()
    if not head or head[0] not in CONFIG_TYPES:
        return None
    cls = CONFIG_TYPES[head[0]]
    values = dict(re.findall(r"(\w+)=(-?\d+)", " ".join(head[1:])))
    names = {f.name for f in dataclasses.fields(cls)}
    if not names - OPTIONAL_FIELDS <= set(values) <= names:
        return None
    return head[0], cls(**{k: int(v) for k, v in values.items()})


# ------------------------------------------------------------------------------------------------
# defaults


def default_config(problem: Problem, on_gpu: bool) -> tuple[Config, str]:
    """Round 1's configuration and why."""
    where = "on the GPU" if on_gpu else "for the CPU interpreter"
    if problem.family == "pointwise":
        if not on_gpu:
            return PointwiseConfig(BLOCK=1024, TILE_C=64, num_warps=4), f"default {where}"
        big = problem.numel >= 1 << 24
        cfg = PointwiseConfig(BLOCK=4096 if big else 1024, TILE_C=128 if big else 64, num_warps=8 if big else 4)
        return cfg, f"default for {problem.describe()} {where}: 16 B or more per thread per load"
    if problem.family == "rowwise":
        if not on_gpu:
            return RowConfig(), f"default {where}"
        cfg = RowConfig(ONE_PASS_MAX=16384, LOOP_BLOCK=4096, TILE=4096, num_warps=4)
        cfg = dataclasses.replace(cfg, num_warps=_row_warps(cfg, problem))
        mode = "one pass, row in registers" if _row_launch(cfg, problem)[0] == "one_pass" else "looped over the row"
        return cfg, f"default for {problem.describe()} {where} ({mode})"
    # fp32 products as three TF32 passes on the tensor cores, on the GPU and in the interpreter alike (which
    # emulates the split): see TF32X3_WHY
    tf32x3 = int(problem.dtype == "float32")
    if not on_gpu:
        # the interpreter's cost is per program and per step: few, large tiles run fastest there
        return MatmulConfig(BLOCK_M=64, BLOCK_N=64, BLOCK_K=64, GROUP_M=8, num_warps=4, num_stages=1,
                            TF32X3=tf32x3), f"default {where}"
    if problem.elem_bytes == 2:
        cfg = MatmulConfig(BLOCK_M=128, BLOCK_N=128, BLOCK_K=64, GROUP_M=8, num_warps=8, num_stages=3)
    else:
        # NOTE: the best of 7 tile shapes for tf32x3 at all four fp32 GEMM shapes measured (benchmarks/heuristic.md)
        cfg = MatmulConfig(BLOCK_M=128, BLOCK_N=64, BLOCK_K=32, GROUP_M=8, num_warps=4, num_stages=4, TF32X3=1)
    why = f"default for {problem.describe()} {where}"
    if cfg.TF32X3:
        why += f"; {TF32X3_WHY}"
    if _tiles(cfg, problem) < H200_SMS:
        # too few 128x128 tiles to give every SM one: halve the tiles until they do
        for bm, bn in ((128, 64), (64, 64), (64, 32), (32, 32)):
            cfg = dataclasses.replace(cfg, BLOCK_M=bm, BLOCK_N=bn, num_warps=4)
            if _tiles(cfg, problem) >= H200_SMS:
                break
        why += f"; {bm}x{bn} tiles so that {_tiles(cfg, problem)} tiles cover the {H200_SMS} SMs"
    return cfg, why


TF32X3_WHY = ("fp32 products as three TF32 tensor-core passes (tf32x3), about as accurate as FMA products "
              "and faster than cuBLAS's fp32 GEMM on the H200")


def _row_launch(cfg: RowConfig, p: Problem) -> tuple:
    """What the row launcher will actually run for this problem: (mode, BLOCK_N, ROWS, num_warps).

    NOTE: mirrors the launcher rowwise.py writes; change both together.
    """
    n = max(1, p.row_len)
    block_n = 1 << (n - 1).bit_length()
    if p.inner > 1:   # strided rows: a strip of inner positions per program, the row in steps
        rows = min(1 << (p.inner - 1).bit_length(), 64)
        step = min(block_n, max(1, cfg.TILE // rows))
        return ("one_pass" if step >= n else "looped", step, rows, cfg.num_warps)
    if block_n <= cfg.ONE_PASS_MAX:
        rows = max(1, min(cfg.TILE // block_n, 1 << (max(1, p.rows) - 1).bit_length()))
        return ("one_pass", block_n, rows, cfg.num_warps)
    rows = max(1, min(cfg.TILE // cfg.LOOP_BLOCK, 1 << (max(1, p.rows) - 1).bit_length()))
    return ("looped", cfg.LOOP_BLOCK, rows, cfg.num_warps)


def _row_warps(cfg: RowConfig, p: Problem) -> int:
    _, block_n, rows, _ = _row_launch(cfg, p)
    elems = block_n * rows
    return 4 if elems <= 2048 else (8 if elems <= 8192 else 16)


def _smem_bytes(cfg: MatmulConfig, p: Problem) -> int:
    """Shared memory the pipelined A and B tiles take."""
    return cfg.num_stages * (cfg.BLOCK_M * cfg.BLOCK_K + cfg.BLOCK_K * cfg.BLOCK_N) * p.elem_bytes


def _tiles(cfg: MatmulConfig, p: Problem) -> int:
    return p.batch * math.ceil(p.m / cfg.BLOCK_M) * math.ceil(p.n / cfg.BLOCK_N)


def launch_key(family: str, config: Config, problem: Problem, on_gpu: bool = True) -> tuple:
    """Configurations with equal keys launch identical kernels for this problem: trying both gains nothing.

    The CPU interpreter ignores num_warps and num_stages, so there they do not tell configurations apart.
    """
    if family == "rowwise":
        key = _row_launch(config, problem)
        return key if on_gpu else key[:3]
    if family == "pointwise":
        if problem.flat:
            key = (config.BLOCK, config.num_warps)
        elif config.INDEXED and problem.indexable:
            key = ("indexed", config.BLOCK, config.num_warps)      # the 1-D pass has no tiles
        else:
            key = dataclasses.astuple(_with(config, INDEXED=0))      # the tiles run either way
    else:
        key = dataclasses.astuple(config)
    if not on_gpu:
        names = [f.name for f in dataclasses.fields(config)]
        key = tuple(getattr(config, n) for n in names if n not in ("num_warps", "num_stages")
                    and not (family == "pointwise" and problem.flat and n in ("TILE_C", "INDEXED")))
    return tuple(key)


# ------------------------------------------------------------------------------------------------
# validity


def valid(family: str, cfg: Config, problem: Problem, on_gpu: bool) -> bool:
    """Whether a configuration can compile and run well enough to be worth a try."""
    def pow2(v: int) -> bool:
        return v > 0 and v & (v - 1) == 0

    if not all(pow2(getattr(cfg, f.name)) for f in dataclasses.fields(cfg) if f.name not in ("num_stages", "INDEXED", "TF32X3")):
        return False
    if family == "pointwise":
        return cfg.INDEXED in (0, 1) and 128 <= cfg.BLOCK <= 16384 and 16 <= cfg.TILE_C <= min(512, cfg.BLOCK) and 1 <= cfg.num_warps <= 16 \
            and cfg.BLOCK >= 32 * cfg.num_warps
    if family == "rowwise":
        return 512 <= cfg.ONE_PASS_MAX <= 65536 and 128 <= cfg.LOOP_BLOCK <= 16384 and 256 <= cfg.TILE <= 65536 \
            and 1 <= cfg.num_warps <= 16
    if cfg.TF32X3 not in (0, 1) or (cfg.TF32X3 and problem.dtype != "float32"):
        return False
    if not (16 <= cfg.BLOCK_M <= 256 and 16 <= cfg.BLOCK_N <= 256 and 16 <= cfg.BLOCK_K <= 128):
        return False
    if not (1 <= cfg.GROUP_M <= 32 and 1 <= cfg.num_stages <= 6 and 1 <= cfg.num_warps <= 16):
        return False
    if on_gpu:
        smem = _smem_bytes(cfg, problem)
        acc_regs = cfg.BLOCK_M * cfg.BLOCK_N // (32 * cfg.num_warps)   # fp32 accumulators per thread
        if smem > SMEM_BUDGET_BYTES or acc_regs > 128 or cfg.num_warps < 4 or cfg.num_stages < 2:
            return False
        if problem.elem_bytes == 4:
            # exact fp32 products run on the FMA units with both tiles in registers: 128x128x64 on 8 warps
            # (128 values per thread) ran 9x slower than 128x128x32 (96) on the H200, spilling
            held = (cfg.BLOCK_M * cfg.BLOCK_N + cfg.BLOCK_M * cfg.BLOCK_K + cfg.BLOCK_K * cfg.BLOCK_N) // (32 * cfg.num_warps)
            if held > 112:
                return False
    return True


# ------------------------------------------------------------------------------------------------
# reading the diagnosis


def _number(value) -> float | None:
    try:
        return None if value is None else float(value)
    except (TypeError, ValueError):
        return None


def _share_pct(value) -> float | None:
    """A stall's share of stall cycles as a percentage, whether given as 0.41 or as 41."""
    value = _number(value)
    if value is None:
        return None
    return value * 100.0 if value <= 1.0 else value


STALL_NAMES = {
    "long_scoreboard": ("long_scoreboard", "long_sb", "long scoreboard"),
    "lg_throttle": ("lg_throttle",),
    "mio_throttle": ("mio_throttle",),
    "short_scoreboard": ("short_scoreboard", "short_sb"),
    "barrier": ("barrier",),
    "membar": ("membar",),
    "math_pipe_throttle": ("math_pipe", "math pipe"),
    "wait": ("wait",),
    "not_selected": ("not_selected",),
    "no_instruction": ("no_instruction",),
    "tex_throttle": ("tex_throttle",),
}


def _stall_kind(reason: str) -> str:
    text = reason.lower().replace("-", "_")
    for kind, names in STALL_NAMES.items():
        if any(name in text for name in names):
            return kind
    return text


def stalls(diagnosis: Diagnosis | None) -> list[tuple[str, float]]:
    """(stall kind, % of stall cycles), largest first."""
    out = []
    for entry in diagnosis.top_stalls if diagnosis is not None else []:
        if not entry.reason:
            continue
        share = _share_pct(entry.share)
        if share is not None:
            out.append((_stall_kind(entry.reason), share))
    return sorted(out, key=lambda s: -s[1])


def stop_reason(diagnosis: Diagnosis | None) -> str | None:
    """Why no configuration can gain enough to matter, or None."""
    if not diagnosis:
        return None
    bound = diagnosis.bound
    mem, sm = diagnosis.mem_sol_pct, diagnosis.sm_sol_pct
    if bound == "memory" and mem is not None and mem >= SOL_STOP_PCT:
        return f"memory-bound at {mem:.0f}% of SOL: nothing left to gain"
    if bound == "compute" and sm is not None and sm >= SOL_STOP_PCT:
        return f"compute-bound at {sm:.0f}% of SOL: nothing left to gain"
    return None


# ------------------------------------------------------------------------------------------------
# moves


def _with(cfg: Config, **changes) -> Config:
    return dataclasses.replace(cfg, **changes)


def _matmul_moves(cfg: MatmulConfig, p: Problem, diag: Diagnosis, sms: int) -> list[tuple[Config, str]]:
    # NOTE: the wide tile comes first: on the H200 (matmul_bf16, 4096³) it beat both single-knob answers to
    # the same diagnosis (4 warps, one more stage) in the same run
    moves: list[tuple[Config, str]] = _wider_mma_tile(cfg, p, diag)
    for kind, share in stalls(diag):
        if share < 10:
            break
        what = f"{kind} {share:.0f}% of stall cycles"
        if kind in ("long_scoreboard", "lg_throttle", "tex_throttle"):
            moves.append((_with(cfg, num_stages=cfg.num_stages + 1), f"{what} → deeper pipelining"))
            moves.append((_with(cfg, BLOCK_K=cfg.BLOCK_K * 2), f"{what} → wider K tiles, more bytes per load"))
        elif kind in ("mio_throttle", "short_scoreboard"):
            wider = _with(cfg, BLOCK_N=cfg.BLOCK_N * 2) if cfg.BLOCK_N <= cfg.BLOCK_M else _with(cfg, BLOCK_M=cfg.BLOCK_M * 2)
            moves.append((wider, f"{what} → larger tiles, more reuse per shared-memory load"))
        elif kind in ("barrier", "membar"):
            moves.append((_with(cfg, num_warps=cfg.num_warps // 2), f"{what} → fewer warps to synchronise"))
        elif kind == "wait":
            moves.append((_with(cfg, num_stages=cfg.num_stages + 1), f"{what} → more independent loads in flight"))
        elif kind == "not_selected":
            moves.append((_with(cfg, num_warps=cfg.num_warps // 2), f"{what} → fewer warps competing to issue"))
    smaller = _smaller_tile(cfg)
    # half the tile on half the warps: the same registers per thread, half per block, so more blocks fit
    second = (_with(smaller, num_warps=cfg.num_warps // 2), "smaller tiles on fewer warps, half the registers per block")
    moves += _occupancy_moves(cfg, diag, smaller=smaller, second=second,
                              fewer_stages=_with(cfg, num_stages=cfg.num_stages - 1))
    moves += _tail_moves_matmul(cfg, p, diag, sms)
    mem = diag.mem_sol_pct
    if diag.bound == "memory" and mem is not None:
        moves.append((_with(cfg, GROUP_M=cfg.GROUP_M * 2), f"memory-bound at {mem:.0f}% of SOL → larger GROUP_M, more L2 reuse"))
    return moves


def _wider_mma_tile(cfg: MatmulConfig, p: Problem, diag: Diagnosis) -> list[tuple[Config, str]]:
    """Tensor cores busy and warps waiting on each other: a 128x256 tile on two warp groups.

    Each K step of a wider tile issues twice the MMA work per barrier and per byte loaded from
    shared memory; on Hopper 128x256 on 8 warps is the usual shape for a large 16-bit GEMM. It takes
    as many stages (up to 4) as the shared-memory budget holds: 4 with 64-deep K tiles in 16 bits.
    """
    tensor = diag.tensor_core_pct
    waiting = {kind: share for kind, share in stalls(diag) if kind in ("wait", "barrier") and share >= 10}
    if diag.bound != "compute" or p.elem_bytes != 2 or tensor is None or tensor < 50 or not waiting \
            or cfg.BLOCK_N > 128 or cfg.BLOCK_M < 128:
        return []
    seen = " and ".join(f"{kind} {share:.0f}%" for kind, share in waiting.items())
    wide = _with(cfg, BLOCK_N=cfg.BLOCK_N * 2, num_warps=8)
    stages = max((s for s in range(cfg.num_stages, 5) if _smem_bytes(_with(wide, num_stages=s), p) <= SMEM_BUDGET_BYTES),
                 default=cfg.num_stages)
    wide = _with(wide, num_stages=stages)
    return [(wide, f"tensor cores {tensor:.0f}% active, {seen} of stall cycles → a wider tile on two warp groups "
                   f"with {stages} stages: more MMA work per barrier and per loaded byte")]


def _smaller_tile(cfg: MatmulConfig) -> MatmulConfig:
    if cfg.BLOCK_N >= cfg.BLOCK_M:
        return _with(cfg, BLOCK_N=cfg.BLOCK_N // 2)
    return _with(cfg, BLOCK_M=cfg.BLOCK_M // 2)


def _register_pressure(diag: Diagnosis) -> bool:
    occ = diag.occupancy or Occupancy(None, None)
    return bool(diag.spills) or "register" in occ.limiter.lower()


def _occupancy_moves(cfg: Config, diag: Diagnosis, smaller: Config, second: tuple[Config, str],
                     fewer_stages: Config | None = None):
    """Moves for spills and for occupancy limits: `second` is the family's other register move and its why."""
    moves = []
    occ = diag.occupancy or Occupancy(None, None)
    limiter = occ.limiter.lower()
    achieved = occ.achieved_pct
    spills = diag.spills or 0
    regs = diag.registers
    occ_text = f"occupancy {achieved:.0f}%" if achieved is not None else "occupancy"
    if spills:
        moves.append((smaller, f"{spills} spilled registers → smaller tiles"))
    if "register" in limiter:
        per_thread = f" ({regs} registers/thread)" if regs else ""
        moves.append((smaller, f"{occ_text} limited by registers{per_thread} → smaller tiles"))
        moves.append((second[0], f"{occ_text} limited by registers{per_thread} → {second[1]}"))
    if "shared" in limiter and fewer_stages is not None:
        moves.append((fewer_stages, f"{occ_text} limited by shared memory → fewer stages"))
    return moves


def _tail(diag: Diagnosis) -> tuple[float, float] | None:
    """(waves per SM, busy share of the last wave) when the last wave leaves SMs idle, else None."""
    waves = diag.waves_per_sm
    try:
        waves = float(waves)
    except (TypeError, ValueError):
        return None
    if waves <= 0:
        return None
    busy = waves / math.ceil(waves)
    return (waves, busy) if busy < 0.8 else None


def _tail_moves_matmul(cfg: MatmulConfig, p: Problem, diag: Diagnosis, sms: int):
    tail = _tail(diag)
    if tail is None or p.m == 0:
        return []
    waves, busy = tail
    per_sm = max(1e-9, _tiles(cfg, p) / (waves * sms))    # resident tiles per SM, as measured
    best = None
    for bm in (256, 128, 64, 32):
        for bn in (256, 128, 64, 32):
            cand = _with(cfg, BLOCK_M=bm, BLOCK_N=bn)
            w = _tiles(cand, p) / (per_sm * sms)
            b = w / math.ceil(w)
            score = (round(b, 2), bm * bn)
            if b > busy + 0.1 and (best is None or score > best[0]):
                best = (score, cand, w)
    if best is None:
        return []
    _, cand, w = best
    return [(cand, f"tail effect: {waves:.2f} waves on {sms} SMs, last wave {busy:.0%} busy "
                   f"→ {cand.BLOCK_M}x{cand.BLOCK_N} tiles give {w:.2f} waves")]


def _row_moves(cfg: RowConfig, p: Problem, diag: Diagnosis) -> list[tuple[Config, str]]:
    mode, block_n, rows, _ = _row_launch(cfg, p)
    per_thread = block_n * rows * p.elem_bytes // (32 * cfg.num_warps)     # bytes of the step each thread loads
    moves: list[tuple[Config, str]] = []
    for kind, share in stalls(diag):
        if share < 10:
            break
        what = f"{kind} {share:.0f}% of stall cycles"
        if kind in ("long_scoreboard", "lg_throttle"):
            # NOTE: on the H200 one-pass rows ran fastest at 64 bytes a thread: softmax (8192 fp32) on 16 warps
            # rather than 8, rmsnorm (4096 bf16) on 4 rather than 8. Looped rows are less regular: at 4096-element
            # steps on 8 warps (64 B) cross_entropy ran 35% slower on 16 warps and log_softmax no faster, while
            # 2048-element steps (32 B, proposed for register-limited occupancy) were 9% faster for cross_entropy
            # and 14% slower for log_softmax
            if per_thread > ROW_BYTES_PER_THREAD:
                moves.append((_with(cfg, num_warps=cfg.num_warps * 2),
                              f"{what}, {per_thread} B a thread → more warps, {ROW_BYTES_PER_THREAD} B each"))
            elif per_thread < ROW_BYTES_PER_THREAD:
                moves.append((_with(cfg, num_warps=cfg.num_warps // 2),
                              f"{what}, {per_thread} B a thread → fewer warps, {ROW_BYTES_PER_THREAD} B each: "
                              "more loads in flight per thread"))
            if mode == "looped":
                moves.append((_with(cfg, LOOP_BLOCK=cfg.LOOP_BLOCK * 2), f"{what} → wider steps along the row, more loads in flight"))
            else:
                moves.append((_with(cfg, TILE=cfg.TILE * 2), f"{what} → more rows per program, more loads in flight"))
        elif kind in ("barrier", "membar", "short_scoreboard", "mio_throttle"):
            moves.append((_with(cfg, num_warps=cfg.num_warps // 2), f"{what} → fewer warps in each row's cross-warp reduction"))
    if mode == "one_pass":
        smaller = _with(cfg, TILE=cfg.TILE // 2) if rows > 1 else _with(cfg, ONE_PASS_MAX=block_n // 2)
    else:
        smaller = _with(cfg, LOOP_BLOCK=cfg.LOOP_BLOCK // 2)
    # a row tile's registers per thread are its elements over the threads: more warps, fewer each
    spread = (_with(cfg, num_warps=cfg.num_warps * 2), "more warps, fewer elements (registers) per thread")
    moves += _occupancy_moves(cfg, diag, smaller=smaller, second=spread)
    tail = _tail(diag)
    if tail and rows > 1:
        moves.append((_with(cfg, TILE=cfg.TILE // 2), f"tail effect: {tail[0]:.2f} waves → fewer rows per program, more programs"))
    mem = diag.mem_sol_pct
    if diag.bound == "memory" and mem is not None and mode == "looped" and p.inner == 1 \
            and not _register_pressure(diag):
        whole = 1 << (max(1, p.row_len) - 1).bit_length()
        moves.append((_with(cfg, ONE_PASS_MAX=whole),
                      f"memory-bound at {mem:.0f}% of SOL → the whole row in registers: one read instead of one per pass"))
    return moves


def _pointwise_moves(cfg: PointwiseConfig, p: Problem, diag: Diagnosis) -> list[tuple[Config, str]]:
    moves: list[tuple[Config, str]] = []
    if not p.flat and p.indexable and not cfg.INDEXED and diag.bound == "memory":
        # The 2-D tiles stage a broadcast row through a layout change (barrier stalls) and hold a tile of
        # offsets per operand (registers); a 1-D pass computes each operand's offset from the flat index.
        # (A transposed operand keeps the tiles: the launcher takes the 1-D pass only where every
        # operand's last dim is contiguous or broadcast.)
        share = dict(stalls(diag))
        occ = diag.occupancy or Occupancy(None, None)
        achieved = occ.achieved_pct
        seen = []
        if share.get("barrier", 0) >= 10:
            seen.append(f"barrier {share['barrier']:.0f}% of stall cycles")
        if "register" in occ.limiter.lower() and achieved is not None and achieved < 60:
            seen.append(f"occupancy {achieved:.0f}% limited by registers")
        if seen:
            # NOTE: smaller programs: on the H200 (pointwise_chain) the 1-D pass ran 1024 elements on 4 warps
            # 9% faster than 4096 on 8, and each halving of the block between them helped
            moves.append((_with(cfg, INDEXED=1, BLOCK=min(cfg.BLOCK, 1024), num_warps=min(cfg.num_warps, 4)),
                          f"{' and '.join(seen)} in the 2-D tiles → a 1-D pass with index arithmetic (no tile "
                          "to stage, fewer registers), in small programs"))
    for kind, share in stalls(diag):
        if share < 10:
            break
        what = f"{kind} {share:.0f}% of stall cycles"
        if kind in ("long_scoreboard", "lg_throttle"):
            moves.append((_with(cfg, BLOCK=cfg.BLOCK * 2), f"{what} → more elements per thread, wider loads"))
            moves.append((_with(cfg, num_warps=cfg.num_warps * 2), f"{what} → more warps to hide memory latency"))
        elif kind in ("mio_throttle", "short_scoreboard") and not p.flat:
            moves.append((_with(cfg, TILE_C=cfg.TILE_C // 2), f"{what} → squarer tiles, less shared-memory traffic in the layout change"))
    spread = (_with(cfg, num_warps=cfg.num_warps * 2), "more warps, fewer elements (registers) per thread")
    moves += _occupancy_moves(cfg, diag, smaller=_with(cfg, BLOCK=cfg.BLOCK // 2), second=spread)
    tail = _tail(diag)
    if tail:
        moves.append((_with(cfg, BLOCK=cfg.BLOCK // 2), f"tail effect: {tail[0]:.2f} waves → smaller blocks, more programs"))
    mem = diag.mem_sol_pct
    if diag.bound == "memory" and mem is not None:
        moves.append((_with(cfg, BLOCK=cfg.BLOCK * 2), f"memory-bound at {mem:.0f}% of SOL → more bytes per program"))
    return moves


def neighbours(family: str, cfg: Config) -> list[Config]:
    """One-knob changes of a configuration, in the order worth trying without a diagnosis."""
    if family == "pointwise":
        return [_with(cfg, BLOCK=cfg.BLOCK * 2), _with(cfg, BLOCK=cfg.BLOCK // 2),
                _with(cfg, num_warps=cfg.num_warps * 2), _with(cfg, num_warps=cfg.num_warps // 2),
                _with(cfg, TILE_C=cfg.TILE_C * 2), _with(cfg, TILE_C=cfg.TILE_C // 2),
                _with(cfg, INDEXED=1 - cfg.INDEXED)]
    if family == "rowwise":
        return [_with(cfg, num_warps=cfg.num_warps * 2), _with(cfg, num_warps=cfg.num_warps // 2),
                _with(cfg, TILE=cfg.TILE * 2), _with(cfg, TILE=cfg.TILE // 2),
                _with(cfg, LOOP_BLOCK=cfg.LOOP_BLOCK * 2), _with(cfg, LOOP_BLOCK=cfg.LOOP_BLOCK // 2),
                _with(cfg, ONE_PASS_MAX=cfg.ONE_PASS_MAX * 2), _with(cfg, ONE_PASS_MAX=cfg.ONE_PASS_MAX // 2)]
    return [_with(cfg, num_stages=cfg.num_stages + 1), _with(cfg, BLOCK_K=cfg.BLOCK_K * 2),
            _with(cfg, BLOCK_N=cfg.BLOCK_N * 2), _with(cfg, BLOCK_M=cfg.BLOCK_M * 2),
            _with(cfg, num_warps=cfg.num_warps * 2 if cfg.num_warps < 8 else cfg.num_warps // 2),
            _with(cfg, num_stages=cfg.num_stages - 1), _with(cfg, GROUP_M=cfg.GROUP_M * 2),
            _with(cfg, BLOCK_N=cfg.BLOCK_N // 2), _with(cfg, BLOCK_M=cfg.BLOCK_M // 2),
            _with(cfg, BLOCK_K=cfg.BLOCK_K // 2), _with(cfg, TF32X3=1 - cfg.TF32X3)]


# ------------------------------------------------------------------------------------------------
# the walk


def _pick(family: str, candidates: list[tuple[Config, str]], problem: Problem, on_gpu: bool,
          tried: set, n: int) -> list[Choice]:
    """The first n candidates that are valid and launch something not yet tried."""
    seen = set(tried)
    out = []
    for cfg, why in candidates:
        if len(out) >= n:
            break
        if not valid(family, cfg, problem, on_gpu):
            continue
        key = launch_key(family, cfg, problem, on_gpu)
        if key in seen:
            continue
        seen.add(key)
        out.append(Choice(family, cfg, why))
    return out


def first_round(problem: Problem, on_gpu: bool, n: int, tried: set) -> list[Choice]:
    """The default configuration, then its neighbours to fill the round."""
    family = problem.family
    cfg, why = default_config(problem, on_gpu)
    candidates = [(cfg, why)] + [(c, "neighbour of the default, to compare against it") for c in neighbours(family, cfg)]
    return _pick(family, candidates, problem, on_gpu, tried, n)


def next_round(problem: Problem, best: Config | None, diagnosis: Diagnosis | None, on_gpu: bool, n: int,
               tried: set, sms: int = H200_SMS) -> list[Choice]:
    """The next configurations from the best one so far, in the order the diagnosis ranks them."""
    family = problem.family
    if best is None:
        default, _ = default_config(problem, on_gpu)
        if family == "matmul" and default.TF32X3:
            # nothing has passed yet: exact products first, in case the tf32x3 products were what failed
            exact = (_with(default, TF32X3=0), "exact fp32 products (ieee): no tf32x3 kernel has passed")
            return _pick(family, [exact] + [(c, "neighbour of the default") for c in neighbours(family, default)],
                         problem, on_gpu, tried, n)
        return first_round(problem, on_gpu, n, tried)
    moves: list[tuple[Config, str]] = []
    if diagnosis:
        if family == "matmul":
            moves = _matmul_moves(best, problem, diagnosis, sms)
        elif family == "rowwise":
            moves = _row_moves(best, problem, diagnosis)
        else:
            moves = _pointwise_moves(best, problem, diagnosis)
    fallback = "neighbour of the best so far" + ("; the diagnosis suggested nothing new" if diagnosis else " (no diagnosis)")
    moves += [(c, fallback) for c in neighbours(family, best)]
    return _pick(family, moves, problem, on_gpu, tried, n)
