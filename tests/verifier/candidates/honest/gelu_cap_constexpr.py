"""Honest (tasks/gelu.py): an erf GELU whose vector width is a tl.constexpr global chosen from the device's capability.

`VEC = tl.constexpr(8 if cap[0] >= 9 else 4)`: a constexpr global, whatever computed it.
"""
import torch
import torch.nn as nn
import triton
import triton.language as tl

_CAP = torch.cuda.get_device_capability() if torch.cuda.is_available() else (0, 0)
# wider blocks on Hopper
VEC = tl.constexpr(8 if _CAP[0] >= 9 else 4)


@triton.jit
def gelu_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK * VEC + tl.arange(0, BLOCK * VEC)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    y = 0.5 * x * (1.0 + tl.erf(x * 0.7071067811865476))
    tl.store(y_ptr + offs, y, mask=mask)


class ModelNew(nn.Module):
    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        n = x.numel()
        BLOCK = 256
        gelu_kernel[(triton.cdiv(n, BLOCK * VEC.value),)](x, y, n, BLOCK=BLOCK)
        return y
