"""Exact (erf) GELU in Triton over the flattened tensor (known-good candidate for tasks/gelu.py).

One program per BLOCK contiguous elements; the last block is masked. Math in fp32.
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl

BLOCK_SIZE = 2048


@triton.jit
def gelu_kernel(
    out_ptr,                # *[n] output, the input's dtype
    in_ptr,                 # *[n] input, contiguous
    n_elements,             # number of elements
    BLOCK: tl.constexpr,    # elements per program
):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n_elements
    x = tl.load(in_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    y = 0.5 * x * (1.0 + tl.math.erf(x * 0.7071067811865476))  # 0.707... = 1 / sqrt(2)
    tl.store(out_ptr + offs, y.to(out_ptr.dtype.element_ty), mask=mask)


def gelu(x: torch.Tensor) -> torch.Tensor:
    x = x.contiguous()
    out = torch.empty_like(x)
    n = x.numel()
    gelu_kernel[(triton.cdiv(n, BLOCK_SIZE),)](out, x, n, BLOCK=BLOCK_SIZE, num_warps=4)
    return out


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return gelu(x)
