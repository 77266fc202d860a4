"""fast_p, KernelBench's leaderboard metric, and the geometric-mean speedup.

fast_p is the share of ALL tasks of a suite whose kernel is correct AND
strictly more than p times faster than the baseline: a task with no correct
kernel counts in the denominator, a kernel exactly p times faster does not
count, and an incorrect kernel never counts however fast it ran. fast_0 is the
share of tasks with a correct kernel.

A correct kernel that was not timed (no GPU) has an unknown speedup, so
fast_p for p > 0 is then not a number: it is reported as n/a with a note,
never as 0. The geometric mean is taken over the correct, timed tasks only.

    from agent.fastp import Outcome, fast_p, geomean
    outcomes = [Outcome(True, 2.5), Outcome(True, 1.0), Outcome(False, 9.0), Outcome(True, None)]
    fast_p(outcomes, 0).value        # 0.75: three of four correct
    fast_p(outcomes, 1).value        # None: one correct task was not timed
    geomean([2.5, 1.0])              # 1.58...
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Iterable, Sequence

THRESHOLDS = (0.0, 1.0, 1.5, 2.0)   # the p of fast_p the leaderboard reports


@dataclass(frozen=True)
class Outcome:
    """One task's result against one baseline."""

    correct: bool
    speedup: float | None = None    # baseline median / kernel median; None when not timed


@dataclass(frozen=True)
class FastP:
    """fast_p for one p: the share, the count behind it, or why there is none."""

    p: float
    value: float | None         # share of all tasks, 0..1; None when it cannot be known
    count: int | None           # tasks correct and faster than p x; None with value
    total: int                  # tasks in the suite (the denominator)
    note: str = ""              # why value is None

    @property
    def label(self) -> str:
        return f"fast_{self.p:g}"

    def text(self) -> str:
        """"75.0% (3/4)" or "n/a"."""
        if self.value is None:
            return "n/a"
        return f"{100 * self.value:.1f}% ({self.count}/{self.total})"


def fast_p(outcomes: Sequence[Outcome], p: float, *, timeable: bool = True) -> FastP:
    """Share of all tasks that are correct and strictly more than p x faster (p = 0: correct).

    timeable=False (no GPU where the tasks ran): nothing could be timed, so for p > 0 the share is not
    known, and n/a, however many tasks are correct (none, on a board interrupted at its first task)."""
    if p < 0:
        raise ValueError(f"fast_p needs p >= 0, got {p}")
    total = len(outcomes)
    if p > 0 and not timeable and total:
        return FastP(p, None, None, total, "no GPU: nothing is timed")
    if total == 0:
        return FastP(p, None, None, 0, "no tasks")
    correct = [o for o in outcomes if o.correct]
    if p == 0:
        return FastP(p, len(correct) / total, len(correct), total)
    untimed = sum(1 for o in correct if o.speedup is None)
    if untimed:
        # NOTE: an unknown speedup could be above or below p: the share is not determined, so no number
        return FastP(p, None, None, total, f"{untimed} of {len(correct)} correct task(s) not timed")
    count = sum(1 for o in correct if o.speedup > p)
    return FastP(p, count / total, count, total)


def fast_table(outcomes: Sequence[Outcome], thresholds: Iterable[float] = THRESHOLDS, *,
               timeable: bool = True) -> list[FastP]:
    return [fast_p(outcomes, p, timeable=timeable) for p in thresholds]


def geomean(values: Iterable[float]) -> float | None:
    """The geometric mean of positive numbers; None for none."""
    values = list(values)
    if not values:
        return None
    for v in values:
        if not (v > 0 and math.isfinite(v)):
            raise ValueError(f"a speedup must be a positive finite number, got {v}")
    return math.exp(sum(math.log(v) for v in values) / len(values))


def geomean_speedup(outcomes: Sequence[Outcome]) -> float | None:
    """Geometric-mean speedup over the tasks that are correct and timed."""
    return geomean(o.speedup for o in outcomes if o.correct and o.speedup is not None)


def speedup_text(correct: bool, speedup: float | None) -> str:
    """"2.31x", "not timed" (correct, no GPU), or "-" (no correct kernel): a speedup cell for people."""
    if not correct:
        return "-"
    return f"{speedup:.2f}x" if speedup is not None else "not timed"
