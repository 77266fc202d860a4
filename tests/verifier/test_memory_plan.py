"""The memory plan: fewer copies where memory is short, harness_error with numbers where nothing fits, and an
out-of-memory of kgen's own never charged to the kernel (while one in the candidate's forward still is).

    .venv/bin/python -m pytest tests/verifier/test_memory_plan.py -q            # CPU (~1 min here)
    .venv/bin/python -m pytest tests/verifier/test_memory_plan.py -q -m gpu     # the GPU's own free memory

The end-to-end tests write KernelBench-format task files of their own (Model, get_inputs, get_init_inputs,
module-level sizes) and run the real judge and candidate process on the CPU; the out-of-memory errors are
real allocations the CPU allocator refuses (64 TiB), not mocks.
"""

from __future__ import annotations

import errno
import math
import sys
from pathlib import Path

import pytest
import torch

from verifier import memory_plan
from verifier.judge import CandidateProcess, judge
from verifier.memory_plan import Budget, MemoryShort, TaskMemory, phases, plan_memory
from verifier.records import VerifyConfig
from verifier.task import load_task
from verifier.verify import verify

FORGER = [sys.executable, str(Path(__file__).resolve().parent / "processes" / "forger.py")]
MiB = 1 << 20
GiB = 1 << 30
HUGE = 1 << 46   # 64 TiB: the CPU allocator refuses it at once (more than RAM and swap), nothing is touched

# KernelBench's format: sizes as module-level constants, inputs from get_inputs(), no get_small_inputs().
RELU_TASK = '''
import torch
import torch.nn as nn

batch_size = 16
dim = 4099


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x)


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return []
'''

RELU_KERNEL = '''
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def relu_kernel(out_ptr, in_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(in_ptr + offs, mask=mask, other=0.0)
    tl.store(out_ptr + offs, tl.maximum(x, 0.0), mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        out = torch.empty_like(x)
        n = x.numel()
        relu_kernel[(triton.cdiv(n, 8192),)](out, x, n, BLOCK=8192)
        return out
'''

# the candidate's own forward asks for 64 TiB before any kernel: its failure, not kgen's
GREEDY_KERNEL = RELU_KERNEL.replace("        x = x.contiguous()\n",
                                    f"        torch.empty({HUGE}, dtype=torch.uint8)\n        x = x.contiguous()\n")

# a reference that allocates beyond any host: the judge's own allocation fails, for real
HOG_REFERENCE_TASK = RELU_TASK.replace("        return torch.relu(x)",
                                       f"        torch.empty({HUGE}, dtype=torch.uint8)\n        return torch.relu(x)")

RELU_SET_BYTES = 16 * 4099 * 4


def _task(tmp_path, text: str, name: str = "relu_kb"):
    path = tmp_path / f"{name}.py"
    path.write_text(text)
    return load_task(path)


def _cpu(budget: int | None = None) -> VerifyConfig:
    return VerifyConfig(device="cpu", timeout_s=90, trials=2, memory_budget_bytes=budget)


def _peak(memory: TaskMemory, overlap: bool) -> int:
    return max(p.bytes(memory, 0) for p in phases(overlap, False, False, "cpu"))


# ---- the plan, as numbers


def test_a_plan_that_fits_reduces_nothing_and_says_nothing():
    m = TaskMemory(1 * GiB, 1 * GiB, 0, 0, True)
    plan = plan_memory(m, "cuda", Budget(139 * GiB, "139 GiB free"), timing=True, flush_bytes=120 * MiB)
    assert not plan.reduced and plan.overlap and not plan.snapshot_on_host and plan.note() == ""


def test_a_tighter_budget_holds_fewer_input_copies_and_the_note_names_the_numbers():
    m = TaskMemory(16 * GiB, 16 * GiB, 0, 0, True)
    full = plan_memory(m, "cuda", Budget(400 * GiB, "400 GiB free"), timing=True)
    budget = Budget(int(full.peak_bytes * 0.75), "96.0 GiB free of 139.8 GiB on the GPU")
    plan = plan_memory(m, "cuda", budget, timing=True)
    assert plan.reduced and plan.peak_bytes <= budget.bytes
    assert plan.input_copies < plan.default_input_copies
    note = plan.note()
    assert note.startswith("memory: at most") and "one input set 16.0 GiB" in note and "96.0 GiB free" in note


def test_the_plan_stops_at_its_minimum_with_the_numbers_and_what_to_do():
    m = TaskMemory(40 * GiB, 40 * GiB, 0, 40 * GiB, True)
    with pytest.raises(MemoryShort) as caught:
        plan_memory(m, "cuda", Budget(139 * GiB, "139.0 GiB free of 139.8 GiB on the GPU"), timing=True)
    text = str(caught.value)
    assert "one input set 40.0 GiB" in text and "139.0 GiB free" in text and "free the GPU" in text


