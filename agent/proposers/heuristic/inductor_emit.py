"""Writes an Inductor seed (inductor.py) as a standalone candidate, and walks its launch configurations.

    seed = capture("tasks/softmax.py")
    source = emit_candidate(seed, SeedConfig())          # imports torch, triton, triton.language only
    choices = seed_first_round(seed, on_gpu=True, n=2, tried=set())
    later = seed_next_round(seed, best_config, diagnosis, n=2, tried=...)

The candidate holds Inductor's `@triton.jit` kernels as they were generated (one copy per plan:
Inductor bakes the sizes into each kernel), the triton_helpers functions they call (taken from the
installed torch's own source, renamed `ih_<name>`), one launcher per plan (Inductor's `call(args)`
with `empty_strided_*` as `torch.empty_strided`, `reinterpret_tensor` as `torch.as_strided`, and
`kernel.run(...)` as `kernel[grid](..., XBLOCK=..., num_warps=..., num_stages=...)` with the grid
computed here from Inductor's grid type), and a ModelNew that holds the reference's parameters under
their names and dispatches on its inputs' shapes.

The walkable knobs are per kernel of the benchmark plan: which of Inductor's configurations
(the list its autotuner would time: its block sizes), and num_warps / num_stages over it; and, for a
seed whose kernels multiply fp32 with `tl.dot` (Inductor's matmul templates), the precision of those
products for all of them: Inductor's exact ones or three TF32 passes (`tf32x3`, a note's last token); and
the tile of a matmul template (`t1`.. for TEMPLATE_TILES, where template_geometry says it can change). Block
sizes outside Inductor's list are not walked on purpose: Inductor drops a mask where every size in
its list divides the extent (`xmask = tl.full(..., True)`), so another XBLOCK could read past the end. A note reads
`inductor k0=c0 k1=c2,w8: why`; `parse_seed_note` reads it back so no configuration is proposed twice.
"""

from __future__ import annotations

import ast
import functools
import re
from dataclasses import dataclass

from agent.proposers.heuristic.configs import TF32X3_WHY
from agent.proposers.heuristic.inductor import KernelSeed, LaunchConfig, Plan, Seed, _Unseedable

SEED_FAMILY = "inductor"
WARPS = (1, 2, 4, 8, 16, 32)
STAGES = (1, 2, 3, 4, 5)
# Tiles a matmul template may be launched at besides Inductor's own: (BLOCK_M, BLOCK_N, BLOCK_K, num_warps,
# num_stages), tile t is TEMPLATE_TILES[t - 1]. NOTE: the first measured fastest for fp32 (tf32x3) at four
# KernelBench GEMM shapes on the H200 (benchmarks/heuristic.md); the others are its one-knob neighbours.
TEMPLATE_TILES = ((128, 64, 32, 4, 4), (128, 128, 32, 8, 3), (64, 128, 32, 4, 4), (64, 64, 32, 4, 4),
                  (128, 64, 64, 4, 3))


@dataclass(frozen=True)
class KernelChoice:
    """How one benchmark kernel is launched: Inductor's configuration `config`, optionally overridden."""

    config: int = 0          # index into KernelSeed.configs
    num_warps: int = 0       # 0: the configuration's own (or the tile's)
    num_stages: int = 0      # 0: the configuration's own (or the tile's)
    tile: int = 0            # a matmul template's tile: 0 Inductor's, t TEMPLATE_TILES[t - 1]

    def describe(self) -> str:
        text = f"c{self.config}"
        if self.num_warps:
            text += f",w{self.num_warps}"
        if self.num_stages:
            text += f",s{self.num_stages}"
        if self.tile:
            text += f",t{self.tile}"
        return text


@dataclass(frozen=True)
class SeedConfig:
    """One KernelChoice per kernel of the benchmark plan (missing ones: Inductor's first configuration).

    tf32x3: every fp32 `tl.dot` of every plan runs as three TF32 tensor-core passes (input_precision="tf32x3")
    instead of Inductor's exact products (its ALLOW_TF32=False): TF32X3_WHY says why.
    """

    kernels: tuple[KernelChoice, ...] = ()
    tf32x3: bool = False

    def choice(self, i: int) -> KernelChoice:
        return self.kernels[i] if i < len(self.kernels) else KernelChoice()

    def describe(self, count: int | None = None) -> str:
        count = len(self.kernels) if count is None else count
        text = " ".join(f"k{i}={self.choice(i).describe()}" for i in range(max(count, 1)))
        return text + (" tf32x3" if self.tf32x3 else "")

    def normalised(self, count: int) -> "SeedConfig":
        return SeedConfig(tuple(self.choice(i) for i in range(count)), self.tf32x3)




