"""Honest (tasks/layernorm.py): a looped two-pass LayerNorm over wide rows, with helpers and a `__main__` check.

Keeps the task's parameter names (`self.ln`), loops over the row in BLOCK_SIZE chunks (hidden =
5120 is not a power of two), computes mean and variance in fp32, and writes through the weight
and bias. `import math, time` at the top; `math` is used for the default eps, `time` only in the
benchmark block; the eps is read from the module, as LLM code does.
"""
import math, time

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _layer_norm_fwd(
    X, Y, W, B,
    stride, N, eps,
    BLOCK_SIZE: tl.constexpr,
):
    row = tl.program_id(0)
    Y += row * stride
    X += row * stride
    # mean
    _mean = tl.zeros([BLOCK_SIZE], dtype=tl.float32)
    for off in range(0, N, BLOCK_SIZE):
        cols = off + tl.arange(0, BLOCK_SIZE)
        a = tl.load(X + cols, mask=cols < N, other=0.).to(tl.float32)
        _mean += a
    mean = tl.sum(_mean, axis=0) / N
    # variance
    _var = tl.zeros([BLOCK_SIZE], dtype=tl.float32)
    for off in range(0, N, BLOCK_SIZE):
        cols = off + tl.arange(0, BLOCK_SIZE)
        x = tl.load(X + cols, mask=cols < N, other=0.).to(tl.float32)
        x = tl.where(cols < N, x - mean, 0.)
        _var += x * x
    var = tl.sum(_var, axis=0) / N
    rstd = 1 / tl.sqrt(var + eps)
    # normalize and apply the affine transform
    for off in range(0, N, BLOCK_SIZE):
        cols = off + tl.arange(0, BLOCK_SIZE)
        mask = cols < N
        w = tl.load(W + cols, mask=mask)
        b = tl.load(B + cols, mask=mask)
        x = tl.load(X + cols, mask=mask, other=0.).to(tl.float32)
        x_hat = (x - mean) * rstd
        y = x_hat * w + b
        tl.store(Y + cols, y, mask=mask)


def layer_norm(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, eps: float = 1e-5) -> torch.Tensor:
    x_arg = x.reshape(-1, x.shape[-1]).contiguous()
    M, N = x_arg.shape
    y = torch.empty_like(x_arg)
    BLOCK_SIZE = min(1024, triton.next_power_of_2(N))
    _layer_norm_fwd[(M,)](x_arg, y, weight, bias, x_arg.stride(0), N, eps, BLOCK_SIZE=BLOCK_SIZE, num_warps=8)
    return y.view_as(x)


class ModelNew(nn.Module):
    def __init__(self, hidden: int):
        super().__init__()
        self.ln = nn.LayerNorm(hidden)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        eps = self.ln.eps if self.ln.eps is not None else math.sqrt(1e-10)
        return layer_norm(x, self.ln.weight, self.ln.bias, eps)


if __name__ == "__main__":
    m = ModelNew(5120).cuda()
    x = torch.randn(32768, 5120, device="cuda")
    start = time.perf_counter()
    for _ in range(20):
        m(x)
    torch.cuda.synchronize()
    print(f"{(time.perf_counter() - start) / 20 * 1e3:.3f} ms")
