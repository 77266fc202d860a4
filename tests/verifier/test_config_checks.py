"""verifier.config_checks: no VerifyConfig value can weaken a verdict."""

from __future__ import annotations

import dataclasses

import pytest

from verifier.config_checks import VERIFY_BOUNDS, check_verify_config
from verifier.records import VerifyConfig


def test_defaults_pass():
    check_verify_config(VerifyConfig())


@pytest.mark.parametrize("field, value, minimum", [
    ("trials", 0, "at least 1"), ("reps", 0, "at least 1"), ("warmup", -1, "at least 0"),
    ("hidden_trials", -1, "at least 0"), ("timeout_s", 0.0, "more than 0"), ("seed", -1, "at least 0"),
])
def test_out_of_bounds_names_the_minimum(field, value, minimum):
    with pytest.raises(ValueError, match=f"{VERIFY_BOUNDS[field].flag} must be {minimum}"):
        check_verify_config(VerifyConfig(**{field: value}))


def test_bool_is_not_a_count():
    with pytest.raises(ValueError, match="--trials must be a number"):
        check_verify_config(VerifyConfig(trials=True))


def test_nan_timeout_is_refused():
    with pytest.raises(ValueError, match="--verify-timeout must be a number"):
        check_verify_config(VerifyConfig(timeout_s=float("nan")))


def test_every_numeric_field_has_a_bound():
    numeric = {f.name for f in dataclasses.fields(VerifyConfig)
               if isinstance(f.default, (int, float)) and not isinstance(f.default, bool)}
    assert numeric <= set(VERIFY_BOUNDS)


def test_unknown_timing_is_refused():
    with pytest.raises(ValueError, match="--timing must be one of"):
        check_verify_config(VerifyConfig(timing="wallclock"))


def test_verify_itself_refuses_a_config_that_would_weaken_its_verdict():
    from pathlib import Path

    import pytest as _pytest

    from verifier.records import VerifyConfig
    from verifier.task import load_task
    from verifier.verify import verify

    task = load_task(Path(__file__).resolve().parents[2] / "tasks" / "softmax.py")
    with _pytest.raises(ValueError, match="--trials must be at least 1"):
        verify(task, "class ModelNew: pass\n", VerifyConfig(device="cpu", trials=0))
