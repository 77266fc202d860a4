"""GELU (exact, erf form) of a 2-D fp32 tensor.

Reference: torch.nn.functional.gelu(x) (approximate="none").
Benchmark shape: x 8192 x 16384 fp32. Traffic: 512 MiB read + 512 MiB written = 1.07 GB,
~0.27 ms at 4 TB/s. Eager already runs near memory speed-of-light here: this task checks that a
kernel matches it, not that it beats it by much.
Eager on an H200 (torch 2.11, median of 20 calls, L2 flushed): 0.25 ms.
Small shape: 127 x 781 (odd), so the flat kernel's last block is ragged.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F

rows, cols = 8192, 16384            # benchmark shape
small_rows, small_cols = 127, 781   # interpreter shape, odd on purpose


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.gelu(x)


def get_inputs():
    return [torch.randn(rows, cols)]


def get_init_inputs():
    return []


def get_small_inputs():
    return [torch.randn(small_rows, small_cols)]
