"""KernelBench-size tasks, unchanged, checked end to end on the CPU: `kgen verify` of the heuristic proposer's kernel.

The tasks (tests/verifier/kernelbench/*_large.py) have no get_small_inputs() and inputs of up to 15 GB;
the verifier checks them on shapes derived from their size constants (verifier.shapes) and says so.

The proposer is run on a copy of the task with the derived constants written in: it builds the
reference's inputs itself, for real, from the file it is given (agent/proposers/heuristic/recognise.py),
so on the original it would allocate the full 6.4 GB inputs. The verdict is on the original file.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from agent.cli import main
from agent.analysis import Analysis
from agent.proposers.base import ProposeContext
from agent.proposers.heuristic import HeuristicProposer
from verifier.task import load_task, with_constants

KB = Path(__file__).resolve().parents[1] / "verifier" / "kernelbench"
LARGE = ["19_ReLU_large", "23_Softmax_large", "36_RMSNorm_large", "40_LayerNorm_large", "Gemm_large",
         "76_Gemm_Add_ReLU_large"]


def heuristic_kernel(path: Path, tmp_path: Path) -> Path:
    task = load_task(path, device="cpu")
    copy = tmp_path / path.name
    copy.write_text(ast.unparse(with_constants(ast.parse(task.source), task.small_overrides)))
    small = load_task(copy, device="cpu")
    [proposal] = HeuristicProposer(small).propose(ProposeContext(
        task_name=small.name, task_source=small.source, backend="triton", analysis=Analysis(), round=1, n=1))
    kernel = tmp_path / f"{path.stem}_kernel.py"
    kernel.write_text(proposal.source)
    return kernel


@pytest.mark.slow
@pytest.mark.parametrize("name", LARGE)
def test_heuristic_kernel_verifies_on_derived_shapes(name, tmp_path, capsys):
    task = KB / f"{name}.py"
    kernel = heuristic_kernel(task, tmp_path)
    code = main(["verify", str(task), str(kernel), "--device", "cpu", "--verify-timeout", "120"])
    out = capsys.readouterr().out
    assert code == 0 and out.startswith("OK"), out
    assert "note: checked on derived shapes" in out


@pytest.mark.slow
def test_verify_of_an_underivable_task_is_a_usage_error(capsys):
    code = main(["verify", str(KB / "inline_sizes_relu.py"), str(KB / "19_ReLU_triton.py"), "--device", "cpu"])
    assert code == 2 and "get_small_inputs()" in capsys.readouterr().err


@pytest.mark.slow
def test_verify_with_manual_small_shapes(capsys):
    code = main(["verify", str(KB / "19_ReLU_large.py"), str(KB / "19_ReLU_triton.py"), "--device", "cpu",
                 "--small-shapes", "batch_size=7,dim=129"])
    out = capsys.readouterr().out
    assert code == 0 and "--small-shapes batch_size=7,dim=129 gives, (7, 129)" in out, out
