"""Turn ncu's counters into a ranked diagnosis: what bounds the kernel and what to change.

`diagnose(kernels, details, roofline)` takes the launches `parse_raw_csv`
found (and, optionally, `parse_details_csv`'s sections and rules, and a
`Roofline`), picks the kernel that takes most of the time, and says:

1. the bound: memory or compute when the busier of the two is at >= 60% of
   its peak (speed-of-light), latency when neither is;
2. the top warp-stall reasons by share of warp cycles, each with the fix it
   usually calls for;
3. shared-memory bank conflicts, only when they are significant (the padded
   transpose still shows 0.15 M conflicts, 0.07 per shared load: noise);
4. occupancy and what limits it, waves and the tail effect, registers,
   spills, tensor-core use; then ncu's own advice and the other kernels.

Try it on a captured profile: `python -m profiler.ncu RAW.csv [DETAILS.csv]`.
"""

from __future__ import annotations

import math

from profiler.records import Diagnosis, KernelMetrics, Occupancy, Roofline, Rule, Stall

SOL_BUSY_PCT = 60.0         # below this on both memory and compute, the kernel is latency-bound
TOP_STALLS = 3
MIN_STALL_SHARE = 0.05      # reasons below 5% of warp cycles are not worth a line
# Bank conflicts are worth fixing at >= 0.5 extra shared wavefronts per shared load (a 2-way
# conflict on every other load) or, where shared loads are not counted (ldmatrix, wgmma
# operands), at >= 10% of the SM-cycles the kernel spanned.
CONFLICTS_PER_SHARED_LOAD = 0.5
CONFLICTS_PER_SM_CYCLE = 0.10

_PAD_OR_SWIZZLE = ("shared-memory bank conflicts: pad each shared row by one 4-byte word "
                   "(tile[32][33]) or XOR-swizzle the column index")

# What each warp-stall reason usually calls for.
STALL_FIXES = {
    "long_scoreboard": ("waiting on global/local memory (L1TEX): 16-byte vector loads, more loads in "
                        "flight (unroll; software pipelining / more stages), fewer dependent loads"),
    "short_scoreboard": ("waiting on shared memory or special math (exp, rsqrt, div): keep reductions in "
                         "registers / warp shuffles, fewer shared round trips, exp2 with a folded log2(e)"),
    "mio_throttle": ("MIO queue full (shared memory, shuffles, special math): fewer, wider (16-byte) "
                     "shared accesses, fewer shuffles and atomics"),
    "lg_throttle": ("global/local load-store queue full: fewer, wider global accesses (16-byte vectors), "
                    "no register spills to local memory"),
    "barrier": ("waiting at block-wide syncs: fewer __syncthreads / cross-warp reductions, warp-level "
                "reductions, uniform work per warp, more independent work between barriers"),
    "math_pipe_throttle": ("a math pipe is saturated, the kernel is compute-bound: move the arithmetic to "
                           "tensor cores (tl.dot / mma), lower precision where the tolerance allows"),
    "gmma": ("waiting on wgmma (Hopper tensor cores): deepen the wgmma pipeline (more stages, more "
             "wgmma groups in flight before waiting)"),
    "not_selected": "eligible but another warp issued: healthy, nothing to fix",
    "selected": "issuing: not a stall",
    "wait": ("fixed-latency dependencies: more independent instructions between dependent ones "
             "(unroll, interleave accumulators)"),
    "dispatch_stall": "the dispatcher held an issued instruction: usually pipeline contention; rarely the lever",
    "drain": ("waiting for stores to drain at exit: fewer, wider stores, or more work per block so the "
              "exit is a smaller part of it"),
    "no_instruction": ("instruction fetch misses: less unrolling / smaller code, fewer distinct kernels "
                       "back to back"),
    "branch_resolving": "resolving branch targets: fewer divergent branches, masks/predication instead",
    "imc_miss": "constant-cache misses: fewer distinct constants or indexed constant loads",
    "membar": "memory fences: fewer __threadfence / strongly ordered atomics",
    "sleeping": "warps asleep (nanosleep, spin waits): avoid spin-waiting",
    "tex_throttle": "texture/read-only path queue full: fewer, wider read-only loads",
    "misc": "miscellaneous stalls: rarely actionable",
}

# ncu rules that add nothing here: CPIStall repeats the top stall. (HighPipeUtilization's
# "all compute pipelines are under-utilized" is dropped too: the bound line says it, and its
# estimated speedup, 94-97% on memory- and latency-bound kernels, would top the list.)
_SKIP_RULES = {"CPIStall"}


