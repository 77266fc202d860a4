"""Honest (tasks/softmax.py): a row softmax whose `__all__` lists a benchmark() that only its `__main__` block runs.

The names in `__all__` are what `import *` takes; the reachability pass used to read them as uses.
"""
import time
import torch
import torch.nn as nn
import triton
import triton.language as tl

__all__ = ["ModelNew", "benchmark"]

@triton.jit
def softmax_kernel(out_ptr, in_ptr, stride, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(in_ptr + row * stride + cols, mask=mask, other=-float("inf"))
    e = tl.exp(x - tl.max(x, axis=0))
    tl.store(out_ptr + row * stride + cols, e / tl.sum(e, axis=0), mask=mask)


class ModelNew(nn.Module):
    def forward(self, x):
        x = x.contiguous()
        out = torch.empty_like(x)
        softmax_kernel[(x.shape[0],)](out, x, x.stride(0), x.shape[1], BLOCK=triton.next_power_of_2(x.shape[1]))
        return out


class Timer:
    def __enter__(self):
        self.t0 = time.perf_counter()
        return self

    def __exit__(self, *exc):
        self.elapsed = time.perf_counter() - self.t0


def benchmark(n_iter: int = 10):
    x = torch.randn(4096, 4096, device="cuda")
    m = ModelNew()
    with Timer() as t:
        for _ in range(n_iter):
            m(x)
        torch.cuda.synchronize()
    print(f"{t.elapsed / n_iter * 1e3:.3f} ms")


if __name__ == "__main__":
    benchmark()
