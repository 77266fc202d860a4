"""Sum over the last dimension in Triton (known-good candidate for tasks/sum_dim.py).

One program per row walks the row in BLOCK-wide steps, adding into a BLOCK-wide fp32 vector,
and reduces that vector once at the end: pairwise-like error growth, and one reduction per row
instead of one per step.
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl

MAX_BLOCK = 4096


@triton.jit
def row_sum_kernel(
    out_ptr,                # *[n_rows] output
    in_ptr,                 # *[n_rows, n_cols] input
    in_row_stride,          # elements between consecutive input rows
    n_cols,                 # row length
    BLOCK: tl.constexpr,    # columns per step
):
    row = tl.program_id(0)
    in_row = in_ptr + row * in_row_stride
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        acc += tl.load(in_row + cols, mask=cols < n_cols, other=0.0).to(tl.float32)
    tl.store(out_ptr + row, tl.sum(acc, axis=0).to(out_ptr.dtype.element_ty))


def row_sum(x: torch.Tensor) -> torch.Tensor:
    n_cols = x.shape[-1]
    x2 = x.reshape(-1, n_cols)
    if x2.stride(-1) != 1:
        x2 = x2.contiguous()
    out = torch.empty(x2.shape[0], dtype=x.dtype, device=x.device)
    block = min(triton.next_power_of_2(n_cols), MAX_BLOCK)
    row_sum_kernel[(x2.shape[0],)](
        out, x2, x2.stride(0), n_cols,
        BLOCK=block, num_warps=min(max(block // 512, 1), 8),
    )
    return out.view(x.shape[:-1])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return row_sum(x)
