"""Known-bad softmax candidate: wrong values (expected status: mismatch).

Two bugs of the kind generated kernels make: the row max is never subtracted (harmless on
randn inputs, an overflow on large logits), and the load mask is off by one (`< n_cols - 1`)
while the store mask is not, so the last column is left out of the sum and written as
exp(-inf) / sum = 0 in every row (about 1e-3 expected at 781 columns, ten times the atol).
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
    BLOCK: tl.constexpr,    # power of two >= n_cols
):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    x = tl.load(in_ptr + row * row_stride + cols, mask=cols < n_cols - 1, other=-float("inf"))
    num = tl.exp(x)
    tl.store(out_ptr + row * row_stride + cols, num / tl.sum(num, axis=0), mask=cols < n_cols)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        out = torch.empty_like(x)
        n_rows, n_cols = x.shape
        softmax_kernel[(n_rows,)](out, x, x.stride(0), n_cols, BLOCK=triton.next_power_of_2(n_cols))
        return out