def test_the_spot_checks_follow_the_disk_but_never_below_one():
    m = TaskMemory(8 * GiB, 8 * GiB, 0, 0, True)
    budget = Budget(139 * GiB, "139 GiB free")
    plan = plan_memory(m, "cuda", budget, timing=True, spot_checks=3, disk_free_bytes=17 * GiB)
    assert plan.spot_checks == memory_plan.SPOT_CHECKS_MIN and "spot-checked" in plan.note()
    with pytest.raises(MemoryShort, match="do not fit on disk"):
        plan_memory(m, "cuda", budget, timing=True, spot_checks=3, disk_free_bytes=10 * GiB)


def test_every_plan_keeps_a_fresh_set_besides_the_trials():
    # the re-check after timing and the hidden re-checks are phases of every timed plan, however reduced
    for overlap, on_host, refill in [(True, False, False), (False, True, True)]:
        names = [p.name for p in phases(overlap, on_host, True, "cuda", refill)]
        assert any(n.startswith("the re-check after timing") for n in names)
        assert any(n.startswith("a hidden re-check") for n in names)


def test_a_task_files_footprint_is_counted_on_meta_without_allocating(tmp_path):
    big = RELU_TASK.replace("batch_size = 16", "batch_size = 4096").replace("dim = 4099", "dim = 393216")
    path = tmp_path / "relu_big.py"
    path.write_text(big)
    m = memory_plan.task_memory_on_meta(str(path))    # 6 GiB a set: on the meta device, nothing is allocated
    assert m.input_bytes == m.output_bytes == 4096 * 393216 * 4 and not m.reference_measured


# ---- out-of-memory errors, recognised from real ones


def test_the_cpu_allocators_refusal_is_an_out_of_memory_with_its_size():
    with pytest.raises(RuntimeError) as caught:
        torch.empty(HUGE, dtype=torch.uint8)
    assert memory_plan.is_out_of_memory(caught.value)
    assert memory_plan.asked_bytes(caught.value) == HUGE


def test_a_python_memory_error_is_an_out_of_memory_and_a_value_error_is_not():
    with pytest.raises(MemoryError) as caught:
        bytearray(HUGE)
    assert memory_plan.is_out_of_memory(caught.value)
    assert not memory_plan.is_out_of_memory(ValueError("shapes do not match"))


def test_the_candidate_process_names_its_harness_failures_and_only_those():
    from verifier.candidate import _harness_short

    with pytest.raises(MemoryError) as caught:
        bytearray(HUGE)
    assert "kgen ran out of host memory" in _harness_short(caught.value, "cpu", "forward")
    assert "could not write a tensor file" in _harness_short(OSError(errno.EFBIG, "File too large"), "cpu", "forward")
    assert _harness_short(ValueError("a bug"), "cpu", "forward") is None


def test_a_snapshot_kept_on_the_host_is_a_copy_and_still_catches_a_mutated_input():
    from verifier.candidate import Verdict, _check_inputs_unchanged, _clone

    x = torch.randn(7, 5)
    snapshot = _clone([x], "cpu")
    assert snapshot[0].data_ptr() != x.data_ptr()
    x[3, 1] += 1.0
    with pytest.raises(Verdict, match="mutated input 0"):
        _check_inputs_unchanged([x], snapshot)


# ---- end to end on the CPU


def test_a_task_over_the_budget_is_planned_down_and_its_honest_kernel_passes(tmp_path):
    task = _task(tmp_path, RELU_TASK)
    m = TaskMemory(RELU_SET_BYTES, RELU_SET_BYTES, 0, RELU_SET_BYTES, False)   # the first plan's estimate
    assert _peak(m, overlap=False) < _peak(m, overlap=True)
    budget = math.ceil(_peak(m, overlap=False) / (1 - memory_plan.HEADROOM)) + 4096   # the default does not fit
    result = verify(task, RELU_KERNEL, _cpu(budget))
    assert result.status == "ok", (result.status, result.reason)
    notes = [f for f in result.flags if f.startswith("memory:")]
    assert notes and "the reference runs once the candidate's call has returned" in notes[0], result.flags


def test_the_same_task_with_room_reduces_nothing(tmp_path):
    result = verify(_task(tmp_path, RELU_TASK), RELU_KERNEL, _cpu())
    assert result.status == "ok" and not [f for f in result.flags if f.startswith("memory:")], result.flags


def test_a_task_whose_one_input_set_exceeds_the_budget_is_a_harness_error_with_numbers(tmp_path):
    result = verify(_task(tmp_path, RELU_TASK), RELU_KERNEL, _cpu(RELU_SET_BYTES))
    assert result.status == "harness_error", (result.status, result.reason)
    assert "one input set 0.3 MiB" in result.reason and "--memory-budget" in result.reason
    assert not result.ran   # nothing of the candidate's was run, nothing charged to it


