"""A board's harness_error rows: kgen's own failure on a task is no failed kernel, on its row, in fast_p, in the
summary.

    .venv/bin/python -m pytest tests/agent/test_board_records.py -q      # CPU (~20 s here)

The row of a real verification: a KernelBench-format task whose reference allocates 64 TiB (the CPU allocator
refuses it, for real), scored as a board scores a kernel (agent.board.job.score_kernel), then read back as a row.
"""

from __future__ import annotations

import pytest

from agent.board.records import HARNESS_ERROR, Leaderboard, Row, row_from_run, summarize
from agent.board.render import to_markdown
from agent.store import Store

HOG_TASK = '''
import torch
import torch.nn as nn

batch_size = 16
dim = 257


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        torch.empty(1 << 46, dtype=torch.uint8)   # more than any host: the judge's own allocation fails
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
    tl.store(out_ptr + offs, tl.maximum(tl.load(in_ptr + offs, mask=mask, other=0.0), 0.0), mask=mask)


class ModelNew(nn.Module):
    def forward(self, x):
        out = torch.empty_like(x)
        relu_kernel[(triton.cdiv(x.numel(), 1024),)](out, x.contiguous(), x.numel(), BLOCK=1024)
        return out
'''


@pytest.fixture(scope="module")
def harness_row(tmp_path_factory) -> Row:
    from agent.board.job import score_kernel
    from agent.config import OptimizeConfig

    root = tmp_path_factory.mktemp("board")
    task, kernel = root / "relu_hog.py", root / "relu_hog_kernel.py"
    task.write_text(HOG_TASK)
    kernel.write_text(RELU_KERNEL)
    store = Store(root / "results")
    run = score_kernel(task, kernel, OptimizeConfig(device="cpu"), store)
    return row_from_run(store, run, "verify-only")


def _ok(name: str) -> Row:
    return Row(name, f"{name}.py", status="ok", correct=True, speedup_eager=2.0, speedup_compile=1.5,
               median_ms=0.1)


def _failed(name: str) -> Row:
    return Row(name, f"{name}.py", status="mismatch", correct=False, reason="elements differ")


def test_a_task_kgen_failed_on_is_a_harness_error_row_not_a_failed_kernel(harness_row):
    assert harness_row.status == HARNESS_ERROR and not harness_row.correct
    assert harness_row.status_text().startswith("harness error") and "not the kernel's" in harness_row.status_text()
    assert "ran out of host memory" in harness_row.reason


def test_a_harness_error_is_left_out_of_fast_p_s_denominator(harness_row):
    summary = summarize([_ok("a"), _failed("b"), harness_row], device="cuda")
    fast0 = summary.fast["eager"][0]
    assert (fast0.count, fast0.total) == (1, 2)
    assert summary.harness_errors == 1


def test_a_failed_kernel_stays_in_the_denominator():
    fast0 = summarize([_ok("a"), _failed("b")], device="cuda").fast["eager"][0]
    assert (fast0.count, fast0.total) == (1, 2)


def test_the_summary_note_names_the_harness_errors(harness_row):
    notes = summarize([_ok("a"), harness_row], device="cuda").notes
    assert any("harness error" in n and harness_row.task in n and "left out of fast_p" in n for n in notes), notes


def test_the_markdown_counts_harness_errors_apart(harness_row):
    board = Leaderboard(name="b", suite="s", mode="verify-only", config={}, device="cuda",
                        rows=[_ok("a"), _failed("b"), harness_row])
    text = to_markdown(board)
    assert "1 of 2 correct" in text and "1 harness error(s), not counted" in text
    assert "harness error (not the kernel's)" in text


def test_a_harness_error_row_is_run_again_when_the_board_resumes(harness_row):
    from agent.board.records import FINISHED_RUN, FINISHED_VERIFY

    assert harness_row.status not in FINISHED_VERIFY and harness_row.status not in FINISHED_RUN


def test_a_run_with_a_real_failure_among_harness_errors_is_a_failed_kernel(tmp_path):
    from agent.config import OptimizeConfig
    from agent.lifecycle import finish_run, start_run
    from agent.records import Attempt
    from verifier.records import VerifyResult
    from verifier.task import load_task

    task_path = tmp_path / "relu_hog.py"
    task_path.write_text(HOG_TASK)
    store = Store(tmp_path / "results")

    run = start_run(store, load_task(task_path), OptimizeConfig(device="cpu"), proposer="none", device="cpu", gpu="")
    for n, status in enumerate(("harness_error", "mismatch"), start=1):
        result = VerifyResult(status=status, reason=status, task="relu_hog")
        store.save_attempt(run, Attempt.from_result(run.run_id, n, 1, result), source="")
    run.attempts = 2
    run = finish_run(store, run, "failed", "no correct kernel", wall_s=0.0)
    assert row_from_run(store, run).status == "failed"


def test_an_untouched_row_counts_as_before():
    assert Row("x", "x.py").counted and _failed("y").counted


def test_an_interrupted_task_with_a_verified_kernel_counts_and_the_notes_say_so():
    # as a time-limited GPU board left it: one task stopped mid-run after its first kernel passed, one before any
    cut = Row("56_Matmul_Sigmoid_Sum", "level2/56.py", status="interrupted", correct=True, speedup_eager=0.46)
    empty = Row("48_Mean", "level1/48.py", status="interrupted")
    summary = summarize([cut, empty], device="cuda")
    assert summary.correct == 1
    assert any("interrupted before its rounds were done: 56_Matmul_Sigmoid_Sum" in n for n in summary.notes)
    [no_result] = [n for n in summary.notes if n.startswith("no result for")]
    assert "48_Mean" in no_result and "56_Matmul" not in no_result
