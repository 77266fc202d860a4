"""Rejected by rule (tasks/gelu.py): a right erf GELU that prints a slice of its output in forward.

LLM habit: a debugging `print("gelu out sample:", out[0, :4])` left in the launcher. Printing a tensor
copies its values to the host as text, which is also a way back in for host compute (text parsed,
computed in Python, copied into an output by a kernel), so kgen rejects it as the host read it is and
says to print the shape instead, never that the audit was switched off (torch's formatter runs its ops
with the audit's mode off).
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
    if n < 200000:
        print("gelu out sample:", out[0, :4])
    return out


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return gelu(x)
