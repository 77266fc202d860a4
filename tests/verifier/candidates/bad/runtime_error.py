"""Known-bad softmax candidate: raises while launching (expected status: runtime_error).

The launcher assumes rows of exactly 1024 columns and views the input that way; for any other
width the view fails ("shape '[-1, 1024]' is invalid for input of size ...") before the kernel runs.
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl

ROW = 1024


@triton.jit
def softmax_kernel(
    out_ptr,                # *[n_rows, ROW] output
    in_ptr,                 # *[n_rows, ROW] input
    ROW: tl.constexpr,      # row length, assumed fixed
):
    row = tl.program_id(0)
    cols = tl.arange(0, ROW)
    x = tl.load(in_ptr + row * ROW + cols)
    x = x - tl.max(x, axis=0)
    num = tl.exp(x)
    tl.store(out_ptr + row * ROW + cols, num / tl.sum(num, axis=0))


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        rows = x.contiguous().view(-1, ROW)
        out = torch.empty_like(rows)
        softmax_kernel[(rows.shape[0],)](out, rows, ROW=ROW)
        return out.view(x.shape)
