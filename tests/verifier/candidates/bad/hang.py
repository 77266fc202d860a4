"""Known-bad softmax candidate: forward never returns (expected status: timeout).

It spins in Python waiting for a readiness flag that nothing ever sets; the kernel is never
launched. Only a wall-clock limit and killing the process group end it.
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
    mask = cols < n_cols
    x = tl.load(in_ptr + row * row_stride + cols, mask=mask, other=-float("inf"))
    x = x - tl.max(x, axis=0)
    num = tl.exp(x)
    tl.store(out_ptr + row * row_stride + cols, num / tl.sum(num, axis=0), mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.ready = False

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        while True:
            if self.ready:
                break
        x = x.contiguous()
        out = torch.empty_like(x)
        n_rows, n_cols = x.shape
        softmax_kernel[(n_rows,)](out, x, x.stride(0), n_cols, BLOCK=triton.next_power_of_2(n_cols))
        return out
