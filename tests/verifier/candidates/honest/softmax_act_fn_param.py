"""Honest (tasks/softmax.py): a row softmax handed its exponential (one of two @triton.jit functions) as a constexpr argument.

The function is picked into `self.exp_fn` and passed through a variable; the kernel-body rule used to accept only a jit function's name written at the launch.
"""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _exp_native(x):
    return tl.exp(x)


@triton.jit
def _exp_via_exp2(x):
    return tl.exp2(x * 1.4426950408889634)


@triton.jit
def softmax_kernel(out_ptr, in_ptr, stride, n_cols, EXP_FN: tl.constexpr, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(in_ptr + row * stride + cols, mask=mask, other=-float("inf"))
    e = EXP_FN(x - tl.max(x, axis=0))
    tl.store(out_ptr + row * stride + cols, e / tl.sum(e, axis=0), mask=mask)


class ModelNew(nn.Module):
    def __init__(self, use_exp2: bool = True):
        super().__init__()
        self.exp_fn = _exp_via_exp2 if use_exp2 else _exp_native

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        out = torch.empty_like(x)
        n_rows, n_cols = x.shape
        exp_fn = self.exp_fn
        softmax_kernel[(n_rows,)](out, x, x.stride(0), n_cols, EXP_FN=exp_fn, BLOCK=triton.next_power_of_2(n_cols))
        return out
