"""How much memory a verification holds at once, planned from the task's footprint and the device's free memory.

    from verifier.memory_plan import TaskMemory, plan_memory, MemoryShort
    memory = TaskMemory(input_bytes=6 << 30, output_bytes=6 << 30, param_bytes=0, reference_extra_bytes=0)
    plan = plan_memory(memory, device="cuda", budget=device_budget("cuda", None), timing=True)
    plan.note()      # "memory: at most 3 input-set copies at once instead of 4 (...)" when something was reduced

KernelBench's level-1 inputs run to 16 GiB a set (average pooling 2D), and a
verification holds several copies of a set at once, in two processes on the
same device: the judge's (verifier.judge) set for its reference, and in the
candidate process (verifier.candidate) the set it computes on and its
snapshot of that set (the inputs-unchanged check), and while timing its
timing buffers and the fresh values refilled into them. The caching
allocators of the two processes keep what each freed, so their peaks add up
unless each empties its cache. Inputs are made one set at a time everywhere:
the correctness trials, the hidden re-checks and the K calls of the judge's
timing block each make a set, use it and drop it, so none of those counts
grows with the number of sets; what the plan decides is how many COPIES
are alive at once:

- `overlap`: the judge runs its reference while the candidate process
  computes (the default: the two calls' transients coexist), or only once
  the candidate's reply came (the candidate process has emptied its cache by
  then);
- `snapshot_on_host`: the candidate process keeps its snapshot of the inputs
  in host memory instead of on the GPU (GPU only: on a CPU both are host memory);
- `refill_hidden`: the hidden re-checks after timing refill the timing
  buffers from their hidden seeds (as the re-check after timing does) instead
  of arriving in fresh tensors beside them (GPU);
- `spot_checks`: how many timed calls' outputs come back as files at once,
  with the graph replay's (the exchange directory's disk).

The minimum, which no plan goes below (so that verdicts stay sound): every
correctness trial (config.trials), the hidden re-checks on fresh inputs after
timing (config.hidden_trials; at least one fresh set besides the trials: the
re-check after timing is always made), the inputs-unchanged check, fresh
input values on every timed call, the L2 flush, the judge's block of K calls
(its K is not a memory question), and one spot-checked timed call besides the
graph replay's check. When even that does not fit, the verification ends
`harness_error` with the numbers and what to do (MemoryShort), before the
candidate is charged with anything.

Budget: on a GPU, what torch.cuda.mem_get_info says is free once the judge's
reference and the candidate's ModelNew are built, plus the parameters they
hold (capped by VerifyConfig.memory_budget_bytes when set); on a CPU,
memory_budget_bytes, or else the host's available memory. HEADROOM of it is
left for the allocators' rounding and the CUDA contexts' growth.

The judge (verifier.judge) plans twice: before the first trial from its input
set alone, and after the first reference call, which runs once the
candidate's reply came and is measured (torch.cuda.max_memory_allocated), from
the real outputs and transients. The note is the second plan's.

What this module does not see: a candidate's own workspace beyond what the
reference's transients take (the plan allows it as much), and another process
that starts allocating on the same GPU after the plan.

    python -m verifier.memory_plan TASK.py [FREE_GIB]               # a task's plan on a GPU (139 GiB free by default)
    python -m verifier.memory_plan INPUT_GIB OUTPUT_GIB [FREE_GIB]  # the plan for those sizes
"""

from __future__ import annotations

import os
import re
import shutil
import sys
from dataclasses import dataclass, field

GiB = float(1 << 30)
HEADROOM = 0.05                 # of the budget, kept free: allocator rounding, contexts, cuBLAS workspaces
SPOT_CHECKS_MIN = 1             # timed calls whose outputs are checked, at least (besides the graph replay's)
MIN_HEADROOM_BYTES = 256 << 20  # on a GPU budget: at least this much left free


def gib(n: float) -> str:
    """Bytes as a person reads them: "31.2 GiB", "4.0 MiB"."""
    if abs(n) >= GiB / 10:
        return f"{n / GiB:.1f} GiB"
    return f"{n / (1 << 20):.1f} MiB"


