"""The records the optimize loop writes: one `Attempt` per candidate, one `Run` per task.

An `Attempt` is a proposal together with its verdict (the verifier's
`VerifyResult`), the profile of the kernel when it was profiled (the
profiler's `Diagnosis`), and what producing it cost. A `Run` is the
sequence of attempts for one task with its best kernel. Both are plain
dataclasses; `agent.store` writes them as JSON files under `results/` and
indexes them in SQLite, and `kgen show`/`kgen report`/`kgen leaderboard` read
them back with `from_dict`.

    python -c "from agent.records import Run; print(Run.__doc__)"
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from profiler.records import Diagnosis
from verifier.records import VerifyResult

# Every status a run can be in. "running" is also what a run that died without
# a chance to say so (power loss, kill -9) still reads; `kgen optimize --resume`
# continues it either way.
RUN_STATUSES = (
    "running",      # the loop is working on it (or died without saying so)
    "succeeded",    # the goal was met: the target speedup or % of speed-of-light; without a GPU, a correct kernel
    "stopped",      # a limit ended it (rounds, patience, budget, wall time, proposer out of ideas) before the goal
    "failed",       # no correct kernel at all, or the proposer could not go on (endpoint down)
    "interrupted",  # Ctrl-C (or a crash) in the middle; resumable
)


# How close a failed attempt came, nearest first: it ran and only its values were wrong; it compiled (here, or
# with nvcc where nothing could run); it built and then raised, hung, broke a rule or crashed; it did not build;
# nothing of it could be checked; there was no kernel at all.
CLOSENESS = ("mismatch", "not_run", "runtime_error", "timeout", "rejected", "crashed", "harness_error",
             "compile_error", "not_checkable", "no_code")


@dataclass
class Attempt:
    """One candidate kernel: what was proposed, what the verifier and the profiler said."""

    run_id: str
    number: int                     # 1-based within the run, in proposal order
    round: int                      # 1-based round of the loop that proposed it
    status: str                     # a VerifyResult status, or "no_code" when the reply held no usable kernel
    reason: str                     # one line
    feedback: str = ""              # the verifier's capped feedback, or the repair message for "no_code"
    verify: VerifyResult | None = None      # the verdict; None for "no_code"
    profile: Diagnosis | None = None        # when this kernel was profiled
    median_ms: float | None = None  # the candidate's median time, GPU only
    speedup: float | None = None    # against the faster of eager and torch.compile (VerifyResult.best_speedup)
    sol_pct: float | None = None    # speed-of-light time / median_ms x 100, on a GPU with known peaks
    note: str = ""                  # the proposer's own explanation of the candidate
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0
    source_path: str = ""           # the stored kernel.py, relative to the results root ("" for "no_code")
    started_at: str = ""            # ISO 8601, UTC: when verification started
    finished_at: str = ""           # ISO 8601, UTC: when the verdict came back

    @property
    def passed(self) -> bool:
        return self.status == "ok"

    @property
    def speedups(self) -> dict[str, float]:
        """Speedup against each baseline ("eager", "compile", ...), empty when not timed."""
        return dict(self.verify.speedups) if self.verify is not None else {}

    @property
    def floor_ms(self) -> float | None:
        """The physics check's floor the verifier applied (below it a time is impossible)."""
        return self.verify.floor_ms if self.verify is not None else None

    @property
    def top_stall(self) -> str:
        """The profile's leading stall reason, "" when not profiled (or no stall was measured)."""
        return self.profile.top_stalls[0].reason if self.profile is not None and self.profile.top_stalls else ""

    @property
    def top_stall_text(self) -> str:
        """The leading stall with its share of stall cycles ("long_scoreboard 60%"), "" when there is none."""
        if not self.top_stall:
            return ""
        return f"{self.top_stall} {self.profile.top_stalls[0].share:.0%}"

    @property
    def bound(self) -> str:
        """What limits the kernel according to the profile: "memory", "compute", "latency" or ""."""
        return self.profile.bound if self.profile is not None else ""

    @classmethod
    def from_result(cls, run_id: str, number: int, round: int, result: "VerifyResult", *,
                    sol_ms: float | None = None, **fields: Any) -> "Attempt":
        """An attempt from the verifier's verdict; `sol_ms` (the task's speed-of-light time) gives sol_pct."""
        median_ms = result.timing.median_ms if result.timing is not None else None
        return cls(run_id=run_id, number=number, round=round, status=result.status, reason=result.reason,
                   feedback=result.feedback, verify=result, median_ms=median_ms,
                   speedup=result.best_speedup,
                   sol_pct=100.0 * sol_ms / median_ms if sol_ms and median_ms else None, **fields)

    def to_dict(self) -> dict[str, Any]:
        data = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        data["verify"] = self.verify.to_dict() if self.verify is not None else None
        data["profile"] = self.profile.to_dict() if self.profile is not None else None
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "Attempt":
        """An attempt from to_dict()'s form (its verdict and profile as their own JSON, or None)."""
        known = {f.name for f in dataclasses.fields(cls)}
        data = {k: v for k, v in data.items() if k in known}
        if data.get("verify") is not None:
            data["verify"] = VerifyResult.from_dict(data["verify"])
        if data.get("profile") is not None:
            data["profile"] = Diagnosis.from_dict(data["profile"])
        return cls(**data)


