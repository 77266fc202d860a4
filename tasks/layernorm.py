"""LayerNorm over the last dimension with learned affine parameters, fp32.

Reference: nn.LayerNorm(5120) (eps 1e-5, elementwise affine). The weight and bias are drawn away
from their (1, 0) initial values in __init__, so a kernel that ignores either is caught.
Benchmark shape: x 32768 x 5120 fp32 (5120: Llama-13B's hidden size, not a power of two).
Traffic: 671 MB read + 671 MB written = 1.34 GB, ~0.34 ms at 4 TB/s.
Eager on an H200 (torch 2.11, median of 20 calls, L2 flushed): 0.48 ms.
Small shape: x 67 x 5120. The hidden size is the parameters' and so fixed by get_init_inputs();
a power-of-two block (8192) over 5120 columns still leaves a masked tail.
"""

import torch
import torch.nn as nn

rows, hidden = 32768, 5120          # benchmark shape
small_rows = 67                     # interpreter shape, odd on purpose


class Model(nn.Module):
    def __init__(self, hidden: int):
        super().__init__()
        self.ln = nn.LayerNorm(hidden)
        with torch.no_grad():
            self.ln.weight.normal_(1.0, 0.1)
            self.ln.bias.normal_(0.0, 0.1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.ln(x)


def get_inputs():
    return [torch.randn(rows, hidden)]


def get_init_inputs():
    return [hidden]


def get_small_inputs():
    # A nonzero mean and a scale other than 1 make a kernel that skips centring or scaling fail.
    return [torch.randn(small_rows, hidden) * 2.0 + 0.5]