def test_an_out_of_memory_in_the_judges_reference_is_a_harness_error_with_numbers(tmp_path):
    result = verify(_task(tmp_path, HOG_REFERENCE_TASK), RELU_KERNEL, _cpu())
    assert result.status == "harness_error", (result.status, result.reason)
    assert "ran out of host memory while running the reference" in result.reason
    assert "asked 65536.0 GiB" in result.reason and "free" in result.reason and "total" in result.reason


def test_an_out_of_memory_in_the_candidates_forward_is_still_the_kernels(tmp_path):
    result = verify(_task(tmp_path, RELU_TASK), GREEDY_KERNEL, _cpu())
    assert result.status == "runtime_error", (result.status, result.reason)
    assert "can't allocate memory" in result.reason and "kgen" not in result.reason


def test_a_harness_error_the_candidates_process_claims_is_not_believed_when_memory_is_free(tmp_path):
    # a candidate can send the line itself: with memory free, the judge does not take it as kgen's failure
    task = load_task(Path(__file__).resolve().parents[2] / "tasks" / "softmax.py")
    process = CandidateProcess(prestart=False, argv=FORGER)
    try:
        result, _ = judge(task, "harness-oom", _cpu(), process, device="cpu", backend="triton")
    finally:
        process.close()
    assert result.status == "crashed", (result.status, result.reason)
    assert "not believed" in result.reason


def test_a_harness_error_the_judge_can_confirm_is_kgens(tmp_path, monkeypatch):
    # the same claim where the judge measures the memory really short (the host's numbers made small here)
    task = load_task(Path(__file__).resolve().parents[2] / "tasks" / "softmax.py")
    monkeypatch.setattr(memory_plan, "memory_numbers", lambda device: (1024, 2 * GiB))
    process = CandidateProcess(prestart=False, argv=FORGER)
    try:
        result, _ = judge(task, "harness-oom", _cpu(), process, device="cpu", backend="triton")
    finally:
        process.close()
    assert result.status == "harness_error", (result.status, result.reason)
    assert "in the candidate's process" in result.reason


# holds 1.5 GiB of host memory (touched: resident) from its first call on, beyond anything the plan gives it
HOST_HOARDING_KERNEL = RELU_KERNEL.replace("class ModelNew(nn.Module):", """_KEPT = []


class ModelNew(nn.Module):""").replace("        return out\n", """        if not _KEPT:
            _KEPT.append(torch.ones(3 << 29, dtype=torch.uint8))
        return out
""")


def test_a_process_that_grew_past_its_share_is_charged_with_the_judges_out_of_memory(tmp_path):
    # the judge's reference fails to allocate (for real) while the candidate's process holds 1.5 GiB it was never
    # planned: the judge cannot tell its own failure from one the candidate caused, so the grown process pays
    result = verify(_task(tmp_path, HOG_REFERENCE_TASK), HOST_HOARDING_KERNEL, _cpu(64 * MiB))
    assert result.status == "rejected", (result.status, result.reason)
    assert "the memory plan leaves it" in result.reason and "ran out of host memory" in result.reason


def test_what_a_request_leaves_in_reference_cycles_is_freed_before_the_next():
    # An honest call leaves a cycle behind (an exception it caught and kept, as Triton's and torch's own launch
    # paths do): its frame keeps its input and output alive until Python's collector runs, which a few large calls
    # on a GPU seldom wake (KernelBench's LeakyReLU piled up 85 GiB of dead trial sets on an H200 before this).
    import gc
    import weakref

    from verifier.candidate import _release_after_request

    def call():
        x = torch.ones(1 << 20)
        out = x * 2
        try:
            raise LookupError("a cache miss, handled")
        except LookupError as exc:
            kept = exc   # noqa: F841 - the traceback holds this frame, the frame holds it
        return weakref.ref(x), weakref.ref(out)

    emptied = []
    was = gc.isenabled()
    gc.disable()   # the automatic collector stays asleep, as it does between a GPU's few large calls
    try:
        refs = [r for _ in range(3) for r in call()]
        assert all(r() is not None for r in refs)
        _release_after_request(lambda: emptied.append(True))
        assert all(r() is None for r in refs) and emptied == [True]
    finally:
        if was:
            gc.enable()


def test_the_candidates_share_covers_its_own_phases_and_not_the_judges():
    m = TaskMemory(1 * GiB, 1 * GiB, 0, 0, True)
    plan = plan_memory(m, "cuda", Budget(139 * GiB, "139 GiB free"), timing=True, flush_bytes=120 * MiB)
    assert 2 * GiB + GiB + 120 * MiB <= plan.candidate_share_bytes < plan.peak_bytes


