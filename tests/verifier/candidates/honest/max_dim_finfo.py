"""Honest (tasks/max_dim.py): a max over a dimension whose -inf stand-in is tl.constexpr(torch.finfo(torch.float32).min).

A constexpr global computed on the host at import: Triton takes it as a constant; the kernel-body rule used not to.
"""
import torch
import torch.nn as nn
import triton
import triton.language as tl

# lowest finite fp32 value, used as the identity for masked lanes
FP32_LOWEST = tl.constexpr(torch.finfo(torch.float32).min)


@triton.jit
def max_kernel(x_ptr, out_ptr, n_cols, stride, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + pid * stride + cols, mask=cols < n_cols, other=FP32_LOWEST)
    tl.store(out_ptr + pid, tl.max(x, axis=0))


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        rows, cols = x.shape
        out = torch.empty(rows, device=x.device, dtype=x.dtype)
        max_kernel[(rows,)](x, out, cols, x.stride(0), BLOCK=triton.next_power_of_2(cols))
        return out
