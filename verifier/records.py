"""The records the verifier hands to the rest of kgen.

Plain dataclasses with typed fields: a `Task` (what to compute), a
`VerifyConfig` (how to check), and a `VerifyResult` (the verdict). A bad
kernel is never an exception: it is a `VerifyResult` with a status that is not
`ok`. `to_dict`/`from_dict` give the JSON form that `kgen verify --json`
prints and the store keeps.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# What a terminal acts on instead of showing: C0 and C1 controls (an escape sequence moves the cursor, erases
# the screen, sets the window title; a carriage return overwrites the line) and the bidirectional overrides
# and isolates that reorder what is shown. Newlines and tabs stay.
_ACTED_ON = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def printable(text: str) -> str:
    """text with every character a terminal would act on written out as its escape (ESC as \\x1b, U+202E as
    \\u202e): what a candidate wrote is shown to a person, an LLM or a file, never obeyed by a terminal."""
    return _ACTED_ON.sub(lambda m: ascii(m.group())[1:-1], text)


# How a call is timed (verifier.timing): "graph", replays of a CUDA graph, the device's time (the default);
# "events", each call as issued, the host's cost of the call included; "kernelbench", KernelBench's protocol.
TIMING_METHODS = ("graph", "events", "kernelbench")

# Every status a verification can end in. Only "ok" means the kernel passed.
STATUSES = (
    "ok",             # correct on every trial (and timed, where a GPU was used)
    "compile_error",  # the candidate's kernel did not build (Triton, NVRTC, nvcc)
    "runtime_error",  # it built but raised while running
    "mismatch",       # it ran but produced the wrong values, shape or dtype
    "rejected",       # it broke a rule: torch did the work, it mutated inputs, cheated the harness
    "timeout",        # it ran past the wall-clock limit; its process group was killed
    "crashed",        # its process died without a verdict (segfault, exit, OOM kill)
    "not_run",        # a CUDA candidate compiled with nvcc on a machine with no GPU: nothing was executed
    "not_checkable",  # a CUDA candidate on a machine that can neither run nor compile it (no GPU, and no nvcc or
                      # no CUDA headers in this build of torch): nothing was compiled or run
    "harness_error",  # kgen's own failure (the judge raised, the reference failed, kgen's own code ran out of
                      # memory, or the task does not fit the device's memory however planned): never charged to
                      # the kernel
)

# NOTE: statuses that say nothing about the kernel, only about this machine: neither passed nor failed. `kgen verify`
# exits 3 for them, a board counts them as not checked, and the loop never hands them to a proposer as a fault.
NOT_CHECKED_HERE = ("not_run", "not_checkable")


@dataclass(frozen=True)
class Task:
    """A KernelBench-format reference op loaded from a file."""

    path: Path
    name: str                   # file stem, e.g. "matmul"
    source: str                 # the file's text
    atol: float | None          # the task's ATOL, when it sets one
    rtol: float | None          # the task's RTOL, when it sets one
    has_small_inputs: bool      # defines get_small_inputs() for the CPU interpreter
    # For a CPU check (verifier.shapes): module-level constants to rewrite before the task runs
    # (verifier.task.import_task_module(..., overrides=)), None when the task's own inputs are used;
    # and what the verdict should say about the shapes checked ("" when nothing to say).
    small_overrides: dict | None = field(default=None, hash=False)   # NOTE: a dict: kept out of the hash
    derived_note: str = ""


@dataclass(frozen=True)
class VerifyConfig:
    """How a candidate is checked; every field has a default a user would choose."""

    device: str = "auto"            # "auto" (cuda when present), "cpu" or "cuda"
    trials: int = 5                 # correctness trials, each on fresh seeded inputs
    seed: int = 0                   # base seed; trial i uses seed + i
    timeout_s: float = 180.0        # wall-clock limit for the whole check, process group killed after it
    output_cap_bytes: int = 64_000  # captured stdout/stderr kept per stream
    time_it: bool = True            # time candidate and baselines (GPU only)
    baselines: bool = True          # time eager and torch.compile too (cached)
    compile_modes: tuple[str, ...] = ("default", "max-autotune-no-cudagraphs")
    reps: int = 100                 # timed repetitions (median taken)
    warmup: int = 10                # untimed calls before timing
    hidden_trials: int = 2          # extra correctness checks on hidden seeds during timing
    cache_dir: Path = Path("results/baselines")  # baseline cache, per (GPU, task, shapes)
    peaks_override: str | None = None  # path to a JSON table overriding the GPU peak rates
    repeat_timing: bool = False     # time the candidate a second time in the same run (a stability check)
    timing: str = "graph"           # "graph": candidate and baselines replayed from CUDA graphs; "events": as issued
    # bytes a verification may hold at once on its device (both processes; verifier.memory_plan): None = the GPU's
    # free memory, or on a CPU the host's available memory; a smaller value makes the plan keep fewer copies
    memory_budget_bytes: int | None = None


@dataclass
class Timing:
    """One timed callable: CUDA events around each call (or each graph replay), L2 flushed before it."""

    median_ms: float
    min_ms: float
    mean_ms: float
    p10_ms: float
    p90_ms: float
    reps: int
    sync_ms: float | None = None    # wall time of one call with a device-wide sync, to check the events
    host_ms: float | None = None    # median host time inside the events: the call's Python and launch cost
    method: str = "events"          # "events": each call timed as issued; "graph": replays of a CUDA graph
    std_ms: float | None = None     # population standard deviation of the trials (kernelbench; None otherwise)
    max_ms: float | None = None     # the slowest trial (kernelbench; None otherwise)


# Where the ncu cross-check of a claimed time ended (NcuCheck.status).
NCU_CHECK_STATUSES = (
    "consistent",     # the claimed time is not below the device time ncu measured, within the margin
    "inconsistent",   # it is: the kernel is rejected "timing inconsistent"
    "not_run",        # no GPU, no ncu, counters refused, nothing timed, no kernel seen: the reason says which
)


@dataclass
class NcuCheck:
    """The claimed time of a kernel against the device's own time for one forward, from Nsight Compute.

    verifier.timing.ncu_inconsistency decides it; profiler.crosscheck runs ncu and fills it in."""

    status: str                      # one of NCU_CHECK_STATUSES
    reason: str                      # one line: both numbers and the margin, or why it was not run
    claimed_ms: float | None = None  # the time the candidate's process reported (what the speedups use)
    ncu_ms: float | None = None      # gpu__time_duration summed per stream over one forward's kernels, the
                                     # longest stream's sum (the mean over the profiled calls)
    margin: float | None = None      # the claim may be this many times shorter than ncu_ms and still pass
    kernels: int = 0                 # kernel launches ncu timed per forward call
    streams: int = 0                 # streams those launches ran on
    calls: int = 0                   # forward calls profiled

    @property
    def line(self) -> str:
        """What a verdict says about it: "ncu cross-check: consistent (...)"."""
        status = "not run" if self.status == "not_run" else self.status
        return f"ncu cross-check: {status} ({self.reason})"


@dataclass
class VerifyResult:
    """The verdict on one candidate for one task."""

    status: str                      # one of STATUSES
    reason: str                      # one line: why this status
    feedback: str = ""               # capped detail for a person or an LLM (mismatch table, compiler message)
    task: str = ""
    backend: str = ""                # "triton", "cupy", "load_inline" or "" when unknown
    device: str = ""                 # e.g. "NVIDIA H200", "cpu (TRITON_INTERPRET=1)", "none (nvcc only)"
    ran: bool = False                # the candidate's kernels actually executed
    trials: int = 0                  # correctness trials passed
    timing: Timing | None = None     # the candidate's, GPU only
    timing_repeat: Timing | None = None  # the same candidate timed again in the same run, when asked
    baselines: dict[str, Timing] = field(default_factory=dict)   # "eager", "compile", "compile-max-autotune"
    speedups: dict[str, float] = field(default_factory=dict)     # baseline median / candidate median
    floor_ms: float | None = None    # roofline floor for this task on this GPU
    judge_ms_per_call: float | None = None  # per call, by the judge's own clock around a block of calls (GPU)
    ncu_check: NcuCheck | None = None   # the claim against ncu's device time (kgen verify --strict, a run's best)
    flags: list[str] = field(default_factory=list)      # for a person to review; not a rejection
    isolation: list[str] = field(default_factory=list)  # what the sandbox could and could not enforce
    isolation_complete: bool = False  # every confinement of verifier.sandbox.PROPERTIES held for this run
    isolation_missing: list[str] = field(default_factory=list)  # those that did not ("pids cap", ...)
    aten_ops: list[str] = field(default_factory=list)   # ops the candidate's forward issued through torch
    stdout: str = ""                 # the candidate's own output, capped
    stderr: str = ""
    wall_s: float = 0.0              # from start to verdict
    phases: dict[str, float] = field(default_factory=dict)  # seconds per stage, the sandbox's and the parent's too

    @property
    def passed(self) -> bool:
        return self.status == "ok"

    @property
    def checked_here(self) -> bool:
        """False when this machine could not check the kernel at all (NOT_CHECKED_HERE): no verdict on it."""
        return self.status not in NOT_CHECKED_HERE

    @property
    def best_speedup(self) -> float | None:
        """Speedup against the faster of eager and every compile mode, when timed."""
        if not self.speedups:
            return None
        return min(self.speedups.values())

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def made_printable(self) -> "VerifyResult":
        """This verdict with every string in it passed through printable(): reasons, feedback, flags, output,
        op names and phase names all carry text the candidate chose."""
        for f in dataclasses.fields(self):
            setattr(self, f.name, _printable_value(getattr(self, f.name)))
        return self

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "VerifyResult":
        data = dict(data)
        for key in ("timing", "timing_repeat"):
            if data.get(key):
                data[key] = Timing(**data[key])
        data["baselines"] = {k: Timing(**v) for k, v in (data.get("baselines") or {}).items()}
        if data.get("ncu_check"):
            data["ncu_check"] = NcuCheck(**data["ncu_check"])
        known = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})


def _printable_value(value):
    if isinstance(value, str):
        return printable(value)
    if isinstance(value, list):
        return [_printable_value(v) for v in value]
    if isinstance(value, dict):
        return {_printable_value(k): _printable_value(v) for k, v in value.items()}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.replace(value, **{f.name: _printable_value(getattr(value, f.name))
                                            for f in dataclasses.fields(value)})
    return value