def no_tensor_cores_advice(roofline: Roofline) -> str:
    """What to do about a compute-bound task whose kernel leaves the tensor cores idle."""
    if roofline.dtype in ("float32", "fp32"):
        # NOTE: exact fp32 products run on the FMA pipe even through tl.dot(input_precision="ieee");
        # the tensor cores need TF32 (~1e-3 relative error), which a 1e-4 tolerance rejects.
        return ("Compute-bound on the FMA pipe, tensor cores unused: exact fp32 cannot use them; TF32 "
                "would (about 1e-3 relative error: only if the task's tolerance allows), else raise "
                "FMA efficiency (larger register tiles, fewer loads per FMA)")
    return "Compute-bound without tensor cores: a tl.dot / mma formulation would raise the roof"


def diagnose(kernels: list[KernelMetrics], details=None, roofline: Roofline | None = None) -> Diagnosis:
    """The diagnosis of the dominant kernel (most total time by name), the others listed."""
    if not kernels:
        d = Diagnosis(bound=roofline.roof if roofline else "unknown", source="ncu", roofline=roofline)
        d.notes.append("no kernel launches to diagnose")
        return d
    kernels = sorted(kernels, key=lambda k: -(k.time_share or 0))
    by_name: dict[str, float] = {}
    for k in kernels:
        by_name[k.name] = by_name.get(k.name, 0.0) + (k.duration_us or 0.0)
    dominant = max(by_name, key=by_name.get)
    main = max((k for k in kernels if k.name == dominant), key=lambda k: k.duration_us or 0)
    det = _details_for(main, details or [])
    total = sum(k.duration_us or 0 for k in kernels)

    d = Diagnosis(bound=bound_of(main), source="ncu", kernel=main.name, duration_us=by_name[dominant] or None,
                  total_us=total or None, sm_sol_pct=main.sm_sol_pct, mem_sol_pct=main.mem_sol_pct,
                  mem_unit=_busiest_memory(main), kernels=kernels, roofline=roofline,
                  registers=main.registers_per_thread, waves_per_sm=main.waves_per_sm,
                  tensor_core_pct=main.tensor_pct, bank_conflicts=main.bank_conflicts)
    launches = sum(1 for k in kernels if k.name == dominant)
    if launches > 1:
        d.notes.append(f"{main.name} ran {launches} times; details are from its longest launch")

    d.bank_conflicts_significant = conflicts_significant(main)
    d.top_stalls = top_stalls(main, d.bank_conflicts_significant)
    d.occupancy = occupancy_of(main, det)
    d.spills = spills_of(main, det)
    d.tail_effect = tail_effect(main.waves_per_sm)
    d.findings = findings(main, d)
    d.rules = useful_rules(det.rules if det else [], d.bound)
    if main.stalls == {}:
        d.notes.append("no warp-stall counters in this profile")
    return d


def bound_of(k: KernelMetrics) -> str:
    """memory / compute by the busier speed-of-light figure; latency when both are low."""
    sm, mem = k.sm_sol_pct, k.mem_sol_pct
    if sm is None and mem is None:
        return "unknown"
    sm, mem = sm or 0.0, mem or 0.0
    if max(sm, mem) < SOL_BUSY_PCT:
        return "latency"
    return "memory" if mem >= sm else "compute"


def _busiest_memory(k: KernelMetrics) -> str:
    units = {"DRAM": k.dram_pct, "L2": k.l2_pct, "L1/shared": k.l1_pct}
    units = {u: v for u, v in units.items() if v is not None}
    return max(units, key=units.get) if units else ""


def conflicts_significant(k: KernelMetrics) -> bool:
    """Enough shared-memory bank conflicts to be worth padding or swizzling for."""
    if not k.bank_conflicts:
        return False
    if k.shared_loads:
        return k.bank_conflicts / k.shared_loads >= CONFLICTS_PER_SHARED_LOAD
    cycles = k.sm_cycles
    return bool(cycles) and k.bank_conflicts / cycles >= CONFLICTS_PER_SM_CYCLE


def top_stalls(k: KernelMetrics, conflicts: bool, n: int = TOP_STALLS) -> list[Stall]:
    """The largest stall reasons by share of all warp cycles, each with its fix.

    share = ratio / sum of all ratios ("selected", the issuing cycle, included
    in the sum but never listed). mio_throttle and short_scoreboard get the
    padding/swizzle fix only when bank conflicts are significant.
    """
    total = sum(v for v in k.stalls.values() if v and v > 0)
    if not total:
        return []
    ranked = sorted(((v, r) for r, v in k.stalls.items() if r != "selected" and v and v > 0), reverse=True)
    out = []
    for ratio, reason in ranked[:n]:
        share = ratio / total
        if share < MIN_STALL_SHARE and out:
            break
        fix = STALL_FIXES.get(reason, "no standard fix known")
        if conflicts and reason in ("mio_throttle", "short_scoreboard"):
            fix = _PAD_OR_SWIZZLE
        out.append(Stall(reason=reason, ratio=ratio, share=share, fix=fix))
    return out


