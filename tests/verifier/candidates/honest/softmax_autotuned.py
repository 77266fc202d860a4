"""Honest (tasks/softmax.py): an LLM-style fused row softmax with autotune, a benchmark block and stray imports.

Written the way a model writes a "complete" kernel file: `import os, sys, time, math` at the top
(used only by the benchmark), an `os.environ.get("TRITON_...")` debug switch, `@triton.autotune`
over num_warps, type hints, asserts, `.contiguous()`, `torch.empty_like`, and a
`torch.cuda.synchronize()` in forward under `torch.cuda.is_available()`.
"""
import os, sys, time, math

import torch
import torch.nn as nn
import triton
import triton.language as tl

DEBUG = os.environ.get("TRITON_DEBUG_SOFTMAX", "0") == "1"


@triton.autotune(
    configs=[
        triton.Config({}, num_warps=4),
        triton.Config({}, num_warps=8),
    ],
    key=["n_cols"],
)
@triton.jit
def softmax_kernel(
    output_ptr, input_ptr,
    input_row_stride, output_row_stride,
    n_cols,
    BLOCK_SIZE: tl.constexpr,
):
    # each program handles one row
    row_idx = tl.program_id(0)
    row_start_ptr = input_ptr + row_idx * input_row_stride
    col_offsets = tl.arange(0, BLOCK_SIZE)
    input_ptrs = row_start_ptr + col_offsets
    mask = col_offsets < n_cols
    row = tl.load(input_ptrs, mask=mask, other=-float("inf"))
    # subtract max for numerical stability
    row_minus_max = row - tl.max(row, axis=0)
    numerator = tl.exp(row_minus_max)
    denominator = tl.sum(numerator, axis=0)
    softmax_output = numerator / denominator
    output_row_start_ptr = output_ptr + row_idx * output_row_stride
    tl.store(output_row_start_ptr + col_offsets, softmax_output, mask=mask)


def triton_softmax(x: torch.Tensor) -> torch.Tensor:
    assert x.dim() == 2, "expected a 2-D input"
    x = x.contiguous()
    n_rows, n_cols = x.shape
    BLOCK_SIZE = triton.next_power_of_2(n_cols)
    y = torch.empty_like(x)
    softmax_kernel[(n_rows,)](y, x, x.stride(0), y.stride(0), n_cols, BLOCK_SIZE=BLOCK_SIZE)
    return y


class ModelNew(nn.Module):
    def __init__(self) -> None:
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = triton_softmax(x)
        if torch.cuda.is_available():
            torch.cuda.synchronize()
        if DEBUG:
            print("softmax out", out.shape)
        return out


if __name__ == "__main__":
    torch.manual_seed(0)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    x = torch.randn(4096, 8192, device=device)
    model = ModelNew()
    for _ in range(3):
        model(x)
    if device == "cuda":
        torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(10):
        model(x)
    if device == "cuda":
        torch.cuda.synchronize()
    ms = (time.perf_counter() - t0) / 10 * 1e3
    gbps = 2 * x.numel() * x.element_size() / (ms * 1e-3) / 1e9
    print(f"softmax: {ms:.3f} ms, {gbps:.1f} GB/s, max err {(model(x) - torch.softmax(x, -1)).abs().max().item():.2e}")
    sys.exit(0)
