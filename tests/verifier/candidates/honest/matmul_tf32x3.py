"""Honest (tasks/matmul.py): an LLM-style tiled GEMM asking for 3xTF32 products (`input_precision="tf32x3"`).

tf32x3 splits each fp32 operand into a TF32 "big" part and a TF32 "small" remainder and sums three
tensor-core products: fp32-level accuracy (~2e-7 relative) at tensor-core speed. The interpreter
now emulates it as the GPU computes it; this kernel must keep passing. Also: `from typing import
Tuple`, a grid lambda, a helper that checks shapes, `print` of the config only under a TRITON_
debug switch, and a timing `__main__` block with `torch.cuda.Event`.
"""
import math
import os
import time
from typing import Tuple

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def matmul_kernel(
    a_ptr, b_ptr, c_ptr,
    M, N, K,
    stride_am, stride_ak,
    stride_bk, stride_bn,
    stride_cm, stride_cn,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + offs_m[:, None] * stride_am + offs_k[None, :] * stride_ak
    b_ptrs = b_ptr + offs_k[:, None] * stride_bk + offs_n[None, :] * stride_bn
    accumulator = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        a = tl.load(a_ptrs, mask=(offs_m[:, None] < M) & (offs_k[None, :] < K - k * BLOCK_K), other=0.0)
        b = tl.load(b_ptrs, mask=(offs_k[:, None] < K - k * BLOCK_K) & (offs_n[None, :] < N), other=0.0)
        accumulator = tl.dot(a, b, accumulator, input_precision="tf32x3")
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk
    c_ptrs = c_ptr + offs_m[:, None] * stride_cm + offs_n[None, :] * stride_cn
    c_mask = (offs_m[:, None] < M) & (offs_n[None, :] < N)
    tl.store(c_ptrs, accumulator, mask=c_mask)


def _check_shapes(a: torch.Tensor, b: torch.Tensor) -> Tuple[int, int, int]:
    assert a.shape[1] == b.shape[0], f"incompatible dimensions {a.shape} @ {b.shape}"
    assert a.dtype == b.dtype == torch.float32
    return a.shape[0], b.shape[1], a.shape[1]


def matmul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    M, N, K = _check_shapes(a, b)
    c = torch.empty((M, N), device=a.device, dtype=a.dtype)
    BLOCK_M, BLOCK_N, BLOCK_K = 32, 32, 32
    grid = lambda META: (triton.cdiv(M, META["BLOCK_M"]), triton.cdiv(N, META["BLOCK_N"]))
    if os.environ.get("TRITON_PRINT_CONFIG"):
        print(f"matmul {M}x{K}x{N} blocks {BLOCK_M}x{BLOCK_N}x{BLOCK_K}")
    matmul_kernel[grid](
        a, b, c, M, N, K,
        a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1),
        BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, BLOCK_K=BLOCK_K,
    )
    return c


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return matmul(a, b)


if __name__ == "__main__":
    a = torch.randn(4096, 4096, device="cuda")
    b = torch.randn(4096, 4096, device="cuda")
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    matmul(a, b)
    start.record()
    for _ in range(10):
        matmul(a, b)
    end.record()
    torch.cuda.synchronize()
    ms = start.elapsed_time(end) / 10
    print(f"{2 * 4096 ** 3 / ms / 1e9:.1f} TFLOP/s ({ms:.3f} ms); math.isclose check:",
          math.isclose(float(matmul(a, b)[0, 0]), float((a @ b)[0, 0]), rel_tol=1e-4), time.ctime())
