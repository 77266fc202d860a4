"""RMSNorm over the last dimension with a learned weight, bf16, as Llama computes it.

Reference: h = x.float(); h = h * rsqrt(mean(h^2, -1) + eps); return weight * h.to(bf16),
eps 1e-6. Statistics are in fp32; the output is bf16 (default bf16 tolerance, 1e-2).
The weight is drawn away from its initial ones in __init__, so a kernel that ignores it is caught.
Benchmark shape: x 32768 x 4096 bf16 (Llama-7B's hidden size). Traffic: 268 MB read + 268 MB
written = 0.54 GB, ~0.13 ms at 4 TB/s. Eager writes and re-reads fp32 intermediates: it took
3.3 ms at twice these rows on an H200 (torch 2.11), ~8% of memory speed-of-light, so ~1.6 ms here.
Small shape: x 67 x 4096 (the hidden size is the weight's, fixed by get_init_inputs()).
"""

import torch
import torch.nn as nn

rows, hidden = 32768, 4096          # benchmark shape
small_rows = 67                     # interpreter shape, odd on purpose
eps = 1e-6


class Model(nn.Module):
    def __init__(self, hidden: int, eps: float):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(hidden, dtype=torch.bfloat16))
        with torch.no_grad():
            self.weight.normal_(1.0, 0.1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = x.float()
        h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * h.to(x.dtype)


def get_inputs():
    return [torch.randn(rows, hidden, dtype=torch.bfloat16)]


def get_init_inputs():
    return [hidden, eps]


def get_small_inputs():
    return [torch.randn(small_rows, hidden, dtype=torch.bfloat16)]
