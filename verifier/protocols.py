"""Timing protocols: what each `--timing` method measures, the statistic it reports, and how a table names it.

    from verifier.protocols import PROTOCOLS, protocol_line, reported_ms
    protocol_line("kernelbench", reps=100)
    # 'kernelbench (KernelBench's: CUDA events around each call, the same inputs every call, L2 flushed, mean of 100)'
    reported_ms(timing)     # the figure speedups are taken from: the mean for kernelbench, the median otherwise

Two protocols that are both legitimate give different numbers for one kernel:
a time, and a speedup, mean nothing without the protocol beside it. Every table that shows times names it from here, and
speedups take the statistic the protocol reports, so that a kernelbench board
compares means as KernelBench does. The methods themselves live in
verifier.timing; this module imports no torch, so the parent process and the
agent can read it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from verifier.records import TIMING_METHODS

if TYPE_CHECKING:
    from verifier.records import Timing


@dataclass(frozen=True)
class Protocol:
    """One timing method as a person reads it."""

    name: str           # the --timing value
    statistic: str      # "median" or "mean": the figure a time and a speedup are reported as
    how: str            # how each call is timed, in words


PROTOCOLS: dict[str, Protocol] = {
    "graph": Protocol("graph", "median", "CUDA-graph replays, fresh inputs every call, L2 flushed"),
    "events": Protocol("events", "median", "CUDA events around each call as issued, fresh inputs every call, "
                                           "L2 flushed"),
    "kernelbench": Protocol("kernelbench", "mean", "KernelBench's: CUDA events around each call, the same inputs "
                                                   "every call, L2 flushed"),
}
assert set(PROTOCOLS) == set(TIMING_METHODS), "every timing method needs its protocol described here"


def protocol(method: str) -> Protocol:
    """The protocol of a --timing method; ValueError naming the known ones for any other."""
    if method not in PROTOCOLS:
        raise ValueError(f"unknown timing method {method!r}; expected one of {', '.join(PROTOCOLS)}")
    return PROTOCOLS[method]


def protocol_line(method: str, reps: int) -> str:
    """"graph (CUDA-graph replays, ..., median of 100)": the protocol and its statistic, for a table's header."""
    p = protocol(method)
    return f"{p.name} ({p.how}, {p.statistic} of {reps})"


def reported_ms(timing: "Timing") -> float:
    """The time a protocol reports: the mean of the trials for kernelbench, the median for the others."""
    return timing.mean_ms if protocol(timing.method).statistic == "mean" else timing.median_ms


def timing_line(method: str, reps: int | None = None, compile_modes: tuple[str, ...] | None = None) -> str:
    """The protocol and the baselines a table's times rest on, in one line (VerifyConfig's defaults where not given):
    'kernelbench (..., mean of 100); baselines: eager and torch.compile (default, max-autotune-no-cudagraphs),
    each timed the same way'."""
    from verifier.records import VerifyConfig

    reps = VerifyConfig.reps if reps is None else reps
    modes = VerifyConfig.compile_modes if compile_modes is None else compile_modes
    compiled = f" and torch.compile ({', '.join(modes)})" if modes else ""
    return f"{protocol_line(method, reps)}; baselines: eager{compiled}, each timed the same way"
