"""Softmax over the last dimension of a 2-D fp32 tensor.

Reference: torch.softmax(x, dim=-1).
Benchmark shape: x 16384 x 8192 fp32. Traffic: 512 MiB read + 512 MiB written = 1.07 GB,
~0.27 ms at 4 TB/s; eager reaches about half of that on an H200, so a fused row kernel has room.
Eager on an H200 (torch 2.11, median of 20 calls, L2 flushed): 0.55 ms.
Small shape: 127 x 781, odd in both dimensions so that row and column masks are exercised.
Inputs: standard normal, with every 8th row shifted by +100 (past 88, where exp overflows fp32): softmax
does not change under a shift, so those rows' outputs are those of any other row (the norm-relative bound
weighs them alike), but a kernel that skips the row maximum's subtraction returns inf or NaN there.
"""

import torch
import torch.nn as nn

rows, cols = 16384, 8192            # benchmark shape
small_rows, small_cols = 127, 781   # interpreter shape, odd on purpose


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(x, dim=-1)


def _shifted_rows(x: torch.Tensor) -> torch.Tensor:
    x[::8] += 100.0
    return x


def get_inputs():
    return [_shifted_rows(torch.randn(rows, cols))]


def get_init_inputs():
    return []


def get_small_inputs():
    return [_shifted_rows(torch.randn(small_rows, small_cols))]
