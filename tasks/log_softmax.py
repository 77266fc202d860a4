"""Log-softmax over a vocabulary-sized last dimension (fp32), as a language-model head computes it.

Reference: torch.log_softmax(x, dim=-1).
Benchmark shape: x 4096 x 50257 fp32 (GPT-2's vocabulary: odd, and too wide to hold a row in
registers). Traffic: 823 MB read + 823 MB written = 1.65 GB, ~0.41 ms at 4 TB/s.
Eager on an H200 (torch 2.11, median of 20 calls, L2 flushed): 0.76 ms.
Small shape: 61 x 3001, so that a kernel looping over column blocks meets a ragged last block.
"""

import torch
import torch.nn as nn

rows, vocab = 4096, 50257           # benchmark shape
small_rows, small_vocab = 61, 3001  # interpreter shape, odd on purpose


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.log_softmax(x, dim=-1)


def get_inputs():
    return [torch.randn(rows, vocab)]


def get_init_inputs():
    return []


def get_small_inputs():
    return [torch.randn(small_rows, small_vocab)]
