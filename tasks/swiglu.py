"""SwiGLU activation on the two halves of a bf16 tensor: silu(x[..., :h]) * x[..., h:].

Reference: a, b = x.chunk(2, dim=-1); F.silu(a) * b. The halves are strided views of x, so a
kernel reads both from the one input. Output bf16 (default bf16 tolerance, 1e-2).
Benchmark shape: x 16384 x 22016 bf16 (Llama-7B's intermediate size 11008, doubled).
Traffic: 721 MB read + 361 MB written = 1.08 GB, ~0.27 ms at 4 TB/s; eager writes and re-reads
silu(a) in between, ~1.8 GB.
Eager on an H200 (torch 2.11, median of 20 calls, L2 flushed): 0.94 ms.
Small shape: x 67 x 782, so each half is 391 wide (odd).
"""

import torch
import torch.nn as nn
import torch.nn.functional as F

tokens, hidden = 16384, 11008       # benchmark shape; x is tokens x (2 * hidden)
small_tokens, small_hidden = 67, 391  # interpreter shape, odd on purpose


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        a, b = x.chunk(2, dim=-1)
        return F.silu(a) * b


def get_inputs():
    return [torch.randn(tokens, 2 * hidden, dtype=torch.bfloat16)]


def get_init_inputs():
    return []


def get_small_inputs():
    return [torch.randn(small_tokens, 2 * small_hidden, dtype=torch.bfloat16)]