@dataclass(frozen=True)
class TaskMemory:
    """What one call of the task holds, in bytes."""

    input_bytes: int                # one input set's tensors
    output_bytes: int               # one call's output tensors
    param_bytes: int                # the reference's parameters and buffers
    reference_extra_bytes: int      # the reference's transients beyond its inputs, outputs and parameters
    reference_measured: bool = False    # False: reference_extra_bytes is an estimate (max of inputs and outputs)
    called: bool = True                 # False: before the first call, outputs and transients not known (0 here)

    def describe(self) -> str:
        """"one input set 16.0 GiB, outputs 16.0 GiB, parameters 0.0 MiB, the reference's transients 0.0 MiB"."""
        text = f"one input set {gib(self.input_bytes)}, "
        if not self.called:
            return text + f"parameters {gib(self.param_bytes)}; outputs and transients uncounted before the first call"
        return (text + f"outputs {gib(self.output_bytes)}, parameters {gib(self.param_bytes)}, the reference's "
                f"transients {gib(self.reference_extra_bytes)}{'' if self.reference_measured else ' (estimated)'}")

    @classmethod
    def of(cls, inputs, outputs, model, reference_peak_bytes: int | None = None) -> "TaskMemory":
        """From real tensors (a set of inputs, the reference's outputs on them, its model); peak measured or not.

        reference_peak_bytes: what the allocator's peak rose by during the reference's call (GPU), None to estimate."""
        i, o = tensor_bytes(inputs), tensor_bytes(outputs)
        w = sum(t.numel() * t.element_size() for t in list(model.parameters()) + list(model.buffers()))
        if reference_peak_bytes is None:
            return cls(i, o, w, max(i, o), False)
        return cls(i, o, w, max(0, reference_peak_bytes - o), True)


def tensor_bytes(obj) -> int:
    """Bytes of every tensor in obj (a tensor, or lists and tuples of them, other values ignored)."""
    import torch

    if isinstance(obj, torch.Tensor):
        return obj.numel() * obj.element_size()
    if isinstance(obj, (list, tuple)):
        return sum(tensor_bytes(x) for x in obj)
    return 0


@dataclass(frozen=True)
class Budget:
    """What a verification may hold at once on its device, and where the number came from."""

    bytes: int
    source: str                     # "96.0 GiB free of 139.8 GiB on the GPU", "--memory-budget 40.0 GiB"
    total_bytes: int | None = None  # the device's size, when known
    free_bytes: int | None = None   # free when measured


def device_budget(device: str, configured: int | None, held_bytes: int = 0) -> Budget:
    """The budget on device: its free memory (GPU) or the host's available memory (CPU), capped by configured.

    held_bytes: what the verification already holds on the device (the parameters built), added back, since the
    plan counts them."""
    if device == "cuda":
        import torch

        free, total = torch.cuda.mem_get_info()
        measured = free + held_bytes
        source = f"{gib(free)} free of {gib(total)} on the GPU"
        if configured is not None and configured < measured:
            return Budget(configured, f"--memory-budget {gib(configured)} ({source})", total, free)
        return Budget(measured, source, total, free)
    if configured is not None:
        return Budget(configured, f"--memory-budget {gib(configured)}")
    available = host_available_bytes()
    return Budget(available, f"{gib(available)} of host memory available", None, available)