@dataclass(frozen=True)
class SeedChoice:
    config: SeedConfig
    why: str
    count: int               # kernels in the benchmark plan

    @property
    def note(self) -> str:
        return f"{SEED_FAMILY} {self.config.describe(self.count)}: {self.why}"


_CHOICE = re.compile(r"k(\d+)=c(\d+)(?:,w(\d+))?(?:,s(\d+))?(?:,t(\d+))?$")


def parse_seed_note(note: str) -> SeedConfig | None:
    """The SeedConfig a note names, or None for a note that is not a seed's."""
    head = note.split(":", 1)[0].split()
    if not head or head[0] != SEED_FAMILY:
        return None
    choices: dict[int, KernelChoice] = {}
    tf32x3 = "tf32x3" in head[1:]
    for token in head[1:]:
        if token == "tf32x3":
            continue
        m = _CHOICE.match(token)
        if not m:
            return None
        choices[int(m.group(1))] = KernelChoice(int(m.group(2)), int(m.group(3) or 0), int(m.group(4) or 0),
                                                int(m.group(5) or 0))
    if not choices:
        return None
    return SeedConfig(tuple(choices.get(i, KernelChoice()) for i in range(max(choices) + 1)), tf32x3)


def resolve(kernel: KernelSeed, choice: KernelChoice) -> LaunchConfig:
    """The launch configuration a choice means for a kernel (an out-of-range index: Inductor's first).

    A template's tile is part of it (its block sizes among the kwargs, which the launch passes only where the
    kernel takes them as parameters): a tile a kernel cannot take (template_geometry) is Inductor's own.
    """
    base = kernel.configs[choice.config] if choice.config < len(kernel.configs) else kernel.configs[0]
    warps, stages, kwargs = base.num_warps, base.num_stages, base.kwargs
    tile = _tile(kernel, choice)
    if tile is not None:
        bm, bn, bk, warps, stages = tile
        kwargs = kwargs + (("BLOCK_M", bm), ("BLOCK_N", bn), ("BLOCK_K", bk))
    return LaunchConfig(kwargs=kwargs, num_warps=choice.num_warps or warps, num_stages=choice.num_stages or stages)


@dataclass(frozen=True)
class TemplateGeometry:
    """What a matmul template kernel was generated for (read from its body: Inductor bakes sizes in)."""

    m: int
    n: int
    k: int
    block: tuple[int, int, int]      # Inductor's BLOCK_M, BLOCK_N, BLOCK_K
    even_k: bool                     # True: no mask on K, so BLOCK_K must divide K

    def takes(self, tile: tuple) -> bool:
        """Whether the kernel can run at a tile other than its own: K unmasked needs BLOCK_K | K, and the
        template's contiguity hints on its wrapped rows and columns (tl.max_contiguous of rm % M) hold only
        for tiles that divide M and N."""
        bm, bn, bk = tile[:3]
        return (not self.even_k or self.k % bk == 0) and self.m % bm == 0 and self.n % bn == 0 \
            and tile[:3] != self.block

    def programs(self, bm: int, bn: int) -> int:
        return -(-self.m // bm) * -(-self.n // bn)


def template_geometry(kernel: KernelSeed) -> TemplateGeometry | None:
    """A matmul template's sizes and tile, or None where the kernel is not one whose tile can change.

    Inductor's mm/bmm templates (torch/_inductor/kernel/templates/triton_mm.py.jinja, triton_bmm) declare
    `BLOCK_M : tl.constexpr = 64` and friends in the body, assign the static sizes `M = 1024` etc., mask
    their stores on M and N and wrap their loads (rm % M), so any tile is correct there, and the grid is
    cdiv(M, BLOCK_M) * cdiv(N, BLOCK_N) programs (checked against the launch when the candidate is written).
    Anything else (a persistent or TMA template, sizes that are not literals) keeps Inductor's tile.
    """
    return _geometry(kernel.grid_type, kernel.source)


@functools.lru_cache(maxsize=256)
def _geometry(grid_type: str, source: str) -> TemplateGeometry | None:
    """template_geometry, once per kernel source (every launch key of the walk asks for it)."""
    if grid_type != "FixedGrid" or "tl.dot(" not in source:
        return None
    fn = next((n for n in ast.parse(source).body if isinstance(n, ast.FunctionDef)), None)
    if fn is None:
        return None
    consts, sizes = {}, {}
    for stmt in fn.body:
        if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name) \
                and isinstance(stmt.value, ast.Constant) and ast.unparse(stmt.annotation) == "tl.constexpr":
            consts[stmt.target.id] = stmt.value.value
        elif isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name) \
                and isinstance(stmt.value, ast.Constant) and type(stmt.value.value) is int:
            sizes.setdefault(stmt.targets[0].id, stmt.value.value)
    block = tuple(consts.get(b) for b in ("BLOCK_M", "BLOCK_N", "BLOCK_K"))
    if not all(type(b) is int for b in block) or not all(type(sizes.get(d)) is int for d in "MNK") \
            or "NUM_SMS" in consts or "TMA" in source:
        return None
    return TemplateGeometry(sizes["M"], sizes["N"], sizes["K"], block, consts.get("EVEN_K") is True)


