"""L2 normalisation of the rows of a 2-D fp32 tensor through F.normalize, KernelBench style.

Reference: torch.nn.functional.normalize(x, p=2.0, dim=1) (eps 1e-12): x / max(||x||_2, eps) per row.
torch.export writes it as linalg_vector_norm, clamp_min and expand_as before the division, which
is why a template that knows norms but not expand_as has nothing to offer.
Benchmark shape: x 16384 x 4096 fp32. Traffic: 256 MiB read + 256 MiB written = 0.54 GB,
~0.13 ms at 4 TB/s.
Small shape: 67 x 781 (odd).
Inputs: standard normal rows, each scaled by 10**u (u uniform in [-4, 2]), so that norms from about 0.003
to 3000 are divided by (a clamp other than eps shows); one row is scaled to a norm of about 1e-13, below
eps, where the clamp, not the norm, divides: x / 1e-12 is 10x smaller there than x / ||x||.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F

rows, cols = 16384, 4096            # benchmark shape
small_rows, small_cols = 67, 781    # interpreter shape, odd on purpose


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.normalize(x, p=2.0, dim=1)


def _scaled_rows(x: torch.Tensor) -> torch.Tensor:
    x = x * 10.0 ** (torch.rand(x.shape[0], 1) * 6.0 - 4.0)
    x[5] *= 1e-13 / x[5].norm()   # a norm below eps: the clamp, not the norm, divides this row
    return x


def get_inputs():
    return [_scaled_rows(torch.randn(rows, cols))]


def get_init_inputs():
    return []


def get_small_inputs():
    return [_scaled_rows(torch.randn(small_rows, small_cols))]
