"""What every proposer is: given what the loop knows, return candidate kernels.

A proposer never verifies anything itself; it turns a `ProposeContext` (the
task, the analysis, the best kernel so far, the last attempts' outcomes, the
diagnosis of the best kernel) into `Proposal`s, each a full candidate source
defining `ModelNew`. Failures of the proposer's own machinery (an unreachable
endpoint after retries, a missing API key) raise `ProposerError` with a message
that says what to do; a bad reply from a model is a `Proposal` with
`source=None` and a `repair` message, never an exception.
"""

from __future__ import annotations

import abc
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from agent.analysis import Analysis
    from profiler.records import Diagnosis


class ProposerError(RuntimeError):
    """The proposer itself cannot go on (endpoint down, misconfigured)."""


@dataclass
class AttemptSummary:
    """One earlier attempt, compact, as the next prompt shows it."""

    number: int                  # attempt number within the run, from 1
    status: str                  # a VerifyResult status, or "no_code" when the reply had none
    reason: str                  # one line
    median_ms: float | None      # the candidate's time, when timed
    speedup: float | None        # against the faster baseline, when timed
    feedback: str = ""           # capped verifier feedback (mismatch table, compiler error)
    source: str | None = None    # the candidate's code, for repair of the latest failures
    note: str = ""               # why the proposer tried it (heuristic: the config and the diagnosis that chose it)


@dataclass
class ProposeContext:
    """Everything a proposer may look at in one round."""

    task_name: str
    task_source: str
    backend: str                         # "triton" or "cuda"
    analysis: "Analysis"                 # shapes, dtypes, work, roofline, baselines, GPU: from analyze
    round: int                           # 1-based
    n: int                               # proposals wanted this round
    best_source: str | None = None       # the best passing kernel so far
    best_ms: float | None = None
    best_speedup: float | None = None
    best_note: str = ""                  # how the best kernel was configured (heuristic proposer)
    history: list[AttemptSummary] = field(default_factory=list)   # all earlier attempts, oldest first
    diagnosis_text: str | None = None    # the profiler's compact diagnosis of the best kernel
    diagnosis: "Diagnosis | None" = None     # the same diagnosis, as the profiler's record


@dataclass
class Proposal:
    """One candidate, or a failed attempt at producing one."""

    source: str | None                   # full candidate file; None when the reply held no usable code
    repair: str = ""                     # why source is None: goes back to the model next round
    note: str = ""                       # the proposer's own explanation (config chosen and why)
    prompt: str = ""                     # the prompt that produced it (stored as prompt.md)
    response: str = ""                   # the raw reply (stored as response.md)
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0


class Proposer(abc.ABC):
    """A source of candidate kernels."""

    name: str = "base"

    @abc.abstractmethod
    def propose(self, ctx: ProposeContext) -> list[Proposal]:
        """Return up to ctx.n proposals for this round."""

    def exhausted(self, ctx: ProposeContext) -> str | None:
        """A reason to stop when the proposer has nothing new to try, else None."""
        return None
