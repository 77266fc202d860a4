"""Honest (tasks/softmax.py): a row softmax whose kernel is a @staticmethod of ModelNew, launched as self._kernel[grid](...).

The launch's root name is `self`, not the kernel's: the static checks used to call the kernel never launched.
"""
import torch
import torch.nn as nn
import triton
import triton.language as tl


class ModelNew(nn.Module):
    """Softmax with the kernel kept on the module as a static method."""

    def __init__(self):
        super().__init__()

    @staticmethod
    @triton.jit
    def _kernel(out_ptr, in_ptr, stride, n_cols, BLOCK: tl.constexpr):
        row = tl.program_id(0)
        cols = tl.arange(0, BLOCK)
        mask = cols < n_cols
        x = tl.load(in_ptr + row * stride + cols, mask=mask, other=-float("inf"))
        x = x - tl.max(x, axis=0)
        e = tl.exp(x)
        tl.store(out_ptr + row * stride + cols, e / tl.sum(e, axis=0), mask=mask)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        out = torch.empty_like(x)
        n_rows, n_cols = x.shape
        self._kernel[(n_rows,)](out, x, x.stride(0), n_cols, BLOCK=triton.next_power_of_2(n_cols))
        return out
