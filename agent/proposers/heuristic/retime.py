"""Which configuration the walk branches from, when two timings are within the run-to-run spread.

    decision = branch_point({"rowwise A": [0.50], "rowwise B": [0.52]})
    decision.retime     # ("rowwise A", "rowwise B"): 4% apart, one timing each: time both again first
    decision = branch_point({"rowwise A": [0.50, 0.55], "rowwise B": [0.52, 0.51]})
    decision.branch     # "rowwise B": the lower median once both have two timings

On the H200 the same kernel timed in two attempts of one run differed by 5-10%, and the walk
followed a configuration that was only faster by the noise of one timing. So before branching,
those of the two best configurations with fewer than MIN_TIMINGS timings are timed again when
the two are closer than SPREAD; then the one with the lower median of its timings is the branch point.
Keys are whatever names a configuration (the heuristic proposer uses a note's head,
`family CONFIG`, without the reason after the colon).
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass

SPREAD = 0.10        # relative gap below which two timings of different kernels may be noise (H200: 5-10%)
MIN_TIMINGS = 2      # timings a configuration needs before a gap inside SPREAD is believed


@dataclass(frozen=True)
class Branch:
    """Where the walk goes on from, or what to time again first."""

    branch: str | None               # the configuration to branch from; None while re-timing
    retime: tuple[str, ...] = ()     # of the two best, those with too few timings, to time again first
    why: str = ""


def branch_point(timings: dict[str, list[float]], spread: float = SPREAD, min_timings: int = MIN_TIMINGS) -> Branch:
    """The best configuration by median time, or the two best to re-time when their gap may be noise."""
    ranked = sorted(((statistics.median(ms), key) for key, ms in timings.items() if ms), key=lambda t: t[0])
    if not ranked:
        return Branch(branch=None, why="nothing timed yet")
    best_ms, best = ranked[0]
    if len(ranked) == 1:
        return Branch(branch=best, why=f"the only timed configuration ({best_ms:.4g} ms)")
    second_ms, second = ranked[1]
    gap = (second_ms - best_ms) / best_ms if best_ms > 0 else float("inf")
    short = tuple(k for k in (best, second) if len(timings[k]) < min_timings)
    if gap < spread and short:
        return Branch(branch=None, retime=short,
                      why=f"the two best are {gap * 100:.1f}% apart ({best_ms:.4g} vs {second_ms:.4g} ms), inside "
                          f"the {spread * 100:.0f}% run-to-run spread: timing both again before branching")
    return Branch(branch=best, why=f"best median {best_ms:.4g} ms over {len(timings[best])} timing(s), "
                                   f"{gap * 100:.1f}% ahead of the next")


def note_key(note: str) -> str:
    """The part of a proposal note that names its configuration ('family CONFIG'), without the reason."""
    return note.split(":", 1)[0].strip()


def timings_by_config(history, prefixes: tuple[str, ...]) -> dict[str, list[float]]:
    """{note key: [median_ms of each passing attempt]} for the attempts whose notes start with one of prefixes."""
    out: dict[str, list[float]] = {}
    for attempt in history:
        note = attempt.note or ""
        if not note.startswith(prefixes) or attempt.status != "ok" or attempt.median_ms is None:
            continue
        out.setdefault(note_key(note), []).append(float(attempt.median_ms))
    return out
