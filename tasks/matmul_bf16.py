"""Dense bf16 matrix product C = A @ B (fp32 accumulation, bf16 output).

Reference: torch.matmul(a, b) on bf16 tensors; the default bf16 tolerance (1e-2) applies.
Benchmark shape: 4096 x 4096 @ 4096 x 4096 bf16: 2 * 4096^3 = 137 GFLOP, ~0.2 ms at ~700 TFLOP/s
(an H200 measured ~790 dense bf16 on larger products).
Eager on an H200 (torch 2.11, median of 20 calls, L2 flushed): 0.18 ms.
Small shape: 67 x 93 @ 93 x 45: M, K and N all odd.
"""

import torch
import torch.nn as nn

M, K, N = 4096, 4096, 4096          # benchmark shape
small_M, small_K, small_N = 67, 93, 45  # interpreter shape, odd on purpose


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return torch.matmul(a, b)


def get_inputs():
    return [torch.randn(M, K, dtype=torch.bfloat16), torch.randn(K, N, dtype=torch.bfloat16)]


def get_init_inputs():
    return []


def get_small_inputs():
    return [
        torch.randn(small_M, small_K, dtype=torch.bfloat16),
        torch.randn(small_K, small_N, dtype=torch.bfloat16),
    ]