def _tile(kernel: KernelSeed, choice: KernelChoice) -> tuple | None:
    if not choice.tile or choice.tile > len(TEMPLATE_TILES):
        return None
    geometry = template_geometry(kernel)
    tile = TEMPLATE_TILES[choice.tile - 1]
    return tile if geometry is not None and geometry.takes(tile) else None


# -- the walk --------------------------------------------------------------------------------------------------

def launch_key(seed: Seed, config: SeedConfig) -> tuple:
    """What a configuration launches: two notes that launch the same thing are one configuration."""
    kernels = tuple(resolve(k, config.choice(i)) for i, k in enumerate(seed.benchmark.kernels))
    return kernels + ((config.tf32x3 and seed.fp32_dots),)


def seed_first_round(seed: Seed, on_gpu: bool, n: int, tried: set) -> list[SeedChoice]:
    """Inductor's first configuration for every kernel; on a GPU, with n > 1, its next candidates too."""
    count = len(seed.benchmark.kernels)
    first = f"Inductor's first configuration for each kernel (torch {seed.torch_version}, generated on {seed.device})"
    out = [SeedChoice(SeedConfig(), first, count)]
    if on_gpu and seed.fp32_dots:
        # NOTE: first on a GPU: at KernelBench's fp32 GEMM shapes three TF32 passes ran 1.3x faster than the
        # FMA units' exact products (benchmarks/heuristic.md); Inductor's own kernel comes after
        out.insert(0, SeedChoice(SeedConfig(tf32x3=True), f"{first}; {TF32X3_WHY}", count))
        def first_tile(kernel: KernelSeed) -> int:
            geometry = template_geometry(kernel)
            return 1 if geometry is not None and geometry.takes(TEMPLATE_TILES[0]) else 0

        tiled = SeedConfig(tuple(KernelChoice(tile=first_tile(k)) for k in seed.benchmark.kernels), tf32x3=True)
        if tiled != SeedConfig(tuple(KernelChoice() for _ in seed.benchmark.kernels), tf32x3=True):
            bm, bn, bk, w, st = TEMPLATE_TILES[0]
            out.insert(0, SeedChoice(tiled, f"Inductor's kernels, its matmul templates at {bm}x{bn}x{bk} on {w} warps "
                                            f"with {st} stages; {TF32X3_WHY}", count))
    if on_gpu:
        for c in range(1, max(len(k.configs) for k in seed.benchmark.kernels)):
            cfg = SeedConfig(tuple(KernelChoice(min(c, len(k.configs) - 1)) for k in seed.benchmark.kernels))
            out.append(SeedChoice(cfg, f"Inductor's autotuning candidate {c} for each kernel", count))
    return _pick(seed, out, tried, n)


