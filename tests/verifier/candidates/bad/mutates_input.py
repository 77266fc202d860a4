"""Known-bad softmax candidate: writes its result into the input (expected status: rejected).

The values are right, but the kernel stores each row's softmax back over x and forward returns
x itself: the caller's input is destroyed and the output aliases it, which the reference's does not.
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def softmax_inplace_kernel(
    x_ptr,                  # *[n_rows, n_cols] input, overwritten with its softmax
    row_stride,             # elements between consecutive rows
    n_cols,                 # row length
    BLOCK: tl.constexpr,    # power of two >= n_cols
):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    ptrs = x_ptr + row * row_stride + cols
    x = tl.load(ptrs, mask=mask, other=-float("inf"))
    x = x - tl.max(x, axis=0)
    num = tl.exp(x)
    tl.store(ptrs, num / tl.sum(num, axis=0), mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        n_rows, n_cols = x.shape
        softmax_inplace_kernel[(n_rows,)](x, x.stride(0), n_cols, BLOCK=triton.next_power_of_2(n_cols))
        return x
