"""The heuristic proposer's first kernel for every covered task passes the real verifier.

Each proposal goes through `verify()` exactly as `kgen optimize` sends it: a fresh sandboxed
process, static checks, the op audit, the launch counter and output provenance, five trials on
the task's small inputs under the Triton interpreter.
"""

from pathlib import Path

import pytest

from agent.proposers.base import ProposeContext
from agent.proposers.heuristic import HeuristicProposer
from verifier.records import VerifyConfig
from verifier.task import load_task
from verifier.verify import verify

TASKS = Path(__file__).resolve().parents[2] / "tasks"
COVERED = ["gelu", "pointwise_chain", "swiglu", "transpose", "softmax", "log_softmax", "layernorm", "rmsnorm",
           "sum_dim", "mean_dim", "max_dim", "cross_entropy", "matmul", "matmul_bf16", "bmm", "linear_bias_gelu"]


@pytest.mark.parametrize("name", COVERED)
def test_first_heuristic_kernel_passes_verification(name):
    task = load_task(TASKS / f"{name}.py")
    proposals = HeuristicProposer(task).propose(
        ProposeContext(task_name=name, task_source=task.source, backend="triton", analysis={}, round=1, n=1))
    assert proposals and proposals[0].source, proposals
    result = verify(task, proposals[0].source, VerifyConfig(device="cpu", timeout_s=150))
    assert result.status == "ok", (result.status, result.reason, result.feedback[-800:])
    assert result.trials == 5