def occupancy_of(k: KernelMetrics, det) -> Occupancy | None:
    achieved, theoretical = k.achieved_occupancy_pct, k.theoretical_occupancy_pct
    if det is not None:
        achieved = achieved if achieved is not None else det.get("Occupancy", "Achieved Occupancy")
        theoretical = theoretical if theoretical is not None else det.get("Occupancy", "Theoretical Occupancy")
    if achieved is None and theoretical is None and not k.occupancy_limits:
        return None
    limiter = ""
    if k.occupancy_limits:
        least = min(k.occupancy_limits.values())
        limiter = " and ".join(r for r, v in k.occupancy_limits.items() if v == least)
    return Occupancy(achieved_pct=achieved, theoretical_pct=theoretical, limiter=limiter,
                     limits=dict(k.occupancy_limits))


def spills_of(k: KernelMetrics, det) -> int | None:
    if k.spills is not None:
        return k.spills
    if det is not None:
        value = det.get("Memory Workload Analysis", "Local Memory Spilling Requests")
        if value is not None:
            return int(value)
    return None


def tail_effect(waves: float | None) -> str:
    """A note when the grid leaves SMs idle: under one wave, or a thin last wave among few."""
    if waves is None or waves <= 0:
        return ""
    if waves < 1:
        return (f"the grid fills only {waves:.0%} of one wave: {1 - waves:.0%} of the SMs idle; "
                f"smaller tiles, split-K or more blocks")
    full, last = math.floor(waves), waves - math.floor(waves)
    if 0 < last < 0.5 and waves < 8:
        idle = (1 - last) / math.ceil(waves)
        return (f"{full} full waves and a last one {last:.0%} full: ~{idle:.0%} of SM time idle in the tail; "
                f"resize tiles or use a persistent grid so the waves come out whole")
    return ""


def findings(k: KernelMetrics, d: Diagnosis) -> list[str]:
    """Advice beyond the stall list, most important first."""
    out = []
    if d.bank_conflicts_significant:
        per = (f"{k.bank_conflicts / k.shared_loads:.1f} extra wavefronts per shared load" if k.shared_loads
               else f"{k.bank_conflicts / (k.sm_cycles or 1):.0%} of SM-cycles")
        out.append(f"Shared-memory bank conflicts are significant ({per}): pad rows or XOR-swizzle")
    if d.spills:
        out.append(f"Register spills ({d.spills}): fewer live values (smaller tiles, fewer stages), "
                   f"or let more registers per thread (fewer warps)")
    if d.bound == "memory" and d.mem_unit == "DRAM" and k.dram_read_bytes is not None and d.roofline:
        moved = (k.dram_read_bytes or 0) + (k.dram_write_bytes or 0)
        if moved > 1.5 * d.roofline.bytes:
            out.append(f"DRAM traffic {moved / 1e6:.3g} MB is {moved / d.roofline.bytes:.1f}x the minimum "
                       f"{d.roofline.bytes / 1e6:.3g} MB: reuse loaded data (tiling, fusion), read each byte once")
    if (d.bound == "compute" and d.tensor_core_pct is not None and d.tensor_core_pct < 5
            and d.roofline is not None and d.roofline.flops > 0):
        out.append(no_tensor_cores_advice(d.roofline))
    occ = d.occupancy
    if (occ and occ.theoretical_pct is not None and occ.theoretical_pct < 50 and d.bound == "latency"):
        out.append(f"Low occupancy ({occ.theoretical_pct:.0f}% theoretical, {occ.limiter.replace('_', ' ')}-limited) "
                   f"with nothing near peak: more warps per SM (fewer registers or less shared memory per block)")
    return out


def useful_rules(rules: list[Rule], bound: str) -> list[Rule]:
    """ncu's OPT advice for the dominant kernel, largest estimated speedup first."""
    out = []
    for r in rules:
        if r.type != "OPT" or r.name in _SKIP_RULES:
            continue
        if r.name == "HighPipeUtilization" and "under-utilized" in r.text:
            continue
        out.append(r)
    return sorted(out, key=lambda r: -(r.est_speedup_pct if r.est_speedup_pct is not None else -1))


def _details_for(k: KernelMetrics, details):
    """The details of the same launch (by ncu's ID and name), else of the same kernel name."""
    same = [d for d in details if d.name == k.name]
    for d in same:
        if d.id == k.id:
            return d
    return same[0] if same else None
