"""Honest (tasks/sum_dim.py): a row sum that loops over column blocks, autotuned over the block width.

`@triton.autotune` with two BLOCK_SIZE configs keyed on the row length, an accumulator in fp32,
`torch.empty` with the right device, `x.stride(0)` for non-contiguous rows, and a `print` in
forward the first time it runs (an LLM's "sanity log"). `import math` is used for nothing.
"""
import math

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.autotune(
    configs=[
        triton.Config({"BLOCK_SIZE": 256}, num_warps=2),
        triton.Config({"BLOCK_SIZE": 1024}, num_warps=4),
    ],
    key=["n_cols"],
)
@triton.jit
def row_sum_kernel(x_ptr, out_ptr, stride_row, n_cols, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0)
    acc = tl.zeros((BLOCK_SIZE,), dtype=tl.float32)
    for start in range(0, n_cols, BLOCK_SIZE):
        cols = start + tl.arange(0, BLOCK_SIZE)
        acc += tl.load(x_ptr + row * stride_row + cols, mask=cols < n_cols, other=0.0)
    tl.store(out_ptr + row, tl.sum(acc, axis=0))


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self._logged = False

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        n_rows, n_cols = x.shape
        out = torch.empty(n_rows, device=x.device, dtype=x.dtype)
        row_sum_kernel[(n_rows,)](x, out, x.stride(0), n_cols)
        if not self._logged:
            print(f"row_sum: {n_rows} rows of {n_cols}")
            self._logged = True
        return out
