"""The bounds every VerifyConfig value must keep, so that no setting can weaken a verdict.

`--trials 0` would pass a kernel that was never compared; `--reps 0` would time
nothing; a negative `hidden_trials` or a zero timeout is a setting no check
means. Each numeric field has its minimum here, once; the command line's
argparse types (agent/flags.py) and `check_verify_config` read them from here.

    from verifier.config_checks import check_verify_config
    check_verify_config(VerifyConfig(trials=0))   # ValueError: --trials must be at least 1, got 0
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from verifier.records import TIMING_METHODS, VerifyConfig

DEVICES = ("auto", "cpu", "cuda")


@dataclass(frozen=True)
class Bound:
    """The least value a numeric setting may take, and the flag a person sets it with."""

    flag: str
    minimum: float
    inclusive: bool = True      # False: the value must be above the minimum (a time limit above 0)

    def problem(self, value) -> str | None:
        """Why `value` is not allowed, or None when it is."""
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return f"{self.flag} must be a number, got {value!r}"
        if value != value:  # NaN compares false with every bound
            return f"{self.flag} must be a number, got {value!r}"
        if self.inclusive and value < self.minimum:
            return f"{self.flag} must be at least {self.minimum:g}, got {value:g}"
        if not self.inclusive and value <= self.minimum:
            return f"{self.flag} must be more than {self.minimum:g}, got {value:g}"
        return None


# NOTE: one entry per numeric VerifyConfig field; a new numeric field without one fails check_verify_config.
VERIFY_BOUNDS: dict[str, Bound] = {
    "trials": Bound("--trials", 1),                       # correctness trials: none would pass anything
    "seed": Bound("--seed", 0),
    "timeout_s": Bound("--verify-timeout", 0, inclusive=False),
    "output_cap_bytes": Bound("output_cap_bytes", 0),
    "reps": Bound("--reps", 1),                           # timed repetitions: a median of nothing is no time
    "warmup": Bound("--warmup", 0),
    "hidden_trials": Bound("--hidden-trials", 0),
    "memory_budget_bytes": Bound("memory_budget_bytes", 1),   # None (the default): the device's free memory
}


def check_verify_config(config: VerifyConfig) -> None:
    """Raise ValueError naming the flag and its minimum for the first value out of bounds."""
    for f in dataclasses.fields(config):
        value = getattr(config, f.name)
        if value is None and f.default is None:   # an optional setting left unset (memory_budget_bytes)
            continue
        if f.name in VERIFY_BOUNDS:
            problem = VERIFY_BOUNDS[f.name].problem(value)
            if problem:
                raise ValueError(problem)
        elif isinstance(value, (int, float)) and not isinstance(value, bool):
            raise ValueError(f"VerifyConfig.{f.name} is numeric but has no bound in verifier.config_checks")
    if config.device not in DEVICES:
        raise ValueError(f"--device must be one of {', '.join(DEVICES)}, got {config.device!r}")
    if config.timing not in TIMING_METHODS:
        raise ValueError(f"--timing must be one of {', '.join(TIMING_METHODS)}, got {config.timing!r}")
