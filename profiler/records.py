"""The records the profiler hands to the rest of kgen.

`KernelMetrics` is one kernel launch as Nsight Compute (or, without it, the
torch profiler) saw it; `Diagnosis` is what the agent reads: what bounds the
kernel, its top stall reasons with the fix each usually calls for, occupancy,
waves, registers, spills, bank conflicts, tensor-core use, ncu's own advice,
and a roofline. `Diagnosis.to_text()` is the compact, ranked form an LLM
prompt shows (25 lines at most); `to_dict`/`from_dict` give the JSON form that
`kgen profile --json` prints and the store keeps.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass, field
from typing import Any

BOUNDS = (
    "memory",    # a memory unit (DRAM, L2 or L1/shared) is the busiest, at >= 60% of its peak
    "compute",   # an SM pipe (FMA, ALU, tensor) is the busiest, at >= 60% of its peak
    "latency",   # neither reaches 60%: warps wait (stalls, too few warps, tail) more than they work
    "unknown",   # no counters and no roofline to say
)

MAX_TEXT_LINES = 25


@dataclass
class KernelMetrics:
    """One kernel launch: the figures diagnosis uses, typed, plus every raw value."""

    name: str
    id: int = 0                                  # ncu's launch index within the profiled range
    duration_us: float | None = None             # gpu__time_duration.sum
    stream: str = ""                             # where it ran: "process/context/stream" as ncu numbers them
    time_share: float = 0.0                      # of all profiled kernels' time, 0..1
    block_size: int | None = None                # threads per block
    grid_size: int | None = None                 # blocks
    sm_sol_pct: float | None = None              # sm__throughput, % of peak
    mem_sol_pct: float | None = None             # gpu__compute_memory_throughput, % of peak
    dram_pct: float | None = None                # gpu__dram_throughput, % of peak
    l1_pct: float | None = None                  # l1tex__throughput, % of peak (active cycles)
    l2_pct: float | None = None                  # lts__throughput, % of peak
    achieved_occupancy_pct: float | None = None  # sm__warps_active, % of the SM's warp slots
    theoretical_occupancy_pct: float | None = None   # sm__maximum_warps_per_active_cycle_pct
    occupancy_limits: dict[str, int] = field(default_factory=dict)  # blocks/SM allowed by "registers", "shared_mem", "warps", "blocks"
    registers_per_thread: int | None = None
    shared_mem_bytes: int | None = None          # static + dynamic, per block
    waves_per_sm: float | None = None            # launch__waves_per_multiprocessor
    tensor_pct: float | None = None              # sm__pipe_tensor_op_hmma_cycles_active, % of peak
    lsu_pct: float | None = None                 # sm__inst_executed_pipe_lsu, % of peak
    bank_conflicts: int | None = None            # l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum
    global_loads: int | None = None              # warp-level global load instructions executed
    shared_loads: int | None = None              # warp-level shared load instructions executed
    dram_read_bytes: int | None = None
    dram_write_bytes: int | None = None
    warp_latency_cycles: float | None = None     # cycles between two issues of a warp
    sm_count: int | None = None
    clock_khz: float | None = None               # the SM clock the device reports, kHz
    spills: int | None = None                    # registers spilled (Triton metadata or ncu local-memory spill requests)
    stalls: dict[str, float] = field(default_factory=dict)   # reason -> warps stalled per issue (ratio)
    raw: dict[str, str] = field(default_factory=dict)        # every metric as ncu printed it

    @property
    def sm_cycles(self) -> float | None:
        """Duration x clock x SMs: the SM-cycles the launch spanned."""
        if self.duration_us is None or self.clock_khz is None or not self.sm_count:
            return None
        return self.duration_us * 1e-6 * self.clock_khz * 1e3 * self.sm_count


@dataclass
class Stall:
    """One warp-stall reason, ranked by its share of warp cycles."""

    reason: str             # ncu's name: "long_scoreboard", "mio_throttle", ...
    ratio: float            # warps stalled for this reason per issued instruction
    share: float            # ratio / sum of all reasons' ratios, 0..1
    fix: str                # what usually removes it


@dataclass
class Rule:
    """One of ncu's own rule results (its advice), as the details page gives it."""

    name: str                           # e.g. "CPIStall", "SOLBottleneck"
    type: str                           # "OPT" (optimisation), "WRN", "INF"
    text: str                           # the advice, full
    est_speedup_pct: float | None = None    # ncu's estimate, % of this kernel's time
    section: str = ""
    kernel: str = ""


@dataclass
class Occupancy:
    """Warps resident per SM, as a % of the SM's maximum."""

    achieved_pct: float | None
    theoretical_pct: float | None
    limiter: str = ""                   # what caps theoretical occupancy: "registers", "shared_mem", "warps", "blocks"
    limits: dict[str, int] = field(default_factory=dict)   # blocks/SM each resource allows


