"""The ncu cross-check at the end of a run: on the best kernel only, its outcome stored, a rejection demoting it.

The loop runs as on a GPU through its seams: `machine=("cuda", ...)` makes the run a timed one, a
scripted proposer and verify_fn give kernels with known claimed times, and `crosscheck_fn` stands in
for ncu's measurement (a device time per kernel) while the decision is verifier.timing's own.

    .venv/bin/python -m pytest tests/agent/test_graph_crosscheck.py -q
"""

from __future__ import annotations

from pathlib import Path

import pytest

from agent.analysis import Analysis
from agent.config import OptimizeConfig
from agent.graph import optimize
from agent.proposers.base import Proposal, Proposer
from agent.store import Store
from verifier import timing
from verifier.records import Timing, VerifyResult

TASK = '''import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return x * 2.0


def get_inputs():
    return [torch.randn(64, 64)]


def get_init_inputs():
    return []
'''

SLOW = "# claimed 0.30 ms\nclass ModelNew: pass\n"      # kernels by their claimed median
FAST = "# claimed 0.20 ms\nclass ModelNew: pass\n"
CLAIMED_MS = {SLOW: 0.30, FAST: 0.20}


class OneRound(Proposer):
    """Both kernels in round one, nothing after."""

    name = "scripted"

    def propose(self, ctx):
        return [Proposal(source=SLOW), Proposal(source=FAST)] if ctx.round == 1 else []


def claimed(task, source, config) -> VerifyResult:
    ms = CLAIMED_MS[source]
    t = Timing(median_ms=ms, min_ms=ms, mean_ms=ms, p10_ms=ms, p90_ms=ms, reps=100, method="graph")
    return VerifyResult(status="ok", reason="correct on every trial", task=task.name, device="NVIDIA H200",
                        ran=True, trials=5, timing=t, speedups={"eager": 0.5 / ms})


class FakeNcu:
    """ncu's device time per kernel (the measurement stood in), decided by verifier.timing.ncu_check."""

    def __init__(self, device_ms: dict[str, float]):
        self.device_ms, self.checked = device_ms, []

    def __call__(self, task, source, result):
        self.checked.append(source)
        return timing.ncu_check(result.timing.median_ms, self.device_ms[source], kernels=1, streams=1, calls=3)


@pytest.fixture
def task_path(tmp_path) -> Path:
    path = tmp_path / "double.py"
    path.write_text(TASK)
    return path


def run_loop(tmp_path, task_path, crosscheck_fn, machine=("cuda", "NVIDIA H200")):
    config = OptimizeConfig(results_dir=str(tmp_path / "results"), device="cpu", candidates=2, max_iters=1)
    run = optimize(task_path, config, proposer=OneRound(), verify_fn=claimed, profile_fn=None,
                   analyze_fn=lambda *args: Analysis(gpu=machine[1]),
                   machine=machine, crosscheck_fn=crosscheck_fn)
    return run, Store(config.results_dir)


def test_only_the_best_kernel_is_cross_checked(tmp_path, task_path):
    ncu = FakeNcu({SLOW: 0.28, FAST: 0.19})
    run, store = run_loop(tmp_path, task_path, ncu)
    assert ncu.checked == [FAST]
    assert run.best_attempt == 2
    assert run.best_ncu_check.startswith("ncu cross-check: consistent (claimed 0.2000 ms")


def test_the_outcome_is_stored_on_the_best_attempt_and_the_run(tmp_path, task_path):
    run, store = run_loop(tmp_path, task_path, FakeNcu({SLOW: 0.28, FAST: 0.19}))
    best = store.load_attempt(run.run_id, 2)
    assert best.verify.ncu_check.status == "consistent" and best.verify.ncu_check.ncu_ms == 0.19
    assert store.load_attempt(run.run_id, 1).verify.ncu_check is None
    assert store.load_run(run.run_id).best_ncu_check == run.best_ncu_check
    [listed] = store.list_runs()
    assert listed.best_ncu_check == run.best_ncu_check                # through the index too


