"""Honest (tasks/gelu.py): an erf GELU whose constants are tl.constexpr globals bound by tuple unpacking.

`HALF, INV_SQRT2 = tl.constexpr(0.5), tl.constexpr(0.7071...)`: Triton takes them as constants; the kernel-body rule used to call them globals that are not.
"""
import torch
import torch.nn as nn
import triton
import triton.language as tl

# erf-based GELU constants
HALF, INV_SQRT2 = tl.constexpr(0.5), tl.constexpr(0.7071067811865476)
BLOCK_SIZE = 1024  # host-side launch parameter


@triton.jit
def gelu_kernel(x_ptr, y_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(axis=0)
    offs = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offs < n_elements
    x = tl.load(x_ptr + offs, mask=mask, other=0.0)
    y = HALF * x * (1.0 + tl.math.erf(x * INV_SQRT2))
    tl.store(y_ptr + offs, y, mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        y = torch.empty_like(x)
        n = x.numel()
        grid = lambda meta: (triton.cdiv(n, meta["BLOCK_SIZE"]),)
        gelu_kernel[grid](x, y, n, BLOCK_SIZE=BLOCK_SIZE)
        return y
