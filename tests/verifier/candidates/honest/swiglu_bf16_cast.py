"""Honest (tasks/swiglu.py): SwiGLU computed into an fp32 buffer, cast to bf16 by torch at the end.

A common LLM shape: the kernel writes fp32 (`torch.empty(..., dtype=torch.float32)`) and forward
returns `out.to(x.dtype)`. The cast is torch's, but it keeps the kernel's element order, so its
provenance carries (verifier/audit.py); it also rounds once, as the reference does. Also: `import
time` used only in `__main__`, a `chunk`-free indexing of the two halves, type hints.
"""
import time

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def swiglu_kernel(x_ptr, out_ptr, n_rows, half, stride_x, stride_o, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    mask = cols < half
    a = tl.load(x_ptr + row * stride_x + cols, mask=mask, other=0.0).to(tl.float32)
    b = tl.load(x_ptr + row * stride_x + half + cols, mask=mask, other=0.0).to(tl.float32)
    silu = (a / (1.0 + tl.exp(-a))).to(tl.bfloat16).to(tl.float32)   # F.silu rounds to bf16 first
    tl.store(out_ptr + row * stride_o + cols, silu * b, mask=mask)


class ModelNew(nn.Module):
    def __init__(self) -> None:
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        n_rows, width = x.shape
        half = width // 2
        out = torch.empty((n_rows, half), device=x.device, dtype=torch.float32)
        BLOCK = 256
        swiglu_kernel[(n_rows, triton.cdiv(half, BLOCK))](x, out, n_rows, half, x.stride(0), out.stride(0),
                                                           BLOCK=BLOCK)
        return out.to(x.dtype)


if __name__ == "__main__":
    x = torch.randn(16384, 22016, dtype=torch.bfloat16, device="cuda")
    t = time.perf_counter()
    ModelNew()(x)
    torch.cuda.synchronize()
    print(f"{(time.perf_counter() - t) * 1e3:.2f} ms")
