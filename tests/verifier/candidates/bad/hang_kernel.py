"""Known-bad softmax candidate: the Triton kernel loops forever (expected status: timeout).

The looped kernel's `while` walks the row in blocks but never advances `start`, so no program
ever finishes: on a GPU the launch never completes (the host blocks at the next sync); under the
interpreter the Python loop spins. Only a wall-clock limit and killing the process group end it.
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def softmax_kernel(
    out_ptr,                # *[n_rows, n_cols] output
    in_ptr,                 # *[n_rows, n_cols] input
    row_stride,             # elements between consecutive rows
    n_cols,                 # row length
    BLOCK: tl.constexpr,    # columns per step
):
    row = tl.program_id(0)
    in_row = in_ptr + row * row_stride
    running_max = -float("inf")
    start = 0
    while start < n_cols:
        cols = start + tl.arange(0, BLOCK)
        x = tl.load(in_row + cols, mask=cols < n_cols, other=-float("inf"))
        running_max = tl.maximum(running_max, tl.max(x, axis=0))
    total = 0.0
    for s in range(0, n_cols, BLOCK):
        cols = s + tl.arange(0, BLOCK)
        x = tl.load(in_row + cols, mask=cols < n_cols, other=-float("inf"))
        total += tl.sum(tl.exp(x - running_max), axis=0)
    for s in range(0, n_cols, BLOCK):
        cols = s + tl.arange(0, BLOCK)
        mask = cols < n_cols
        x = tl.load(in_row + cols, mask=mask, other=0.0)
        tl.store(out_ptr + row * row_stride + cols, tl.exp(x - running_max) / total, mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        out = torch.empty_like(x)
        n_rows, n_cols = x.shape
        softmax_kernel[(n_rows,)](out, x, x.stride(0), n_cols, BLOCK=256)
        return out