def closest_attempt(attempts: list[Attempt]) -> Attempt | None:
    """A failed run's nearest miss: the attempt of the nearest CLOSENESS status, the one that passed the
    most trials among those, the latest of equals (the loop's last word); None when there is no attempt."""
    def rank(a: Attempt):
        near = CLOSENESS.index(a.status) if a.status in CLOSENESS else len(CLOSENESS)
        return (-near, a.verify.trials if a.verify is not None else 0, a.number)
    return max(attempts, key=rank, default=None)


@dataclass
class Run:
    """One `kgen optimize` of one task: its settings, where it stands, and its best kernel."""

    run_id: str                     # sortable and unique: 20261129-134501-matmul-a1b2
    task: str                       # the task's name (file stem)
    task_path: str                  # the task file as given, resolved
    config: dict[str, Any] = field(default_factory=dict)   # OptimizeConfig as JSON, secrets scrubbed
    proposer: str = ""              # "openai" or "heuristic"
    model: str = ""                 # the model asked, "" for the heuristic proposer
    backend: str = ""               # "triton" or "cuda"
    device: str = ""                # "cuda" or "cpu": where candidates ran
    gpu: str = ""                   # the GPU's name, "" without one
    status: str = "running"         # one of RUN_STATUSES
    stop_reason: str = ""           # one line: why the loop ended (or what went wrong)
    best_attempt: int | None = None  # number of the best passing attempt
    best_speedup: float | None = None   # its speedup against the faster baseline, when timed
    best_ms: float | None = None    # its median time, when timed
    best_sol_pct: float | None = None   # its % of speed-of-light, when timed
    best_ncu_check: str = ""        # the best kernel's ncu cross-check, as its verdict says it ("ncu cross-check:
                                    # consistent (...)", "... not run (why)"); "" until the run has ended
    rounds: int = 0                 # rounds of the loop completed
    attempts: int = 0               # attempts stored
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0
    started_at: str = ""            # ISO 8601, UTC
    finished_at: str = ""           # ISO 8601, UTC; "" while running
    wall_s: float = 0.0             # seconds of wall clock, each session from its command's start, summed over resumes
    # seconds per phase (start-up, analysis, proposing, verifying, profiling, other), summed over resumes: they
    # add up to wall_s. NOTE: kept in run.json only, not in the index (list_runs() gives them empty)
    phases: dict[str, float] = field(default_factory=dict)

    @property
    def timed(self) -> bool:
        """Whether the best kernel has a measured time (only on a GPU)."""
        return self.best_ms is not None

    @property
    def tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "Run":
        known = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})