@dataclass
class Roofline:
    """Where a task sits on the roofline of one GPU."""

    gpu: str                    # the peaks row used, e.g. "H200"
    dtype: str                  # picks the compute roof
    flops: int
    bytes: int
    intensity: float            # FLOP per byte
    ridge: float                # FLOP per byte where the roofs meet
    roof: str                   # "memory" or "compute": the one that bounds an ideal kernel
    compute_tflops: float       # the compute roof used, TFLOP/s
    mem_gbps: float             # the memory roof used, GB/s
    sol_ms: float               # speed-of-light time, ms
    floor_ms: float             # the physics check's floor (sol with the margin, writes to L2 not counted), ms
    measured_ms: float | None = None
    sol_pct: float | None = None    # sol_ms / measured_ms x 100


@dataclass
class Diagnosis:
    """Why a kernel is as fast as it is, ranked, for a person or an LLM."""

    bound: str                                  # one of BOUNDS
    source: str                                 # "ncu" or "fallback" (torch profiler + compile metadata)
    kernel: str = ""                            # the dominant kernel, diagnosed in detail
    duration_us: float | None = None            # the dominant kernel's time
    total_us: float | None = None               # all profiled kernels' time
    sm_sol_pct: float | None = None
    mem_sol_pct: float | None = None
    mem_unit: str = ""                          # the busiest memory unit: "DRAM", "L2", "L1/shared"
    top_stalls: list[Stall] = field(default_factory=list)
    occupancy: Occupancy | None = None
    waves_per_sm: float | None = None
    tail_effect: str = ""                       # a note when the last wave leaves SMs idle, else ""
    registers: int | None = None                # per thread
    spills: int | None = None                   # None when unknown
    bank_conflicts: int | None = None
    bank_conflicts_significant: bool = False    # worth padding or swizzling for
    tensor_core_pct: float | None = None
    findings: list[str] = field(default_factory=list)   # ranked advice beyond the stalls
    rules: list[Rule] = field(default_factory=list)     # ncu's OPT advice for the dominant kernel, best first
    kernels: list[KernelMetrics] = field(default_factory=list)   # every launch, by time share
    roofline: Roofline | None = None
    notes: list[str] = field(default_factory=list)      # what was missing, and why
    passes_s: dict[str, float] = field(default_factory=dict)   # wall seconds of each profiling pass

    def to_dict(self, *, raw: bool = False) -> dict[str, Any]:
        """The JSON form; each kernel's raw counter dump only when `raw`."""
        data = dataclasses.asdict(self)
        if not raw:
            for k in data["kernels"]:
                k["raw"] = {}
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "Diagnosis":
        data = dict(data)
        data["top_stalls"] = [Stall(**s) for s in data.get("top_stalls") or []]
        data["rules"] = [Rule(**r) for r in data.get("rules") or []]
        data["kernels"] = [_build(KernelMetrics, k) for k in data.get("kernels") or []]
        if data.get("occupancy"):
            data["occupancy"] = Occupancy(**data["occupancy"])
        if data.get("roofline"):
            data["roofline"] = Roofline(**data["roofline"])
        return _build(cls, data)

    def to_text(self, max_lines: int = MAX_TEXT_LINES) -> str:
        """Compact and ranked: what bounds it, the top stalls with fixes, then the rest."""
        lines: list[str] = []
        head = f"Diagnosis ({self.source})"
        if self.kernel:
            head += f" of {self.kernel}"
            if self.duration_us is not None:
                share = f", {self.duration_us / self.total_us:.0%} of kernel time" if self.total_us else ""
                head += f": {self.duration_us:.1f} us{share}"
        lines.append(head)
        lines.append("Bound: " + self._bound_text())
        if self.roofline:
            r = self.roofline
            line = (f"Roofline ({r.gpu}, {r.dtype}): {r.flops / 1e9:.3g} GFLOP, {r.bytes / 1e6:.3g} MB, "
                    f"{r.intensity:.3g} FLOP/B vs ridge {r.ridge:.3g} -> {r.roof} roof; SOL {r.sol_ms * 1e3:.3g} us")
            if r.sol_pct is not None:
                line += f"; measured at {r.sol_pct:.0f}% of SOL"
            lines.append(line)
        if self.top_stalls:
            lines.append("Top stalls (share of warp cycles):")
            for i, s in enumerate(self.top_stalls, 1):
                lines.append(f"  {i}. {s.reason} {s.share:.0%} ({s.ratio:.3g} per issue): {s.fix}")
        lines.extend(f"- {f}" for f in self.findings)
        occ = self._occupancy_text()
        if occ:
            lines.append(occ)
        res = []
        if self.registers is not None:
            res.append(f"{self.registers} registers/thread")
        if self.spills is not None:
            res.append(f"{self.spills} spilled" if self.spills else "no spills")
        if self.waves_per_sm is not None:
            res.append(f"{self.waves_per_sm:.3g} waves/SM")
        if self.tensor_core_pct is not None:
            res.append(f"tensor cores {self.tensor_core_pct:.0f}% active" if self.tensor_core_pct >= 0.5
                       else "tensor cores unused")
        if self.bank_conflicts is not None:
            res.append(f"{_si(self.bank_conflicts)} shared bank conflicts"
                       + (" (significant)" if self.bank_conflicts_significant else " (not significant)"))
        if res:
            lines.append("Resources: " + ", ".join(res))
        if self.tail_effect:
            lines.append("Tail: " + self.tail_effect)
        opt = [r for r in self.rules if r.type == "OPT"]
        if opt:
            lines.append("ncu advice:")
            for r in opt[:3]:
                gain = f" (est. {r.est_speedup_pct:.0f}%)" if r.est_speedup_pct is not None else ""
                lines.append(f"  - {r.name}{gain}: {_shorten(r.text)}")
        others = self._other_kernels()
        if others:
            lines.append("Other kernels: " + others)
        for note in self.notes:
            lines.append(f"Note: {note}")
        if len(lines) > max_lines:
            dropped = len(lines) - (max_lines - 1)
            lines = lines[: max_lines - 1] + [f"(+{dropped} more lines in --json)"]
        return "\n".join(lines)

    def _bound_text(self) -> str:
        parts = []
        if self.mem_sol_pct is not None:
            parts.append(f"memory {self.mem_sol_pct:.0f}% of peak" + (f" ({self.mem_unit} busiest)" if self.mem_unit else ""))
        if self.sm_sol_pct is not None:
            parts.append(f"compute (SM) {self.sm_sol_pct:.0f}%")
        what = {
            "memory": "memory-bound",
            "compute": "compute-bound" + (" on tensor cores" if (self.tensor_core_pct or 0) >= 50 else ""),
            "latency": "latency-bound (neither memory nor compute near peak: warps wait)",
            "unknown": "unknown (no counters)",
        }.get(self.bound, self.bound)
        return what + (": " + ", ".join(parts) if parts else "")

    def _occupancy_text(self) -> str:
        o = self.occupancy
        if o is None or (o.achieved_pct is None and o.theoretical_pct is None):
            return ""
        text = "Occupancy: "
        if o.achieved_pct is not None:
            text += f"{o.achieved_pct:.0f}% achieved"
        if o.theoretical_pct is not None:
            text += (" of " if o.achieved_pct is not None else "") + f"{o.theoretical_pct:.0f}% theoretical"
        if o.limiter and (o.theoretical_pct is None or o.theoretical_pct < 100):
            text += f", limited by {o.limiter.replace('_', ' ')}"
            if o.limits:
                text += f" ({min(o.limits.values())} blocks/SM)"
        return text

    def _other_kernels(self) -> str:
        by_name: dict[str, list[float]] = {}
        for k in self.kernels:
            by_name.setdefault(k.name, []).append(k.time_share)
        rest = sorted(((sum(v), len(v), n) for n, v in by_name.items() if n != self.kernel), reverse=True)
        if not rest:
            return ""
        shown = [f"{_short_name(n)} {s:.0%}" + (f" ({c} launches)" if c > 1 else "") for s, c, n in rest[:3]]
        if len(rest) > 3:
            shown.append(f"+{len(rest) - 3} more")
        return ", ".join(shown)


def _build(cls, data: dict[str, Any]):
    known = {f.name for f in dataclasses.fields(cls)}
    return cls(**{k: v for k, v in data.items() if k in known})


def _shorten(text: str, limit: int = 160) -> str:
    """One sentence of an ncu rule, capped: the first that gives a figure about
    this workload ("3 full waves and a partial wave of 233 blocks"), else the
    first with any figure, else the first."""
    sentences = re.split(r"(?<=[.!?])\s+", " ".join(text.split()))
    specific = [s for s in sentences if re.search(r"\d", s)]
    own = [s for s in specific if re.search(r"\b(this|these) (workload|kernel|launch)", s, re.I)]
    pick = (own or specific or sentences or [""])[0]
    return pick if len(pick) <= limit else pick[: limit - 3].rstrip() + "..."


def _short_name(name: str, limit: int = 40) -> str:
    return name if len(name) <= limit else name[: limit - 3] + "..."


def _si(n: float) -> str:
    for unit, scale in (("G", 1e9), ("M", 1e6), ("K", 1e3)):
        if abs(n) >= scale:
            return f"{n / scale:.3g} {unit}"
    return f"{n:g}"
