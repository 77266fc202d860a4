"""Mean over the middle dimension of a 3-D fp32 tensor (a column reduction, not a row one).

Reference: torch.mean(x, dim=1) on x (batch, reduce, inner) -> shape (batch, inner).
The reduced dimension is strided (stride = inner), so a kernel reads whole rows of `inner`
contiguous values and accumulates them, rather than reducing along contiguous memory.
Benchmark shape: x 64 x 4096 x 1024 fp32. Traffic: 1.07 GB read (256 KiB written),
~0.27 ms at 4 TB/s.
Eager on an H200 (torch 2.11, median of 20 calls, L2 flushed): 0.26 ms.
Small shape: 3 x 67 x 45 (odd).
"""

import torch
import torch.nn as nn

batch, reduce, inner = 64, 4096, 1024                   # benchmark shape
small_batch, small_reduce, small_inner = 3, 67, 45      # interpreter shape, odd on purpose


class Model(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.mean(x, dim=self.dim)


def get_inputs():
    return [torch.randn(batch, reduce, inner)]


def get_init_inputs():
    return [1]


def get_small_inputs():
    return [torch.randn(small_batch, small_reduce, small_inner)]
