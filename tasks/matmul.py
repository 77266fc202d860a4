"""Dense fp32 matrix product C = A @ B.

Reference: torch.matmul(a, b), computed with TF32 off, so a kernel must keep fp32-accurate products
(in Triton: tl.dot(..., input_precision="ieee"), exact on the FMA units, or "tf32x3", three TF32
tensor-core passes; one "tf32" pass misses the 1e-4 tolerance at K = 4096).
Benchmark shape: 4096 x 4096 @ 4096 x 4096 fp32: 2 * 4096^3 = 137 GFLOP, ~2.7 ms at the
~51 TFLOP/s that torch's fp32 GEMM reached on an H200 (fp32 SIMT peak 67). A Triton tf32x3 GEMM ran
2.49 ms against cuBLAS's 2.72 ms there (benchmarks/heuristic.md, 2026-12-03); exact products, 3.18 ms.
Eager on an H200 (torch 2.11, median of 20 calls, L2 flushed): 2.67 ms.
Small shape: 67 x 93 @ 93 x 45: M, K and N all odd, so every tile edge is masked.
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
    return [torch.randn(M, K), torch.randn(K, N)]


def get_init_inputs():
    return []


def get_small_inputs():
    return [torch.randn(small_M, small_K), torch.randn(small_K, small_N)]