def seed_next_round(seed: Seed, best: SeedConfig, diagnosis: dict | None, n: int, tried: set) -> list[SeedChoice]:
    """Moves from the best seed configuration, the diagnosis's most pressing first, then Inductor's other candidates."""
    from agent.proposers.heuristic.configs import _register_pressure, stalls

    count = len(seed.benchmark.kernels)
    best = best.normalised(count)
    moves: list[SeedChoice] = []

    def move(i: int, why: str, **changes) -> None:
        old = best.choice(i)
        new = KernelChoice(changes.get("config", old.config), changes.get("num_warps", old.num_warps),
                           changes.get("num_stages", old.num_stages), changes.get("tile", old.tile))
        kernels = list(best.kernels)
        kernels[i] = new
        moves.append(SeedChoice(SeedConfig(tuple(kernels), best.tf32x3), why, count))

    top = stalls(diagnosis)
    for i, kernel in enumerate(seed.benchmark.kernels):
        now = resolve(kernel, best.choice(i))
        if diagnosis and _register_pressure(diagnosis) and now.num_warps < WARPS[-1]:
            move(i, f"k{i}: occupancy limited by registers: more warps, fewer values per thread",
                 num_warps=now.num_warps * 2)
        if top and top[0][0] == "long_scoreboard":
            if now.num_stages < STAGES[-1]:
                move(i, f"k{i}: long-scoreboard stalls ({top[0][1]:.0f}%): deeper pipelining",
                     num_stages=now.num_stages + 1)
            if now.num_warps < WARPS[-1]:
                move(i, f"k{i}: long-scoreboard stalls ({top[0][1]:.0f}%): more warps in flight",
                     num_warps=now.num_warps * 2)
        if top and top[0][0] == "barrier" and now.num_warps > WARPS[0]:
            move(i, f"k{i}: barrier stalls ({top[0][1]:.0f}%): fewer warps to synchronise",
                 num_warps=now.num_warps // 2)
    fallback = "neighbour of the best so far" + ("; the diagnosis suggested nothing new" if diagnosis else " (no diagnosis)")
    for i, kernel in enumerate(seed.benchmark.kernels):
        now = resolve(kernel, best.choice(i))
        for c in range(len(kernel.configs)):
            if c != best.choice(i).config:
                move(i, f"k{i}: Inductor's candidate {c} ({kernel.configs[c].describe()}); {fallback}", config=c,
                     num_warps=0, num_stages=0)
        if now.num_warps > WARPS[0]:
            move(i, f"k{i}: half the warps; {fallback}", num_warps=now.num_warps // 2)
        if now.num_warps < WARPS[-1]:
            move(i, f"k{i}: twice the warps; {fallback}", num_warps=now.num_warps * 2)
        if now.num_stages < STAGES[-1]:
            move(i, f"k{i}: one more stage; {fallback}", num_stages=now.num_stages + 1)
        geometry = template_geometry(kernel)
        for t, tile in enumerate(TEMPLATE_TILES, start=1):
            if geometry is not None and geometry.takes(tile) and t != best.choice(i).tile:
                move(i, f"k{i}: the matmul template at {tile[0]}x{tile[1]}x{tile[2]} on {tile[3]} warps with "
                        f"{tile[4]} stages; {fallback}", tile=t, num_warps=0, num_stages=0)
        if geometry is not None and best.choice(i).tile:
            move(i, f"k{i}: the matmul template at Inductor's own tile; {fallback}", tile=0, num_warps=0, num_stages=0)
    if seed.fp32_dots:
        flipped = SeedConfig(best.kernels, not best.tf32x3)
        moves.append(SeedChoice(flipped, (TF32X3_WHY if flipped.tf32x3 else "exact fp32 products (Inductor's)")
                                + f"; {fallback}", count))
    return _pick(seed, moves, tried, n)


def _pick(seed: Seed, choices: list[SeedChoice], tried: set, n: int) -> list[SeedChoice]:
    out, seen = [], set(tried)
    for choice in choices:
        key = launch_key(seed, choice.config)
        if key in seen:
            continue
        seen.add(key)
        out.append(choice)
        if len(out) >= n:
            break
    return out


# -- the candidate ---------------------------------------------------------------------------------------------

def emit_candidate(seed: Seed, config: SeedConfig = SeedConfig(), note: str = "") -> str:
    """A standalone ModelNew source for a seed at a configuration (raises _Unseedable on what it cannot write)."""
    parts = [_header(seed, config, note)]
    parts += [seed.helpers[name] + "\n" for name in sorted(seed.helpers)]
    table = []
    for p, plan in enumerate(seed.plans):
        is_benchmark = p == len(seed.plans) - 1
        names = {k.name: f"{k.name}_p{p}" for k in plan.kernels}
        choices = {k.name: (config.choice(i) if is_benchmark else KernelChoice()) for i, k in enumerate(plan.kernels)}
        for k in plan.kernels:
            parts.append(_kernel_source(k, names, p, config.tf32x3 and seed.fp32_dots, _tile(k, choices[k.name]))
                         + "\n")
        parts.append(_launcher(seed, plan, p, names, choices) + "\n")
        table.append(f"    {plan.shapes!r}: _launch_p{p},")
    parts.append("# Inductor specialises its kernels to the shapes it compiled: one launcher per set of input shapes.\n"
                 "_PLANS = {\n" + "\n".join(table) + "\n}\n")
    parts.append(_model(seed))
    return "\n".join(parts)


def _header(seed: Seed, config: SeedConfig, note: str) -> str:
    kernels = "\n".join(f"  {k.name}: {k.heuristic}, grid {k.grid_type}" for k in seed.benchmark.kernels)
    shapes = "; ".join(str(p.shapes) for p in seed.plans)
    return "\n".join([
        f'"""{seed.task_name}: the Triton kernels torch.compile (Inductor, torch {seed.torch_version}) generates for this',
        "reference, made standalone by kgen's heuristic proposer (no torch._inductor at run time).",
        "",
        f"Generated on {seed.device}; plans for input shapes {shapes}.",
        "Benchmark kernels:",
        kernels,
        f"Configuration: {note or seed_note_default(seed, config)}",
        '"""',
        "",
        "import torch",
        "import torch.nn as nn",
        "import triton",
        "import triton.language as tl",
        "from triton.language import math as tl_math",
        "from triton.language.extra import libdevice",
        "",
    ])


def seed_note_default(seed: Seed, config: SeedConfig) -> str:
    return f"{SEED_FAMILY} {config.describe(len(seed.benchmark.kernels))}"


class _Rename(ast.NodeTransformer):
    def __init__(self, names: dict[str, str]):
        self.names = names

    def visit_Name(self, node):
        if node.id in self.names:
            return ast.copy_location(ast.Name(id=self.names[node.id], ctx=node.ctx), node)
        return node

    def visit_FunctionDef(self, node):
        self.generic_visit(node)
        node.name = self.names.get(node.name, node.name)
        return node


class _SplitTF32(ast.NodeTransformer):
    """tl.dot(a, b, ..., allow_tf32=X) -> tl.dot(a, b, ..., input_precision="tf32x3")."""

    def visit_Call(self, node):
        self.generic_visit(node)
        func = node.func
        if isinstance(func, ast.Attribute) and func.attr == "dot" and isinstance(func.value, ast.Name) \
                and func.value.id == "tl":
            node.keywords = [k for k in node.keywords if k.arg not in ("allow_tf32", "input_precision")]
            node.keywords.append(ast.keyword(arg="input_precision", value=ast.Constant("tf32x3")))
        return node


class _Retile(ast.NodeTransformer):
    """`BLOCK_M : tl.constexpr = 64` -> the tile's value (the kernel's own declarations only)."""

    def __init__(self, tile: tuple):
        self.values = dict(zip(("BLOCK_M", "BLOCK_N", "BLOCK_K"), tile[:3]))

    def visit_AnnAssign(self, node):
        if isinstance(node.target, ast.Name) and node.target.id in self.values:
            node.value = ast.Constant(self.values[node.target.id])
        return node


def _kernel_source(kernel: KernelSeed, names: dict[str, str], p: int, tf32x3: bool = False,
                   tile: tuple | None = None) -> str:
    tree = ast.parse(kernel.source)
    local = dict(names)
    for fn in tree.body:     # the kernel, and combine functions of scans defined next to it
        if isinstance(fn, ast.FunctionDef):
            local.setdefault(fn.name, f"{fn.name}_p{p}")
    tree = _Rename(local).visit(tree)
    if tf32x3:
        tree = _SplitTF32().visit(tree)
    if tile is not None:
        tree = _Retile(tile).visit(tree)
    return ast.unparse(tree)


class _Launches(ast.NodeTransformer):
    """kernel.run(args) -> kernel_pN[grid](args, <constexprs>, num_warps=, num_stages=)."""

    def __init__(self, plan: Plan, names: dict[str, str], choices: dict[str, KernelChoice]):
        self.kernels = {k.name: k for k in plan.kernels}
        self.names, self.choices = names, choices

    def visit_Call(self, node):
        self.generic_visit(node)
        name = getattr(node, "_kgen_kernel", None)
        if name is None:
            return node
        kernel = self.kernels[name]
        cfg = resolve(kernel, self.choices[name])
        args = list(node.args)
        if kernel.grid_type == "FixedGrid":
            # a template's launch ends with its grid: run(arg_A, arg_B, out, grid_0, grid_1, grid_2)
            if len(args) != len(kernel.params) + 3:
                raise _Unseedable(f"template {name} is launched with {len(args)} arguments, expected "
                                  f"{len(kernel.params)} and a grid")
            launch = ast.parse(f"{self.names[name]}[0]()").body[0].value
            grid = args[-3:]
            tile = _tile(kernel, self.choices[name])
            if tile is not None:
                geometry = template_geometry(kernel)
                first = grid[0].value if isinstance(grid[0], ast.Constant) else None
                if first != geometry.programs(*geometry.block[:2]):
                    raise _Unseedable(f"template {name}'s grid {ast.unparse(grid[0])} is not cdiv(M, BLOCK_M) * "
                                      "cdiv(N, BLOCK_N): its tile cannot change")
                grid = [ast.Constant(geometry.programs(tile[0], tile[1])), *grid[1:]]
            launch.func.slice = ast.Tuple(elts=grid, ctx=ast.Load())
            launch.args = args[:-3]
        else:
            values = {}
            for param, arg in zip(kernel.params, args):
                if isinstance(arg, ast.Constant) and isinstance(arg.value, int):
                    values[param] = arg.value
            grid = _grid(kernel, cfg, values)
            launch = ast.parse(f"{self.names[name]}[{grid!r}]()").body[0].value
            launch.args = args
        missing = [c for c in kernel.constexprs if c not in dict(cfg.kwargs)]
        if missing:
            raise _Unseedable(f"kernel {name}'s constexprs {missing} are in none of Inductor's configurations")
        launch.keywords = [ast.keyword(arg=k, value=ast.Constant(v)) for k, v in cfg.kwargs if k in kernel.constexprs]
        launch.keywords += [ast.keyword(arg="num_warps", value=ast.Constant(cfg.num_warps)),
                            ast.keyword(arg="num_stages", value=ast.Constant(cfg.num_stages))]
        return ast.copy_location(launch, node)


def _grid(kernel: KernelSeed, cfg: LaunchConfig, numels: dict[str, int]) -> tuple[int, int, int]:
    """The launch grid Inductor's grid type gives at these sizes and block sizes."""
    from torch._inductor.runtime.triton_heuristics import GridExpr

    meta = dict(cfg.kwargs)
    grid = GridExpr.from_meta({**kernel.inductor_meta, "grid_type": kernel.grid_type}, meta)
    scope = {**meta}
    for dim in ("xnumel", "ynumel", "znumel", "r0_numel", "r1_numel"):
        if dim in kernel.params and dim not in numels:
            raise _Unseedable(f"kernel {kernel.name}'s {dim} is not a constant at its launch (dynamic shapes)")
    scope.update(numels)
    try:
        return tuple(int(g) for g in grid.eval_slow(scope))
    except Exception as exc:
        raise _Unseedable(f"kernel {kernel.name}'s {kernel.grid_type} grid did not evaluate ({exc})") from None


def _launcher(seed: Seed, plan: Plan, p: int, names: dict[str, str], choices: dict[str, KernelChoice]) -> str:
    body = [_Launches(plan, names, choices).visit(ast.fix_missing_locations(_copy(s))) for s in plan.body]
    args = ", ".join(plan.graph_inputs)
    tensor_args = [n for (kind, _), n in zip(seed.inputs, plan.graph_inputs)]
    lines = [f"def _launch_p{p}({args}):",
             f'    """Inductor\'s call() for inputs {plan.shapes}: allocations, views and kernel launches only."""',
             f"    _device = {tensor_args[-1]}.device"]
    for stmt in body:
        text = ast.unparse(ast.fix_missing_locations(stmt))
        lines += ["    " + line for line in text.splitlines()]
    return "\n".join(lines) + "\n"


def _copy(stmt: ast.stmt) -> ast.stmt:
    """A deep copy that keeps the launch marks (copy.deepcopy keeps instance attributes too)."""
    import copy

    return copy.deepcopy(stmt)


def _model(seed: Seed) -> str:
    sig = f", {seed.init_signature}" if seed.init_signature else ""
    operands = []
    for kind, target in seed.inputs:
        if kind == "param":
            operands.append(f"self.get_parameter({target!r})")
        elif kind == "buffer":
            operands.append(f"self.get_buffer({target!r})")
        else:
            operands.append(target)
    shapes = ", ".join(f"tuple({a}.shape)" for a in seed.forward_args) + ("," if len(seed.forward_args) == 1 else "")
    result = "out[0]" if seed.single_output else "tuple(out)"
    return "\n".join([
        "class ModelNew(nn.Module):",
        f'    """{seed.task_name} through Inductor\'s kernels; holds the reference\'s parameters under the same names."""',
        "",
        f"    def __init__(self{sig}):",
        "        super().__init__()",
        *[f"        {line}" for line in seed.init_lines],
        "",
        f"    def forward(self, {', '.join(seed.forward_args)}):",
        f"        shapes = ({shapes})",
        "        launch = _PLANS.get(shapes)",
        "        if launch is None:",
        "            raise ValueError(f'these kernels were generated for input shapes {list(_PLANS)}, not {shapes}')",
        f"        out = launch({', '.join(operands)})",
        f"        return {result}",
        "",
    ])


# -- the LLM prompt's seed section -----------------------------------------------------------------------------

PROMPT_SEED_ENV = "KGEN_INDUCTOR_SEED_PROMPT"   # "1": the LLM's first round shows what torch.compile generates


def prompt_section(task_source: str, max_chars: int = 8000) -> str:
    """'This is what torch.compile generates for this op ... beat it', or "" when there is no seed or no room.

    The task's source is written to a temporary file and captured like a task file (Inductor runs, ~10-30 s
    on a CPU); the section holds the benchmark plan's kernels and their launches, as the seeded candidate has
    them, so an LLM starts from Inductor's fusion and block sizes instead of from nothing.
    """
    import tempfile
    from pathlib import Path

    from agent.proposers.heuristic.inductor import capture

    with tempfile.TemporaryDirectory(prefix="kgen-seed-") as tmp:
        path = Path(tmp) / "task.py"
        path.write_text(task_source)
        seed = capture(path)
    if not isinstance(seed, Seed):
        return ""
    plan, p = seed.benchmark, len(seed.plans) - 1
    names = {k.name: f"{k.name}_p{p}" for k in plan.kernels}
    try:
        kernels = "\n\n".join(_kernel_source(k, names, p) for k in plan.kernels)
        launcher = _launcher(seed, plan, p, names, {k.name: KernelChoice() for k in plan.kernels})
    except _Unseedable:
        return ""
    helpers = ", ".join(sorted(seed.helpers)) or "none"
    text = "\n".join([
        "## What torch.compile generates for this op",
        "",
        f"Inductor (torch {seed.torch_version}) writes these Triton kernels for the benchmark inputs "
        f"{plan.shapes} (its helper functions, not shown: {helpers}); torch.compile is one of the baselines, "
        "so a candidate must beat this. Keep what is good in it (the fusion), and change what the analysis "
        "and the profile say costs time (block sizes, warps, a second pass over memory, the launch count).",
        "",
        "```python",
        kernels,
        "",
        launcher.rstrip(),
        "```",
    ])
    return text if len(text) <= max_chars else ""