# ---- the GPU's own free memory


@pytest.mark.gpu
def test_the_gpu_budget_is_its_free_memory():
    if not torch.cuda.is_available():
        pytest.skip("no GPU")
    free, total = torch.cuda.mem_get_info()
    budget = memory_plan.device_budget("cuda", None)
    assert abs(budget.bytes - free) < 512 * MiB and budget.total_bytes == total and "free of" in budget.source


@pytest.mark.gpu
def test_a_kernelbench_sized_relu_is_planned_to_the_gpus_free_memory_and_passes(tmp_path):
    # 6 GiB a set (KernelBench's level-1 ReLU family); the budget set at the plan's reduced peak
    if not torch.cuda.is_available():
        pytest.skip("no GPU")
    text = RELU_TASK.replace("batch_size = 16", "batch_size = 4096").replace("dim = 4099", "dim = 393216")
    task = _task(tmp_path, text)
    i = 4096 * 393216 * 4
    m = TaskMemory(i, i, 0, 0, True)
    reduced = plan_memory(m, "cuda", Budget(int(6.5 * i), "given"), timing=True)
    config = VerifyConfig(device="cuda", timeout_s=600, memory_budget_bytes=int(6.5 * i), baselines=False)
    result = verify(task, RELU_KERNEL, config)
    assert result.status == "ok", (result.status, result.reason)
    assert reduced.reduced and [f for f in result.flags if f.startswith("memory:")], result.flags


@pytest.mark.gpu
def test_a_task_that_cannot_fit_the_gpu_is_a_harness_error_before_the_kernel_runs(tmp_path):
    if not torch.cuda.is_available():
        pytest.skip("no GPU")
    _, total = torch.cuda.mem_get_info()
    elements = total // 4 // 2 + 1          # one fp32 set of more than half the GPU: two copies cannot fit
    text = RELU_TASK.replace("batch_size = 16", "batch_size = 1").replace("dim = 4099", f"dim = {elements}")
    result = verify(_task(tmp_path, text), RELU_KERNEL,
                    VerifyConfig(device="cuda", timeout_s=600, baselines=False))
    assert result.status == "harness_error", (result.status, result.reason)
    assert "free of" in result.reason and not result.ran


# once its first call's output is made, takes all but 64 MiB of the GPU and keeps it: the allocations that follow fail
HOARDING_KERNEL = RELU_KERNEL.replace("class ModelNew(nn.Module):", """_KEPT = []


class ModelNew(nn.Module):""").replace("        return out\n", """        if not _KEPT:
            free, _ = torch.cuda.mem_get_info()
            _KEPT.append(torch.empty(free - (64 << 20), dtype=torch.uint8, device=x.device))
        return out
""")


@pytest.mark.gpu
def test_a_kernel_that_hoards_the_gpu_is_charged_with_what_then_runs_out(tmp_path):
    # whichever allocation fails next (the judge's reference, the candidate process's harness, or the kernel's
    # own output), the verdict is the kernel's: the process grew past what the plan leaves it. Never harness_error,
    # which a board would leave out of fast_p.
    if not torch.cuda.is_available():
        pytest.skip("no GPU")
    text = RELU_TASK.replace("batch_size = 16", "batch_size = 256").replace("dim = 4099", "dim = 1048576")
    result = verify(_task(tmp_path, text), HOARDING_KERNEL,
                    VerifyConfig(device="cuda", timeout_s=600, baselines=False))
    assert result.status in ("rejected", "runtime_error"), (result.status, result.reason)
    assert result.status != "rejected" or "the memory plan leaves it" in result.reason


def test_tensor_files_on_a_tmpfs_count_against_the_candidates_host_memory():
    # a tmpfs's pages are the writer's memory: the outputs kept there must fit beside what the process holds
    m = TaskMemory(8 * GiB, 8 * GiB, 0, 0, True)
    budget = Budget(139 * GiB, "139 GiB free")
    on_disk = plan_memory(m, "cuda", budget, timing=True, spot_checks=3, disk_free_bytes=500 * GiB,
                          host_cap_bytes=48 * GiB)
    in_memory = plan_memory(m, "cuda", budget, timing=True, spot_checks=3, disk_free_bytes=500 * GiB,
                            host_cap_bytes=48 * GiB, files_in_memory=True)
    assert on_disk.spot_checks == 3
    assert in_memory.spot_checks < 3 and "spot-checked" in in_memory.note()
    with pytest.raises(MemoryShort, match="KGEN_EXCHANGE_DIR"):
        plan_memory(m, "cuda", budget, timing=True, spot_checks=3, disk_free_bytes=500 * GiB,
                    host_cap_bytes=30 * GiB, files_in_memory=True)
