"""Inclusive prefix sum over the last dimension of a 2-D fp32 tensor.

Reference: torch.cumsum(x, dim=-1).
Benchmark shape: x 32768 x 4096 fp32. Traffic: 512 MiB read + 512 MiB written = 1.07 GB,
~0.27 ms at 4 TB/s (eager reached about 45% of memory speed-of-light on an H200).
ATOL is 2e-3, not fp32's default 1e-4: the running sums of a row of N(0, 1) values reach a few
hundred, and on an H200 torch.cumsum's own fp32 result at this shape was up to 2.7e-4 away from
an fp64 cumsum, while a blocked Triton scan (fp32 throughout) differed from torch's by up to 4e-4,
near the zero crossings where rtol gives no room. A wrong scan (a lost carry, an off-by-one) is
off by O(1).
Eager on an H200 (torch 2.11, median of 20 calls, L2 flushed): 0.56 ms.
Small shape: 127 x 781 (odd).
"""

import torch
import torch.nn as nn

rows, cols = 32768, 4096            # benchmark shape
small_rows, small_cols = 127, 781   # interpreter shape, odd on purpose
ATOL = 2e-3                         # see the docstring: the fp32 reference itself is ~3e-4 off


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cumsum(x, dim=-1)


def get_inputs():
    return [torch.randn(rows, cols)]


def get_init_inputs():
    return []


def get_small_inputs():
    return [torch.randn(small_rows, small_cols)]