def test_an_inconsistent_best_is_rejected_and_the_next_best_checked(tmp_path, task_path):
    # FAST claims 0.20 ms but its kernels took 0.40 ms of device time: more than 1.25x over the claim
    ncu = FakeNcu({SLOW: 0.28, FAST: 0.40})
    run, store = run_loop(tmp_path, task_path, ncu)
    assert ncu.checked == [FAST, SLOW]
    rejected = store.load_attempt(run.run_id, 2)
    assert rejected.status == "rejected" and rejected.reason.startswith("timing inconsistent: claimed 0.2000 ms")
    assert "0.4000 ms of device time" in rejected.reason
    assert rejected.verify.status == "rejected" and rejected.verify.timing is None
    assert run.best_attempt == 1 and store.best_source(run.run_id) == SLOW
    assert run.best_ncu_check.startswith("ncu cross-check: consistent (claimed 0.3000 ms")
    assert "rejected by the ncu cross-check" in run.stop_reason


def test_a_run_whose_every_kernel_is_inconsistent_has_no_best(tmp_path, task_path):
    run, store = run_loop(tmp_path, task_path, FakeNcu({SLOW: 0.50, FAST: 0.40}))
    assert run.status == "failed" and run.best_attempt is None
    assert store.best_source(run.run_id) is None
    assert run.best_ncu_check.startswith("ncu cross-check: inconsistent (timing inconsistent: claimed 0.3000 ms")


def test_without_a_gpu_the_run_says_the_check_was_not_run(tmp_path, task_path):
    run, store = run_loop(tmp_path, task_path, crosscheck_fn=None, machine=("cpu", ""))
    assert run.best_ncu_check == "ncu cross-check: not run (nothing was timed (no GPU): no claimed time to check)"
    assert store.load_attempt(run.run_id, run.best_attempt).verify.ncu_check.status == "not_run"


def test_a_failing_check_is_not_run_not_a_pass(tmp_path, task_path):
    def broken(task, source, result):
        raise OSError("ncu vanished")

    run, store = run_loop(tmp_path, task_path, broken)
    assert run.best_ncu_check == "ncu cross-check: not run (the cross-check failed: OSError: ncu vanished)"
    assert run.best_attempt == 2


MEDIUM = "# claimed 0.25 ms\nclass ModelNew: pass\n"
CLAIMED_MS[MEDIUM] = 0.25


class SecondRound(OneRound):
    """Round one's kernels, then one more in round two."""

    def propose(self, ctx):
        return [Proposal(source=MEDIUM)] if ctx.round == 2 else super().propose(ctx)


def test_a_resumed_run_races_the_kernel_that_survived_not_the_rejected_one(tmp_path, task_path):
    ncu = FakeNcu({SLOW: 0.28, FAST: 0.40, MEDIUM: 0.24})
    run, store = run_loop(tmp_path, task_path, ncu)
    assert run.best_attempt == 1
    config = OptimizeConfig(results_dir=str(tmp_path / "results"), device="cpu", candidates=2, max_iters=2,
                            keep_going=True)
    profiled = []
    resumed = optimize(None, config, resume=run.run_id, proposer=SecondRound(), verify_fn=claimed,
                       profile_fn=lambda task, source: profiled.append(source),
                       analyze_fn=lambda *args: Analysis(gpu="NVIDIA H200"), machine=("cuda", "NVIDIA H200"),
                       crosscheck_fn=ncu)
    # 0.25 ms beats the surviving 0.30 ms in the loop itself (so it is profiled as its new best); against the
    # rejected 0.20 ms it would not have
    assert profiled == [MEDIUM]
    assert resumed.best_attempt == 3 and store.best_source(run.run_id) == MEDIUM
    assert ncu.checked == [FAST, SLOW, MEDIUM]                      # nothing checked twice
    assert resumed.best_ncu_check.startswith("ncu cross-check: consistent (claimed 0.2500 ms")


def test_a_ctrl_c_during_the_cross_check_is_the_loops_interruption_counted_once(tmp_path, task_path):
    # on the H200 a board cut a run during its cross-check, and the run's wall time came out as 293 s for
    # 151 s of real time: the session counted by the loop's last decide, then again from its start
    import time

    def interrupted(task, source, result):
        time.sleep(0.3)
        raise KeyboardInterrupt

    started = time.monotonic()
    run, store = run_loop(tmp_path, task_path, interrupted)
    real = time.monotonic() - started
    assert run.status == "interrupted" and "--resume" in run.stop_reason
    assert run.best_attempt == 2                       # the verified kernel stays the run's best so far
    stored = store.load_run(run.run_id)
    assert 0.3 <= stored.wall_s <= real + 0.05, (stored.wall_s, real)
    assert abs(sum(stored.phases.values()) - stored.wall_s) < 1e-6
