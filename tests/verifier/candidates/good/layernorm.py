"""LayerNorm over the last dimension in Triton, after the Triton tutorial's forward kernel
(known-good candidate for tasks/layernorm.py).

One program per row: a pass for the mean, a pass for the variance of the centred values (two
passes are steadier in fp32 than E[x^2] - E[x]^2), then a pass that normalises and applies the
affine parameters. When the row fits one block (5120 columns -> BLOCK 8192) each pass is a single
step and the repeated loads hit L1/L2. The parameters live in an nn.LayerNorm, as in the task, so
the state_dict keys match (ln.weight, ln.bias); the module itself is never called.
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl

# 64 KB of row per step, as in the tutorial: 16384 fp32 values.
MAX_FUSED_BYTES = 65536


@triton.jit
def layernorm_kernel(
    out_ptr,                # *[n_rows, n_cols] output
    in_ptr,                 # *[n_rows, n_cols] input
    weight_ptr,             # *[n_cols] scale
    bias_ptr,               # *[n_cols] shift
    in_row_stride,          # elements between consecutive input rows
    out_row_stride,         # elements between consecutive output rows
    n_cols,                 # normalised length
    eps,                    # added to the variance
    BLOCK: tl.constexpr,    # columns per step
):
    row = tl.program_id(0)
    in_row = in_ptr + row * in_row_stride
    out_row = out_ptr + row * out_row_stride
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        acc += tl.load(in_row + cols, mask=cols < n_cols, other=0.0).to(tl.float32)
    mean = tl.sum(acc, axis=0) / n_cols
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        mask = cols < n_cols
        x = tl.load(in_row + cols, mask=mask, other=0.0).to(tl.float32)
        # Masked lanes would otherwise add mean^2 each.
        diff = tl.where(mask, x - mean, 0.0)
        acc += diff * diff
    rstd = 1.0 / tl.sqrt(tl.sum(acc, axis=0) / n_cols + eps)
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        mask = cols < n_cols
        x = tl.load(in_row + cols, mask=mask, other=0.0).to(tl.float32)
        w = tl.load(weight_ptr + cols, mask=mask, other=0.0).to(tl.float32)
        b = tl.load(bias_ptr + cols, mask=mask, other=0.0).to(tl.float32)
        y = (x - mean) * rstd * w + b
        tl.store(out_row + cols, y.to(out_ptr.dtype.element_ty), mask=mask)


def layernorm(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, eps: float) -> torch.Tensor:
    n_cols = x.shape[-1]
    x2 = x.reshape(-1, n_cols)
    if x2.stride(-1) != 1:
        x2 = x2.contiguous()
    out = torch.empty((x2.shape[0], n_cols), dtype=x.dtype, device=x.device)
    block = min(triton.next_power_of_2(n_cols), MAX_FUSED_BYTES // x.element_size())
    layernorm_kernel[(x2.shape[0],)](
        out, x2, weight.contiguous(), bias.contiguous(), x2.stride(0), out.stride(0), n_cols, eps,
        BLOCK=block, num_warps=min(max(block // 256, 1), 8),
    )
    return out.view(x.shape)


class ModelNew(nn.Module):
    def __init__(self, hidden: int):
        super().__init__()
        self.ln = nn.LayerNorm(hidden)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return layernorm(x, self.ln.weight, self.ln.bias, self.ln.eps)