def host_available_bytes() -> int:
    """MemAvailable from /proc/meminfo (the whole RAM where it cannot be read)."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


@dataclass(frozen=True)
class Phase:
    """What is alive at one moment of a verification: copies of an input set, of the outputs, and so on.

    The counts are both processes' together; `candidate` is the candidate process's part of them (inputs,
    outputs, transients, flush buffers), beyond its ModelNew."""

    name: str
    inputs: int             # input-set copies
    outputs: int            # output copies
    transients: int         # reference-sized transients (the reference's own, the candidate's allowance, a graph pool)
    params: int             # parameter copies (the reference, its snapshot, the candidate's)
    flush: int = 0          # L2 flush buffers
    candidate: tuple[int, int, int, int] = (0, 0, 0, 0)

    def bytes(self, m: TaskMemory, flush_bytes: int) -> int:
        return (self.inputs * m.input_bytes + self.outputs * m.output_bytes
                + self.transients * m.reference_extra_bytes + self.params * m.param_bytes + self.flush * flush_bytes)

    def candidate_bytes(self, m: TaskMemory, flush_bytes: int) -> int:
        i, o, r, f = self.candidate
        return i * m.input_bytes + o * m.output_bytes + r * m.reference_extra_bytes + f * flush_bytes


def phases(overlap: bool, snapshot_on_host: bool, timing: bool, device: str,
           refill_hidden: bool = False) -> list[Phase]:
    """The moments of one verification, each with what both processes hold then (verifier.judge, verifier.candidate).

    The judge's call holds its input set, the reference's outputs and transients and the candidate's outputs read
    back; the candidate's call the set it computes on, its snapshot (unless on the host), its outputs and
    transients, beside what it keeps from timing (its buffers, the captured graph's output and pool)."""
    snap = 0 if (snapshot_on_host and device == "cuda") else 1
    # untimed (a CPU check), the last trial's set stays in the candidate process for the hidden refill (into="last")
    kept = (0, 0, 0) if timing else (1, 0, 0)
    judge_call = (1, 2, 1)                  # inputs, outputs (its own, the candidate's read back), transients
    cand_call = (1 + snap, 1, 1)            # the set it computes on, its snapshot; its outputs; its transients

    def add(*parts):
        return tuple(sum(p[k] for p in parts) for k in range(3))

    def together(name, judge, cand, flush=0):
        i, o, r = add(judge, cand)
        return Phase(name, i, o, r, 3, flush, (*cand, flush))

    def call(name, during=(0, 0, 0), after=(0, 0, 0)):
        """A checked call: during, what the candidate holds beside its call; after, what it keeps once it replied."""
        cand = add(cand_call, during)
        if overlap:
            return [together(name, judge_call, cand)]
        # the judge waits for the reply with its set; then runs the reference beside what the candidate keeps
        return [together(name + " (the candidate's call)", (1, 0, 0), cand),
                together(name + " (the reference's call)", judge_call, add(after, kept))]

    out = call("a correctness trial")
    if not timing:
        return out
    timed = (1, 1, 1)           # the timing buffers, the captured graph's output and pool, kept until the end
    # a refill computes on the timing buffers themselves, but its set is made from the judge's seed on the device
    # (verifier.wire) and copied in: one more set there for a moment
    refilled = (1, 1, 1)
    out += [together("the candidate's timing loop", (0, 0, 0), (2, 1, 1), flush=1),   # buffers and a fresh set
            together("checking the spot-checked calls", judge_call, timed)]
    out += call("the re-check after timing", during=refilled, after=timed)
    out += call("a hidden re-check", during=refilled if refill_hidden else timed, after=timed)
    out += [together("the judge's block", (0, 0, 0), (2, 1, 1)),     # its buffers and one block set (the candidate's)
            Phase("the judge alone: the block's check and eager", 2, 1, 2, 2, flush=1)]
    return out


@dataclass(frozen=True)
class MemoryPlan:
    """What the checks and the timing of one verification hold at once, and why."""

    memory: TaskMemory
    budget: Budget
    overlap: bool                   # the judge's reference runs while the candidate computes
    snapshot_on_host: bool          # the candidate's inputs-unchanged snapshot in host memory (GPU)
    refill_hidden: bool             # the hidden re-checks after timing refill the timing buffers (GPU)
    device: str                     # "cuda" or "cpu"
    timing: bool                    # the GPU timing stages are planned for
    flush_bytes: int                # one L2 flush buffer
    spot_checks: int                # timed calls whose outputs come back (besides the graph replay's)
    peak_bytes: int                 # the plan's peak on the device
    peak_phase: str                 # when
    input_copies: int               # input-set copies at the plan's peak
    default_peak_bytes: int         # the peak with nothing reduced
    default_input_copies: int
    default_spot_checks: int
    disk_free_bytes: int | None = None
    reductions: tuple[str, ...] = field(default=())

    @property
    def reduced(self) -> bool:
        return bool(self.reductions)

    @property
    def candidate_share_bytes(self) -> int:
        """What the plan lets the candidate's process hold beyond its ModelNew at any moment: its largest part of
        any phase (inputs, snapshot, outputs, timing buffers and graph, and an allowance of the reference's
        transients for its own kernels' workspace). A process that grew past it took memory the plan gave kgen."""
        m = self.memory
        return max(p.candidate_bytes(m, self.flush_bytes) for p in
                   phases(self.overlap, self.snapshot_on_host, self.timing, self.device, self.refill_hidden))

    def note(self) -> str:
        """The verdict's line when the plan reduced anything, else ""."""
        if not self.reduced:
            return ""
        m = self.memory
        copies = (f"at most {self.input_copies} input-set copies at once instead of {self.default_input_copies}"
                  if self.input_copies < self.default_input_copies else f"{gib(self.peak_bytes)} at most at once "
                  f"instead of {gib(self.default_peak_bytes)}")
        return f"memory: {copies} ({m.describe()}; {self.budget.source}): " + "; ".join(self.reductions)


class MemoryShort(Exception):
    """Even the smallest plan does not fit: kgen cannot verify this task here. The message has the numbers."""


def _peak(m: TaskMemory, level: tuple, timing: bool, device: str, flush_bytes: int):
    overlap, on_host, refill = level[:3]
    worst = max(phases(overlap, on_host, timing, device, refill), key=lambda p: p.bytes(m, flush_bytes))
    return worst.bytes(m, flush_bytes), worst


_SEQUENTIAL = "the reference runs once the candidate's call has returned, not beside it"
_ON_HOST = "the candidate's snapshot of its inputs (the inputs-unchanged check) is kept in host memory"
_REFILL = ("the hidden re-checks after timing refill the timing buffers (from hidden seeds, as the re-check after "
           "timing does) instead of fresh tensors")
# The plans tried, fewest reductions first: (overlap, snapshot on host, hidden re-checks refill, what a person reads)
_LEVELS = (
    (True, False, False, ()),
    (False, False, False, (_SEQUENTIAL,)),
    (False, True, False, (_SEQUENTIAL, _ON_HOST)),
    (False, True, True, (_SEQUENTIAL, _ON_HOST, _REFILL)),
)


def plan_memory(memory: TaskMemory, device: str, budget: Budget, *, timing: bool, flush_bytes: int = 0,
                spot_checks: int = 3, disk_free_bytes: int | None = None,
                host_cap_bytes: int | None = None, files_in_memory: bool = False) -> MemoryPlan:
    """The plan with the fewest reductions that fits budget; MemoryShort when the smallest does not.

    timing: the GPU timing stages run too. flush_bytes: one L2 flush buffer. spot_checks: the timing's own number
    of spot-checked calls. disk_free_bytes: free space where the tensor files go (None: not checked).
    host_cap_bytes: the host memory the candidate's process may hold (its sandbox's cap; None: not checked).
    files_in_memory: the tensor files lie on a tmpfs (verifier.judge.exchange_root): the pages the candidate's
    process writes there count against its cap too, so the outputs kept must fit beside what it holds."""
    usable = int(budget.bytes * (1 - HEADROOM))
    if device == "cuda":
        usable = min(usable, budget.bytes - MIN_HEADROOM_BYTES)
    default_peak, default_phase = _peak(memory, _LEVELS[0], timing, device, flush_bytes)
    # on a CPU both processes hold host memory (no snapshot elsewhere) and nothing is timed (no timing buffers)
    levels = _LEVELS if device == "cuda" else _LEVELS[:2]
    chosen = None
    for level in levels:
        peak, phase = _peak(memory, level, timing, device, flush_bytes)
        if peak <= usable:
            chosen = (level, peak, phase)
            break
    if chosen is None:
        peak, phase = _peak(memory, levels[-1], timing, device, flush_bytes)
        raise MemoryShort(_short_text(memory, budget, usable, peak, phase.name, device))
    (overlap, on_host, refill, why), peak, phase = chosen
    reductions = list(why)
    checks = spot_checks
    if host_cap_bytes is not None and device == "cuda":
        # the candidate's process reads its set into host memory, may keep its snapshot there, writes its outputs
        host = memory.input_bytes * (2 if on_host else 1) + memory.output_bytes
        if host > host_cap_bytes * (1 - HEADROOM):
            raise MemoryShort(
                f"the candidate's process would hold {gib(host)} of host memory (its input set read from its file"
                f"{', its inputs snapshot' if on_host else ''} and its outputs written back), more than the "
                f"{gib(host_cap_bytes)} its sandbox allows it ({budget.source}): run on a host with more memory or "
                f"free the GPU so that the snapshot can stay there")
    if disk_free_bytes is not None:
        usable_disk = int(disk_free_bytes * (1 - HEADROOM))
        if files_in_memory and host_cap_bytes is not None and device == "cuda":
            usable_disk = max(0, min(usable_disk, int(host_cap_bytes * (1 - HEADROOM)) - host))
        if memory.input_bytes + memory.output_bytes > usable_disk:
            raise MemoryShort(
                f"a call's tensor files do not fit on disk: its input set ({gib(memory.input_bytes)}) and outputs "
                f"({gib(memory.output_bytes)}) go through files where {gib(disk_free_bytes)} is free: free disk "
                f"space there, or set KGEN_EXCHANGE_DIR to a directory with room")
    if timing and disk_free_bytes is not None:
        # the spot-checked calls' outputs and the graph replay's lie in the exchange directory together
        fits = usable_disk // max(memory.output_bytes, 1) - 1
        if fits < SPOT_CHECKS_MIN:
            raise MemoryShort(
                f"the timed calls' outputs do not fit on disk: {SPOT_CHECKS_MIN + 1} output copies of "
                f"{gib(memory.output_bytes)} are needed where the tensor files go, {gib(disk_free_bytes)} is free: "
                f"free space there, or set KGEN_EXCHANGE_DIR to a directory with room")
        if fits < spot_checks:
            checks = fits
            reductions.append(f"{checks} spot-checked timed call(s) instead of {spot_checks} (their outputs go "
                              f"through the disk together: {gib(disk_free_bytes)} free)")
    return MemoryPlan(memory=memory, budget=budget, overlap=overlap, snapshot_on_host=on_host,
                      refill_hidden=refill, device=device, timing=timing, flush_bytes=flush_bytes, spot_checks=checks,
                      peak_bytes=peak, peak_phase=phase.name, input_copies=phase.inputs,
                      default_peak_bytes=default_peak, default_input_copies=default_phase.inputs,
                      default_spot_checks=spot_checks, disk_free_bytes=disk_free_bytes, reductions=tuple(reductions))


def _short_text(m: TaskMemory, budget: Budget, usable: int, peak: int, phase: str, device: str) -> str:
    where = "GPU" if device == "cuda" else "host"
    todo = ("free the GPU (other processes hold part of it: nvidia-smi), run on a GPU with more memory, or give "
            "the task smaller shapes" if device == "cuda" else
            "raise --memory-budget (VerifyConfig.memory_budget_bytes), free host memory, or check on smaller "
            "shapes (--small-shapes)")
    return (f"not enough memory to verify this task: the smallest plan holds {gib(peak)} at once on the {where} "
            f"({phase}; {m.describe()}), {gib(usable)} of it may be used ({budget.source}): {todo}")


# ----------------------------------------------------------------------------------------------
# out-of-memory errors raised in kgen's own code, with the numbers


_ASKED = re.compile(r"(?:Tried to allocate|tried to allocate)\s+([\d.]+)\s*(bytes|[KMGT]i?B)?", re.I)
_UNITS = {None: 1, "bytes": 1, "kib": 1 << 10, "kb": 1 << 10, "mib": 1 << 20, "mb": 1 << 20, "gib": 1 << 30,
          "gb": 1 << 30, "tib": 1 << 40, "tb": 1 << 40}


def is_out_of_memory(exc: BaseException) -> bool:
    """A failed allocation: torch's OutOfMemoryError (CUDA), MemoryError, or the CPU allocator's refusal."""
    import torch

    if isinstance(exc, (MemoryError, torch.OutOfMemoryError)):
        return True
    text = str(exc)[:500] if isinstance(exc, RuntimeError) else ""
    return "can't allocate memory" in text or "CUDA out of memory" in text or "out of memory" in text[:80]


def asked_bytes(exc: BaseException) -> int | None:
    """How much the failed allocation asked for, when its message says."""
    match = _ASKED.search(str(exc)[:1000])
    if not match:
        return None
    unit = (match.group(2) or "bytes").lower()
    return int(float(match.group(1)) * _UNITS.get(unit, 1))


def memory_numbers(device: str) -> tuple[int | None, int | None]:
    """(free, total) bytes on device now: the GPU's, or the host's available memory and RAM."""
    if device == "cuda":
        import torch

        try:
            free, total = torch.cuda.mem_get_info()
            return free, total
        except Exception:  # noqa: BLE001 - a broken context says nothing
            return None, None
    return host_available_bytes(), os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


def oom_text(exc: BaseException, device: str, what: str) -> str:
    """kgen's own allocation failed: what it was doing, the numbers (asked, free, total) and what to do."""
    asked = asked_bytes(exc)
    free, total = memory_numbers(device)
    where = "GPU" if device == "cuda" else "host"
    numbers = ", ".join(part for part in (
        f"asked {gib(asked)}" if asked is not None else "",
        f"free {gib(free)}" if free is not None else "",
        f"total {gib(total)}" if total is not None else "") if part)
    todo = ("free the GPU (nvidia-smi shows who holds it) or set a smaller --memory-budget so that kgen plans "
            "fewer copies" if device == "cuda" else
            "free host memory, set a smaller --memory-budget, or check on smaller shapes (--small-shapes)")
    return f"kgen ran out of {where} memory while {what} ({numbers or 'no numbers'}): {todo}"


def disk_free_bytes(path) -> int | None:
    try:
        return shutil.disk_usage(path).free
    except OSError:
        return None


def task_memory_on_meta(path) -> TaskMemory:
    """A task file's footprint counted on torch's meta device (nothing allocated): its get_inputs(), the reference's
    outputs on them and its parameters; the transients estimated (the plan's own measure needs the real call)."""
    import torch

    from verifier.devices import on_device
    from verifier.task import import_task_module

    module = import_task_module(path, f"kgen_memory_{abs(hash(str(path)))}")
    with torch.device("meta"), on_device("meta"):
        model = module.Model(*module.get_init_inputs())
        xs = list(module.get_inputs())
        with torch.no_grad():
            out = model(*xs)
    return TaskMemory.of(xs, out, model)


def main(argv: list[str]) -> int:
    usage = "python -m verifier.memory_plan TASK.py|INPUT_GIB OUTPUT_GIB [FREE_GIB]"
    numbers = [a for a in argv if a.replace(".", "", 1).isdigit()]
    files = [a for a in argv if a not in numbers]
    if len(files) > 1 or (files and len(numbers) > 1) or (not files and len(numbers) not in (2, 3)):
        print(f"usage: {usage}", file=sys.stderr)
        return 2
    if files:
        memory = task_memory_on_meta(os.path.abspath(files[0]))
        free = int(float(numbers[0]) * GiB) if numbers else int(139 * GiB)
    else:
        i, o = (int(float(a) * GiB) for a in numbers[:2])
        memory = TaskMemory(i, o, 0, max(i, o))
        free = int(float(numbers[2]) * GiB) if len(numbers) == 3 else int(139 * GiB)
    try:
        plan = plan_memory(memory, "cuda", Budget(free, f"{gib(free)} free (given)"), timing=True,
                           flush_bytes=120 << 20)
    except MemoryShort as exc:
        print(exc)
        return 1
    print(plan.note() or f"memory: nothing reduced: peak {gib(plan.peak_bytes)} ({plan.peak_phase}; one input set "
                         f"{gib(memory.input_bytes)}, outputs {gib(memory.output_bytes)}, the reference's transients "
                         f"{gib(memory.reference_extra_bytes)} (estimated))")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
