"""Honest (tasks/gelu.py): an exact (erf) GELU whose `__main__` benchmark times it with a Timer class.

LLM habit: a small `class Timer:` context manager around `time.perf_counter()` (and `import time` at the
top), used only by the `if __name__ == "__main__":` block. Nothing the verifier runs names Timer, so its
methods never run; the static checks used to exempt only functions and rejected the class
("imports time: ... it is used outside the file's __main__ block").
"""
import time
import torch
import torch.nn as nn
import triton
import triton.language as tl

BLOCK_SIZE = 2048


@triton.jit
def gelu_kernel(
    out_ptr,                # *[n] output, the input's dtype
    in_ptr,                 # *[n] input, contiguous
    n_elements,             # number of elements
    BLOCK: tl.constexpr,    # elements per program
):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n_elements
    x = tl.load(in_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    y = 0.5 * x * (1.0 + tl.math.erf(x * 0.7071067811865476))  # 0.707... = 1 / sqrt(2)
    tl.store(out_ptr + offs, y.to(out_ptr.dtype.element_ty), mask=mask)


def gelu(x: torch.Tensor) -> torch.Tensor:
    x = x.contiguous()
    out = torch.empty_like(x)
    n = x.numel()
    gelu_kernel[(triton.cdiv(n, BLOCK_SIZE),)](out, x, n, BLOCK=BLOCK_SIZE, num_warps=4)
    return out


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return gelu(x)


class Timer:
    def __enter__(self):
        self.t0 = time.perf_counter()
        return self

    def __exit__(self, *exc):
        self.ms = (time.perf_counter() - self.t0) * 1e3


if __name__ == "__main__":
    x = torch.randn(8192, 16384, device="cuda")
    m = ModelNew()
    with Timer() as t:
        m(x)
        torch.cuda.synchronize()
    print(f"{t.ms:.3f} ms")
