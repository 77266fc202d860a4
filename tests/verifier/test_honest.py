"""Honest kernels written the way LLMs write them pass the whole verifier (status ok on the CPU).

Each file under tests/verifier/candidates/honest/ names its task where its docstring opens
(`Honest (tasks/<task>.py): `). They carry the habits that used to trip the first layer:
stray `import os, sys, time, math`, `if __name__ == "__main__":` benchmark blocks with timing code,
`torch.cuda.synchronize()` in forward under `torch.cuda.is_available()`, `os.environ.get("TRITON_...")`,
`print` in forward, type hints, helpers, `@triton.autotune`, `torch.empty_like`, `.contiguous()`,
asserts, a torch cast of a kernel's fp32 output, TF32x3 products, `from triton.testing import do_bench`,
`from torch.testing import assert_close` or `import torch.profiler` used only by `__main__`, a `Timer`
class only `__main__` uses. The verifier must call every one
of them correct; a rejection here is a false positive of the checks, not a bad kernel.

    .venv/bin/python -m pytest tests/verifier/test_honest.py -q      # ~2 min here

KernelBench's own Triton example solution (in the shared/ beside the checkout, when present) passes
the static checks here; its problem makes CUDA inputs (`.cuda()` in get_inputs), so it is verified
against that problem on a GPU only (pytest -m gpu). So are its CUDA example solutions (load_inline,
kernels launched on the legacy default stream, which a CUDA graph capture misses: they are timed
with events, and the verdict says so).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from kernelbench_prompts import kernelbench_prompts
from verifier.records import VerifyConfig
from verifier.static import check_source
from verifier.task import load_task
from verifier.verify import verify

ROOT = Path(__file__).resolve().parents[2]
HONEST = Path(__file__).resolve().parent / "candidates" / "honest"
CPU = VerifyConfig(device="cpu", timeout_s=150)
FILES = sorted(HONEST.glob("*.py"))


def task_of(path: Path) -> Path:
    match = re.match(r'"""Honest \(tasks/(\w+)\.py\): ', path.read_text())
    assert match, f"{path.name}: the docstring must start with Honest (tasks/<task>.py): "
    return ROOT / "tasks" / f"{match.group(1)}.py"


def test_the_corpus_covers_eight_tasks_or_more():
    assert len({task_of(p).stem for p in FILES}) >= 8, [p.name for p in FILES]


# Honest files the first layer used to reject (found by a red team), each named for what it carries: kept in
# the corpus so that they stay fixed.
FORMER_FALSE_POSITIVES = {
    "softmax_do_bench_main": "imports triton.testing",       # `from triton.testing import do_bench`, __main__ only
    "softmax_assert_close_main": "imports torch.testing",    # `from torch.testing import assert_close`, __main__ only
    "softmax_profiler_main": "imports torch.profiler",       # `import torch.profiler`, __main__ only
    "gelu_timer_class_main": "imports time",                 # a Timer class only __main__ uses
    "softmax_staticmethod": "never launched",                # self._kernel[grid](...)
    "softmax_kernel_select": "never launched",               # kernel = a if wide else b; kernel[grid](...)
    "softmax_dtype_dispatch": "never launched",              # _KERNELS[x.dtype][grid](...)
    "gelu_tuple_consts": "a global that is not a constant",  # HALF, C = tl.constexpr(0.5), tl.constexpr(...)
    "max_dim_finfo": "a global that is not a constant",      # tl.constexpr(torch.finfo(...).min)
    "gelu_cap_constexpr": "a global that is not a constant", # tl.constexpr(8 if cap >= 9 else 4)
    "softmax_act_fn_param": "calls its argument",            # a jit function handed in through a variable
    "softmax_all_benchmark": "imports time",                 # __all__ names a __main__-only benchmark()
    "gelu_perf_report_main": "uses triton.testing.perf_report",  # the tutorials' module-level benchmark
    "gelu_logger": "imports logging",                        # logger = logging.getLogger(__name__)
    "sum_dim_reduce_numel": "imports operator",              # functools.reduce(operator.mul, ...), __class__.__name__
    "gelu_libdevice_erf": "InterpreterError",                # libdevice.erf: None under the CPU interpreter
}


