"""Known-bad softmax candidate: the Triton kernel does not compile (expected status: compile_error).

The block size is the row length itself, and tl.arange only accepts power-of-two ranges, so
compiling for 781 (or any non-power-of-two width) fails with "arange's range must be a power of 2".
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
    N_COLS: tl.constexpr,   # row length, used directly as the block size
):
    row = tl.program_id(0)
    cols = tl.arange(0, N_COLS)
    x = tl.load(in_ptr + row * row_stride + cols)
    x = x - tl.max(x, axis=0)
    num = tl.exp(x)
    tl.store(out_ptr + row * row_stride + cols, num / tl.sum(num, axis=0))


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        out = torch.empty_like(x)
        softmax_kernel[(x.shape[0],)](out, x, x.stride(0), N_COLS=x.shape[1])
        return out
