"""The heuristic proposer's first kernel for every covered task passes the real verifier.

Each proposal goes through `verify()` exactly as `kgen optimize` sends it: a fresh sandboxed
process, static checks, the op audit, the launch counter and output provenance, five trials on
the task's small inputs under the Triton interpreter.
"""

from pathlib import Path

import pytest

from agent.analysis import Analysis
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
        ProposeContext(task_name=name, task_source=task.source, backend="triton", analysis=Analysis(), round=1, n=1))
    assert proposals and proposals[0].source, proposals
    result = verify(task, proposals[0].source, VerifyConfig(device="cpu", timeout_s=150))
    assert result.status == "ok", (result.status, result.reason, result.feedback[-800:])
    assert result.trials == 5


LAYOUT_TASKS = {
    # A read transposed (KernelBench's Matmul_with_transposed_A): the tf32x3 launcher copies it K-major
    "transposed_a": ("torch.matmul(a.T, b)", "torch.randn(40, 24), torch.randn(40, 36)"),
    # B shared across a batch (3D tensor-matrix) and N-major: copied K-major once, not once per batch
    "shared_b": ("torch.matmul(a, b)", "torch.randn(3, 20, 24), torch.randn(24, 36)"),
    # both transposed
    "transposed_both": ("torch.matmul(a.T, b.T)", "torch.randn(24, 20), torch.randn(36, 24)"),
}


@pytest.mark.parametrize("name", sorted(LAYOUT_TASKS))
def test_fp32_factor_layouts_pass_with_three_tf32_passes(tmp_path, name):
    expr, inputs = LAYOUT_TASKS[name]
    path = tmp_path / f"{name}.py"
    path.write_text("import torch\nimport torch.nn as nn\n\n\nclass Model(nn.Module):\n"
                    f"    def forward(self, a, b):\n        return {expr}\n\n\n"
                    f"def get_inputs():\n    return [{inputs}]\n\n\ndef get_init_inputs():\n    return []\n")
    task = load_task(path)
    [proposal] = HeuristicProposer(task).propose(
        ProposeContext(task_name=name, task_source=task.source, backend="triton", analysis=Analysis(), round=1, n=1))
    assert proposal.source and "TF32X3=1" in proposal.note and 'input_precision="tf32x3"' in proposal.source
    result = verify(task, proposal.source, VerifyConfig(device="cpu", timeout_s=150))
    assert result.status == "ok", (result.status, result.reason, result.feedback[-800:])


# Templates at the configurations the GPU walk proposes (the default for the benchmark sizes, and the variants
# its moves lead to), checked on the GPU by the verifier on the task's own inputs: the interpreter runs small
# inputs only, where a looped row, a 1-D indexed pass or a 128x256 tile never meet the sizes they are for.
GPU_CASES = [
    ("log_softmax", None),                                   # looped rows, per-lane online max and sum
    ("cross_entropy", None),
    ("pointwise_chain", "pointwise BLOCK=1024 TILE_C=128 num_warps=4 INDEXED=1"),
    ("matmul_bf16", "matmul BLOCK_M=128 BLOCK_N=256 BLOCK_K=64 GROUP_M=8 num_warps=8 num_stages=4"),
    ("matmul", None),                                        # fp32 products as three TF32 passes (tf32x3)
    ("linear_bias_gelu", None),                              # tf32x3 on nn.Linear's K-major weight, no copy
    ("rmsnorm", "rowwise ONE_PASS_MAX=16384 LOOP_BLOCK=4096 TILE=4096 num_warps=4"),
]


@pytest.mark.gpu
@pytest.mark.parametrize("name, note", GPU_CASES)
def test_gpu_configurations_pass_verification_on_the_benchmark_inputs(name, note):
    import torch

    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    from agent.proposers.heuristic import configs
    from agent.proposers.heuristic.proposer import _emitter

    task = load_task(TASKS / f"{name}.py")
    proposer = HeuristicProposer(task)
    if note is None:
        [proposal] = proposer.propose(ProposeContext(task_name=name, task_source=task.source, backend="triton",
                                                     analysis=Analysis(gpu="cuda"), round=1, n=1))
        source = proposal.source
    else:
        family, cfg = configs.parse_note(note)
        assert configs.valid(family, cfg, proposer.recognition.problem, on_gpu=True)
        source = _emitter(family)(proposer.recognition, cfg, note)
    result = verify(task, source, VerifyConfig(device="cuda", time_it=False, baselines=False, timeout_s=300))
    assert result.status == "ok", (result.status, result.reason, result.feedback[-800:])
    assert result.device == torch.cuda.get_device_name() and result.trials == 5   # ran on the GPU, not the interpreter
