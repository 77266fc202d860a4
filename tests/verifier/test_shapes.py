"""verifier.shapes: what a CPU check runs on when a KernelBench-size task has no get_small_inputs().

The tasks under tests/verifier/kernelbench/*_large.py are written in KernelBench's format at its
sizes (gigabytes of input), with no kgen extras.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import torch

from verifier.shapes import CpuBudget, parse_small_shapes, plan_cpu_check, shrink
from verifier.task import TaskError, import_task_module, load_task

KB = Path(__file__).parent / "kernelbench"
LARGE = ["19_ReLU_large", "23_Softmax_large", "36_RMSNorm_large", "40_LayerNorm_large", "Gemm_large",
         "76_Gemm_Add_ReLU_large"]
ELEMENT_BUDGET = 1_000_000


@pytest.mark.parametrize("name", LARGE)
def test_large_task_gets_derived_shapes(name):
    assert plan_cpu_check(KB / f"{name}.py").how == "derived"


@pytest.mark.parametrize("name", LARGE)
def test_derived_shapes_are_small(name):
    plan = plan_cpu_check(KB / f"{name}.py")
    assert plan.footprint.bytes / 4 < ELEMENT_BUDGET     # fp32 tasks: inputs + outputs + parameters


@pytest.mark.parametrize("name", LARGE)
def test_reference_runs_on_the_derived_shapes(name):
    path = KB / f"{name}.py"
    plan = plan_cpu_check(path)
    module = import_task_module(path, f"kgen_test_{name}", overrides=plan.overrides, device="cpu")
    with torch.no_grad():
        out = module.Model(*module.get_init_inputs())(*module.get_inputs())
    assert torch.isfinite(out).all() and 0 < out.numel() < ELEMENT_BUDGET


def test_note_names_both_shapes():
    plan = plan_cpu_check(KB / "19_ReLU_large.py")
    assert "instead of (4096, 393216)" in plan.note and "checked on derived shapes (" in plan.note


def test_derived_sizes_are_odd_where_nothing_asks_otherwise():
    plan = plan_cpu_check(KB / "19_ReLU_large.py")
    assert all(v % 2 == 1 for v in plan.overrides.values())


def test_equal_constants_stay_equal():
    plan = plan_cpu_check(KB / "Gemm_large.py")
    assert plan.overrides["in_features"] == plan.overrides["out_features"] < 8192


def test_sizes_in_init_inputs_follow_the_constants():
    # LayerNorm's normalized shape is built from the constants in get_init_inputs(): the model's weight follows
    path = KB / "40_LayerNorm_large.py"
    plan = plan_cpu_check(path)
    module = import_task_module(path, "kgen_test_ln", overrides=plan.overrides)
    assert tuple(module.Model(*module.get_init_inputs()).ln.weight.shape) == module.get_inputs()[0].shape[1:]


def test_divisibility_the_reference_needs_is_kept():
    plan = plan_cpu_check(KB / "35_GroupNorm_large.py")
    assert plan.overrides["features"] % 8 == 0 and plan.overrides["features"] < 64


def test_small_constants_are_left_alone():
    mapping = shrink([3, 8, 16, 4096], 0.5)
    assert [mapping[3], mapping[8], mapping[16]] == [3, 8, 16]


def test_shrink_keeps_divisibility_when_asked():
    mapping = shrink([12, 768], 0.5, keep_divisibility=True)
    assert mapping[768] % 12 == 0


def test_underivable_task_is_a_clear_error():
    with pytest.raises(TaskError, match=r"get_small_inputs\(\).*get_small_init_inputs\(\).*--small-shapes"):
        plan_cpu_check(KB / "inline_sizes_relu.py")


def test_underivable_task_fails_fast():
    plan_cpu_check(KB / "Gemm_large.py")   # torch, the meta kernels and the FLOP counter warmed up
    started = time.perf_counter()
    with pytest.raises(TaskError):
        load_task(KB / "inline_sizes_relu.py", device="cpu")
    assert time.perf_counter() - started < 5.0


def test_derivation_that_the_budget_cannot_meet_is_a_clear_error():
    tiny = CpuBudget(max_bytes=100, max_flops=1, target_bytes=100, target_flops=1)
    with pytest.raises(TaskError, match="the smallest derived shapes need"):
        plan_cpu_check(KB / "19_ReLU_large.py", budget=tiny)


def test_manual_overrides_set_the_shapes():
    plan = plan_cpu_check(KB / "19_ReLU_large.py", {"batch_size": 7, "dim": 129})
    assert (plan.how, plan.footprint.input_shapes) == ("manual", ((7, 129),))


def test_manual_override_of_an_unknown_name_lists_the_constants():
    with pytest.raises(TaskError, match="batch_sise is not a module-level integer constant.*batch_size=4096"):
        plan_cpu_check(KB / "19_ReLU_large.py", {"batch_sise": 7})


def test_manual_overrides_still_too_large_are_an_error():
    with pytest.raises(TaskError, match="give smaller values"):
        plan_cpu_check(KB / "19_ReLU_large.py", {"batch_size": 4096})


def test_manual_overrides_the_reference_rejects_are_an_error():
    with pytest.raises(TaskError, match="the reference raised"):
        plan_cpu_check(KB / "35_GroupNorm_large.py", {"batch_size": 3, "features": 7, "dim1": 5, "dim2": 5})


def test_task_with_small_inputs_uses_them():
    plan = plan_cpu_check(Path(__file__).parents[2] / "tasks" / "softmax.py")
    assert (plan.how, plan.overrides) == ("small_inputs", {})


def test_task_that_fits_runs_as_written():
    assert plan_cpu_check(KB / "19_ReLU.py").how == "fits"


def test_small_init_inputs_alone_is_an_error(tmp_path):
    task = tmp_path / "half.py"
    task.write_text((KB / "Gemm_large.py").read_text() + "\n\ndef get_small_init_inputs():\n    return [5, 7]\n")
    with pytest.raises(TaskError, match="get_small_init_inputs\\(\\) but no get_small_inputs\\(\\)"):
        plan_cpu_check(task)


def test_load_task_on_the_cpu_carries_the_overrides():
    task = load_task(KB / "19_ReLU_large.py", device="cpu")
    assert task.small_overrides == plan_cpu_check(KB / "19_ReLU_large.py").overrides and task.derived_note


def test_load_task_for_a_gpu_derives_nothing():
    task = load_task(KB / "19_ReLU_large.py", device="cuda")
    assert (task.small_overrides, task.derived_note) == (None, "")


def test_load_task_passes_manual_overrides_on():
    task = load_task(KB / "19_ReLU_large.py", small_shapes={"batch_size": 5, "dim": 33}, device="cpu")
    assert task.small_overrides == {"batch_size": 5, "dim": 33}


def test_parse_small_shapes():
    assert parse_small_shapes("batch_size=7, dim=129,shape=(3,5)") == {"batch_size": 7, "dim": 129, "shape": (3, 5)}


@pytest.mark.parametrize("text", ["batch_size", "batch_size=0", "dim=x", "=3", "shape=(3,5"])
def test_parse_small_shapes_rejects_malformed(text):
    with pytest.raises(ValueError):
        parse_small_shapes(text)


def test_derived_shapes_never_leave_the_output_empty(tmp_path):
    task = tmp_path / "tail.py"
    task.write_text((KB / "19_ReLU_large.py").read_text().replace("return torch.relu(x)", "return torch.relu(x[:, 2000:])"))
    plan = plan_cpu_check(task)
    assert plan.overrides["dim"] > 2000
