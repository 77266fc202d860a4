"""Sum over the last dimension of a 2-D fp32 tensor.

Reference: torch.sum(x, dim=-1) -> shape (rows,).
Benchmark shape: x 32768 x 8192 fp32. Traffic: 1.07 GB read (the 128 KiB output is negligible),
~0.27 ms at 4 TB/s.
Eager on an H200 (torch 2.11, median of 20 calls, L2 flushed): 0.30 ms.
Small shape: 127 x 781 (odd).
"""

import torch
import torch.nn as nn

rows, cols = 32768, 8192            # benchmark shape
small_rows, small_cols = 127, 781   # interpreter shape, odd on purpose


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.sum(x, dim=-1)


def get_inputs():
    return [torch.randn(rows, cols)]


def get_init_inputs():
    return []


def get_small_inputs():
    return [torch.randn(small_rows, small_cols)]