def test_former_false_positives_are_in_the_corpus():
    assert set(FORMER_FALSE_POSITIVES) <= {p.stem for p in FILES}


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.stem)
def test_honest_kernel_passes_the_static_checks(path):
    assert check_source(path.read_text()) is None


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.stem)
def test_honest_kernel_is_verified_ok(path):
    result = verify(load_task(task_of(path)), path.read_text(), CPU)
    assert result.status == "ok", (result.status, result.reason, result.feedback[-800:])
    assert result.trials > 0


# the copy of shared/ beside the checkout (as on a developer's machine and in CI)
KERNELBENCH_PROMPTS = kernelbench_prompts()
# KernelBench's own Triton example solution and the problem it solves (its few-shot "add" pair).
KERNELBENCH_TRITON = [("model_ex_add.py", "model_new_ex_add_triton.py")]


# KernelBench's CUDA example solutions (load_inline, `kernel<<<grid, block>>>` on the legacy default stream).
KERNELBENCH_CUDA = [("model_ex_add.py", "model_new_ex_add.py"),
                    ("few_shot/model_ex_add.py", "few_shot/model_new_ex_add.py"),
                    ("few_shot/model_ex_fuse_gelu.py", "few_shot/model_new_ex_fuse_gelu.py"),
                    ("few_shot/model_ex_tiled_matmul.py", "few_shot/model_new_ex_tiled_matmul.py"),
                    ("few_shot/model_ex_flash_attn.py", "few_shot/model_new_ex_flash_attn.py")]


@pytest.mark.parametrize("problem, solution", KERNELBENCH_TRITON + KERNELBENCH_CUDA)
def test_kernelbench_triton_example_passes_the_static_checks(problem, solution):
    if not (KERNELBENCH_PROMPTS / solution).exists():
        pytest.skip("KernelBench's prompts are not on this machine")
    assert check_source((KERNELBENCH_PROMPTS / solution).read_text()) is None


@pytest.mark.gpu
@pytest.mark.parametrize("problem, solution", KERNELBENCH_TRITON)
def test_kernelbench_triton_example_is_verified_ok_on_gpu(problem, solution):
    if not (KERNELBENCH_PROMPTS / solution).exists():
        pytest.skip("KernelBench's prompts are not on this machine")
    result = verify(load_task(KERNELBENCH_PROMPTS / problem), (KERNELBENCH_PROMPTS / solution).read_text(),
                    VerifyConfig(device="cuda", timeout_s=300, baselines=False))
    assert result.status == "ok", (result.status, result.reason, result.feedback[-800:])


@pytest.mark.gpu
@pytest.mark.parametrize("path", FILES, ids=lambda p: p.stem)
def test_honest_kernel_is_verified_ok_on_gpu(path):
    result = verify(load_task(task_of(path)), path.read_text(),
                    VerifyConfig(device="cuda", timeout_s=300, baselines=False))
    assert result.status == "ok", (result.status, result.reason, result.feedback[-800:])


@pytest.mark.gpu
@pytest.mark.parametrize("problem, solution", KERNELBENCH_CUDA, ids=lambda p: p.replace("/", "-"))
def test_kernelbench_cuda_example_is_verified_ok_on_gpu_and_timed_with_events(problem, solution):
    if not (KERNELBENCH_PROMPTS / solution).exists():
        pytest.skip("KernelBench's prompts are not on this machine")
    result = verify(load_task(KERNELBENCH_PROMPTS / problem), (KERNELBENCH_PROMPTS / solution).read_text(),
                    VerifyConfig(device="cuda", timeout_s=400, baselines=False))   # the default: graph timing
    assert result.status == "ok", (result.status, result.reason, result.feedback[-800:])
    # its kernels run on the legacy default stream: the capture cannot hold them, the events can
    assert result.timing.method == "events", result.flags
    assert any("the CUDA graph capture missed" in f or "not capturable in a CUDA graph" in f
               for f in result.flags), result.flags
