"""argparse types for kgen's numeric flags: a value out of bounds is a usage error (exit 2) naming the minimum.

    p.add_argument("--trials", type=positive_int)     # --trials 0: "argument --trials: must be at least 1, got 0"

The minimums of the verifier's settings are verifier.config_checks' (VERIFY_BOUNDS);
these types say the same in argparse's words.
"""

from __future__ import annotations

import argparse


def _number(text: str, kind):
    try:
        return kind(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected {'an integer' if kind is int else 'a number'}, got {text!r}") \
            from None


def positive_int(text: str) -> int:
    """An integer of at least 1 (trials, repetitions, rounds, workers)."""
    value = _number(text, int)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def nonneg_int(text: str) -> int:
    """An integer of at least 0 (warm-up calls, hidden trials, a seed)."""
    value = _number(text, int)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be at least 0, got {value}")
    return value


def positive_float(text: str) -> float:
    """A number above 0 (a time limit in seconds, a budget)."""
    value = _number(text, float)
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"must be a finite number more than 0, got {text}")
    return value


def small_shapes(text: str) -> dict:
    """`batch_size=7,dim=129` for --small-shapes (verifier.shapes.parse_small_shapes)."""
    from verifier.shapes import parse_small_shapes

    try:
        return parse_small_shapes(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
