"""The spiked trial: inputs with a few large values, where a task reduces, so that every input element counts.

    .venv/bin/python -m pytest tests/verifier/test_spiked.py -q

A cross-entropy over GPT-2's vocabulary can be estimated from half of each row's logits (or from none but
the target's: logsumexp of n standard normals is close to log n + 1/2) so closely that the mean over
thousands of rows passes fp32's tolerance: the estimators below pass on the task's i.i.d. logits at the
benchmark's vocabulary and fail on spiked ones. The judge-level tests show where the trial runs.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from verifier.correctness import compare_outputs
from verifier.inputs import SPIKE_EVERY, spike_inputs
from verifier.records import VerifyConfig
from verifier.task import load_task
from verifier.verify import verify

ROOT = Path(__file__).resolve().parents[2]
ATOL = RTOL = 1e-4      # tasks/cross_entropy.py's fp32 defaults


def test_spikes_are_one_in_spike_every_of_each_float_tensor_and_the_same_for_the_same_seed():
    a, t, idx = torch.randn(64, 1000), torch.randn(1000, 64).t(), torch.arange(10)
    a0, t0, idx0 = a.clone(), t.clone(), idx.clone()
    assert spike_inputs([a, t, idx, 3.0], seed=5) == 2
    for x, x0 in ((a, a0), (t, t0)):
        changed = x != x0
        assert int(changed.sum()) <= max(1, x.numel() // SPIKE_EVERY) and int(changed.sum()) >= 1
        assert float((x[changed] - x0.mean()).abs().min()) > 8 * float(x0.std())   # far from the rest
    assert torch.equal(idx, idx0)                   # indices untouched
    again = a0.clone()
    spike_inputs([again, t0.clone(), idx0.clone(), 3.0], seed=5)
    assert torch.equal(again, a)


def test_a_constant_or_non_finite_tensor_is_not_spiked():
    ones, bad = torch.ones(5000), torch.randn(5000)
    bad[7] = float("nan")
    assert spike_inputs([ones, bad], seed=1) == 0 and bool((ones == 1).all())


def _half_blocks(logits, targets, block=4096):
    # logsumexp over every other block of columns, the sum scaled up by what was skipped
    cols = torch.cat([torch.arange(s, min(s + block, logits.shape[1])) for s in range(0, logits.shape[1], 2 * block)])
    part = logits[:, cols]
    lse = torch.logsumexp(part, dim=1) + math.log(logits.shape[1] / len(cols))
    return (lse - logits.gather(1, targets[:, None])[:, 0]).mean()


def _target_only(logits, targets):
    # reads one logit a row: E[sum exp(x)] = n e^(1/2) for standard normal logits
    return (math.log(logits.shape[1]) + 0.5 - logits.gather(1, targets[:, None])[:, 0]).mean()


@pytest.mark.parametrize("estimate", [_half_blocks, _target_only], ids=["half_blocks", "target_only"])
def test_an_estimate_from_part_of_the_logits_passes_iid_inputs_and_fails_spiked_ones(estimate):
    torch.manual_seed(0)
    rows, vocab = 2048, 50257              # the benchmark's vocabulary; a quarter of its rows (memory here)
    logits, targets = torch.randn(rows, vocab), torch.randint(0, vocab, (rows,))
    assert compare_outputs(estimate(logits, targets), F.cross_entropy(logits, targets), ATOL, RTOL) is None
    spike_inputs([logits, targets], seed=3)
    problem = compare_outputs(estimate(logits, targets), F.cross_entropy(logits, targets), ATOL, RTOL)
    assert problem is not None, "the spiked trial must catch it"


CPU = VerifyConfig(device="cpu", timeout_s=150)


def test_the_spiked_trial_runs_where_the_task_reduces_and_not_where_it_maps():
    honest = verify(load_task(ROOT / "tasks" / "cross_entropy.py"),
                    (ROOT / "tests" / "verifier" / "candidates" / "good" / "cross_entropy.py").read_text(), CPU)
    assert honest.status == "ok" and "spiked trial" in honest.phases, (honest.reason, honest.phases)
    elementwise = verify(load_task(ROOT / "tasks" / "gelu.py"),
                         (ROOT / "tests" / "verifier" / "candidates" / "good" / "gelu.py").read_text(), CPU)
    assert elementwise.status == "ok" and "spiked trial" not in elementwise.phases, elementwise.phases
