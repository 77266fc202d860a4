"""agent/records.py: a failed run's closest attempt (test_run_records: tests/profiler has a test_records of its own).

    .venv/bin/python -m pytest tests/agent/test_run_records.py -q
"""

from __future__ import annotations

from agent.records import Attempt, closest_attempt
from verifier.records import VerifyResult


def attempt(number: int, status: str, trials: int = 0) -> Attempt:
    verdict = VerifyResult(status=status, reason=status, trials=trials) if status != "no_code" else None
    return Attempt(run_id="r", number=number, round=number, status=status, reason=status, verify=verdict)


def test_a_kernel_that_ran_and_was_wrong_is_closer_than_one_that_did_not_build():
    assert closest_attempt([attempt(1, "mismatch"), attempt(2, "compile_error")]).number == 1


def test_a_kernel_that_raised_is_closer_than_one_that_did_not_build():
    assert closest_attempt([attempt(1, "compile_error"), attempt(2, "runtime_error"), attempt(3, "no_code")]).number == 2


def test_among_mismatches_the_one_that_passed_more_trials_is_closer():
    assert closest_attempt([attempt(1, "mismatch", trials=3), attempt(2, "mismatch", trials=1)]).number == 1


def test_among_equals_the_latest_is_taken():
    assert closest_attempt([attempt(1, "compile_error"), attempt(2, "compile_error")]).number == 2


def test_a_run_without_attempts_has_no_closest():
    assert closest_attempt([]) is None
