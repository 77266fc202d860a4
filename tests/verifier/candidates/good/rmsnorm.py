"""RMSNorm over the last dimension in Triton, matching Llama's rounding (known-good candidate for
tasks/rmsnorm.py).

One program per row: a pass accumulates the sum of squares in fp32, a second pass scales. Like the
reference, the normalised value is rounded to the input dtype before the weight multiplies it, so
bf16 results agree to the last bit in most lanes.
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl

# 64 KB of row per step: 32768 bf16 values.
MAX_FUSED_BYTES = 65536


@triton.jit
def rmsnorm_kernel(
    out_ptr,                # *[n_rows, n_cols] output, the input's dtype
    in_ptr,                 # *[n_rows, n_cols] input
    weight_ptr,             # *[n_cols] scale
    in_row_stride,          # elements between consecutive input rows
    out_row_stride,         # elements between consecutive output rows
    n_cols,                 # normalised length
    eps,                    # added to the mean square
    BLOCK: tl.constexpr,    # columns per step
):
    row = tl.program_id(0)
    in_row = in_ptr + row * in_row_stride
    out_row = out_ptr + row * out_row_stride
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        x = tl.load(in_row + cols, mask=cols < n_cols, other=0.0).to(tl.float32)
        acc += x * x
    rstd = 1.0 / tl.sqrt(tl.sum(acc, axis=0) / n_cols + eps)
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        mask = cols < n_cols
        x = tl.load(in_row + cols, mask=mask, other=0.0).to(tl.float32)
        w = tl.load(weight_ptr + cols, mask=mask, other=0.0).to(tl.float32)
        normed = (x * rstd).to(in_ptr.dtype.element_ty).to(tl.float32)
        tl.store(out_row + cols, (normed * w).to(out_ptr.dtype.element_ty), mask=mask)


def rmsnorm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    n_cols = x.shape[-1]
    x2 = x.reshape(-1, n_cols)
    if x2.stride(-1) != 1:
        x2 = x2.contiguous()
    out = torch.empty((x2.shape[0], n_cols), dtype=x.dtype, device=x.device)
    block = min(triton.next_power_of_2(n_cols), MAX_FUSED_BYTES // x.element_size())
    rmsnorm_kernel[(x2.shape[0],)](
        out, x2, weight.contiguous(), x2.stride(0), out.stride(0), n_cols, eps,
        BLOCK=block, num_warps=min(max(block // 512, 1), 8),
    )
    return out.view(x.shape)


class ModelNew(nn.Module):
    def __init__(self, hidden: int, eps: float):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(hidden, dtype=torch.bfloat16))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return rmsnorm(x, self.weight, self.eps)
