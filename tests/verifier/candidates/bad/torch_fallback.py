"""Known-bad softmax candidate: torch does the work (expected status: rejected).

A Triton kernel is defined and launched, but only on a one-element scratch tensor so that the
launch shows up in a trace; the value returned comes from torch.softmax. The op audit sees
aten::_softmax issued from forward.
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def touch_kernel(
    ptr,                    # *fp32 [1] scratch
):
    tl.store(ptr, tl.load(ptr) + 1.0)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        scratch = torch.zeros(1, dtype=torch.float32, device=x.device)
        touch_kernel[(1,)](scratch)
        return torch.softmax(x, dim=-1)
