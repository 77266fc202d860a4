"""Batched fp32 matrix product C[b] = A[b] @ B[b].

Reference: torch.bmm(a, b), TF32 off (full fp32 products; see matmul.py).
Benchmark shape: 64 x (512 x 512 @ 512 x 512) fp32: 2 * 64 * 512^3 = 17.2 GFLOP, ~0.34 ms at
~51 TFLOP/s.
Eager on an H200 (torch 2.11, median of 20 calls, L2 flushed): 0.35 ms.
Small shape: 3 x (67 x 93 @ 93 x 45): M, K and N all odd.
"""

import torch
import torch.nn as nn

batch, M, K, N = 64, 512, 512, 512                      # benchmark shape
small_batch, small_M, small_K, small_N = 3, 67, 93, 45  # interpreter shape, odd on purpose


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return torch.bmm(a, b)


def get_inputs():
    return [torch.randn(batch, M, K), torch.randn(batch, K, N)]


def get_init_inputs():
    return []


def get_small_inputs():
    return [torch.randn(small_batch, small_M, small_K), torch.randn(small_batch, small_K, small_N)]
