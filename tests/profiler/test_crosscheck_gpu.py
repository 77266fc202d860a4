"""The ncu cross-check on a real GPU with the real ncu: an honest kernel is consistent, an under-reported claim is not.

    PYTHONPATH=$PWD python3 -m pytest tests/profiler/test_crosscheck_gpu.py -q -x
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from agent.cli import main
from verifier import timing

ROOT = Path(__file__).resolve().parents[2]
SOFTMAX = ROOT / "tasks" / "softmax.py"
GOOD = ROOT / "tests" / "verifier" / "candidates" / "good" / "softmax.py"
UNDER_REPORTING = ROOT / "tests" / "verifier" / "exploits" / "patch_cuda_event.py"

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module", autouse=True)
def ncu_here():
    from profiler.crosscheck import strict_problem

    problem = strict_problem("cuda")
    if problem:
        pytest.skip(problem)


def strict(kernel: Path, capsys) -> tuple[int, dict]:
    code = main(["verify", str(SOFTMAX), str(kernel), "--strict", "--json", "--no-baselines", "--reps", "50"])
    return code, json.loads(capsys.readouterr().out)


def test_strict_verify_of_an_honest_softmax_is_consistent(capsys):
    code, result = strict(GOOD, capsys)
    check = result["ncu_check"]
    assert (code, result["status"], check["status"]) == (0, "ok", "consistent"), (result["reason"], check)
    assert check["kernels"] >= 1 and check["ncu_ms"] > 0
    # the claim is a graph replay's median, ncu's time the kernel's alone: within the margin of each other
    assert check["claimed_ms"] * timing.NCU_MARGIN + timing.NCU_SLACK_MS >= check["ncu_ms"]


def test_a_claim_under_reported_inside_the_blocks_margin_is_rejected_by_ncu():
    # What a candidate that reached its own process's timing could report: half its time. The judge's block
    # allows a claim down to (per call - 0.25 ms) / 1.5, which half of a 0.27 ms softmax is inside.
    from profiler.crosscheck import apply_ncu_check, cross_check
    from verifier.records import VerifyConfig
    from verifier.task import load_task
    from verifier.verify import verify

    task, source = load_task(SOFTMAX), GOOD.read_text()
    honest = verify(task, source, VerifyConfig(device="cuda", baselines=False, reps=50))
    assert honest.status == "ok", honest.reason
    forged = copy.deepcopy(honest)
    forged.timing.median_ms = honest.timing.median_ms / 2
    check = cross_check(task, source, forged)
    assert check.status == "inconsistent", check.reason
    assert f"claimed {forged.timing.median_ms:.4f} ms per call" in check.reason
    assert f"{check.ncu_ms:.4f} ms of device time" in check.reason
    apply_ncu_check(forged, check)
    assert forged.status == "rejected" and forged.reason.startswith("timing inconsistent")


def test_an_exploit_that_under_reports_its_time_is_rejected_under_strict(capsys):
    code, result = strict(UNDER_REPORTING, capsys)
    assert code == 1 and result["status"] == "rejected", result["reason"]
    # rejected before any time was believed: the static checks or the integrity guard, else the ncu check
    assert ("monkey-patch" in result["reason"] or result["reason"].startswith("timing inconsistent")), result["reason"]


HONEST = sorted(p.stem for p in (ROOT / "tests" / "verifier" / "candidates" / "good").glob("*.py")
                if (ROOT / "tasks" / p.name).exists())


@pytest.mark.parametrize("name", HONEST)
def test_no_honest_kernel_is_called_inconsistent(name):
    # every known-good kernel of the suite, timed as the loop times it (graph replays), against ncu
    from profiler.crosscheck import cross_check
    from verifier.records import VerifyConfig
    from verifier.task import load_task
    from verifier.verify import verify

    task = load_task(ROOT / "tasks" / f"{name}.py")
    source = (ROOT / "tests" / "verifier" / "candidates" / "good" / f"{name}.py").read_text()
    result = verify(task, source, VerifyConfig(device="cuda", baselines=False, reps=50))
    assert result.status == "ok", result.reason
    check = cross_check(task, source, result)
    assert check.status == "consistent", check.reason
