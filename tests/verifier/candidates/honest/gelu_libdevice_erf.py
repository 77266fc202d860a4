"""Honest (tasks/gelu.py): exact GELU through libdevice's erf, imported the way Triton's tutorials import it.

`from triton.language.extra import libdevice` binds stubs that Triton swaps for the backend's functions when
it compiles; LLM-written kernels use it for erf, tanh and pow, which tl.math lacks in older Triton. The
kernel also does its final multiply with `libdevice.fma`.
"""
import torch
import torch.nn as nn
import triton
import triton.language as tl
from triton.language.extra import libdevice


@triton.jit
def _gelu_erf_kernel(X, Y, N, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offs < N
    x = tl.load(X + offs, mask=mask, other=0.0).to(tl.float32)
    cdf = 0.5 * (1.0 + libdevice.erf(x * 0.7071067811865476))
    y = libdevice.fma(x, cdf, 0.0)
    tl.store(Y + offs, y, mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        y = torch.empty_like(x)
        n = x.numel()
        BLOCK_SIZE = 2048
        _gelu_erf_kernel[(triton.cdiv(n, BLOCK_SIZE),)](x, y, n, BLOCK_SIZE=BLOCK_SIZE, num_warps=8)
        return y
