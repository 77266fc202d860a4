"""Honest (tasks/softmax.py): a row softmax whose `__main__` block times it with triton.testing.do_bench.

LLM habit: `from triton.testing import do_bench` at the top of the file, above the module docstring a
model forgot to move, used only by the `if __name__ == "__main__":` benchmark. The import only binds a
name nothing the verifier runs reads; the static checks used to reject it ("imports triton.testing").
"""
from triton.testing import do_bench

import torch
import torch.nn as nn
import triton
import triton.language as tl

# A row this long (fp32) is 64 values per thread at 16 warps: more would spill registers.
MAX_ROW_BLOCK = 32768
LOOP_BLOCK = 4096


@triton.jit
def softmax_row_kernel(
    out_ptr,                # *[n_rows, n_cols] output, same dtype as the input
    in_ptr,                 # *[n_rows, n_cols] input
    in_row_stride,          # elements between consecutive input rows
    out_row_stride,         # elements between consecutive output rows
    n_cols,                 # row length
    BLOCK: tl.constexpr,    # power of two >= n_cols
):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    # -inf in the masked lanes: they vanish from the max and contribute exp(-inf) = 0 to the sum.
    x = tl.load(in_ptr + row * in_row_stride + cols, mask=mask, other=-float("inf")).to(tl.float32)
    x = x - tl.max(x, axis=0)
    num = tl.exp(x)
    out = num / tl.sum(num, axis=0)
    tl.store(out_ptr + row * out_row_stride + cols, out.to(out_ptr.dtype.element_ty), mask=mask)


@triton.jit
def softmax_looped_kernel(
    out_ptr,                # *[n_rows, n_cols] output, same dtype as the input
    in_ptr,                 # *[n_rows, n_cols] input
    in_row_stride,          # elements between consecutive input rows
    out_row_stride,         # elements between consecutive output rows
    n_cols,                 # row length
    BLOCK: tl.constexpr,    # columns per step
):
    row = tl.program_id(0)
    in_row = in_ptr + row * in_row_stride
    out_row = out_ptr + row * out_row_stride
    running_max = -float("inf")
    running_sum = 0.0
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        x = tl.load(in_row + cols, mask=cols < n_cols, other=-float("inf")).to(tl.float32)
        new_max = tl.maximum(running_max, tl.max(x, axis=0))
        # Rescale what was summed under the old max before adding this block.
        running_sum = running_sum * tl.exp(running_max - new_max) + tl.sum(tl.exp(x - new_max), axis=0)
        running_max = new_max
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        mask = cols < n_cols
        x = tl.load(in_row + cols, mask=mask, other=0.0).to(tl.float32)
        out = tl.exp(x - running_max) / running_sum
        tl.store(out_row + cols, out.to(out_ptr.dtype.element_ty), mask=mask)


def softmax(x: torch.Tensor) -> torch.Tensor:
    n_cols = x.shape[-1]
    x2 = x.reshape(-1, n_cols)
    if x2.stride(-1) != 1:
        x2 = x2.contiguous()
    out = torch.empty((x2.shape[0], n_cols), dtype=x.dtype, device=x.device)
    n_rows = x2.shape[0]
    block = triton.next_power_of_2(n_cols)
    if block <= MAX_ROW_BLOCK:
        softmax_row_kernel[(n_rows,)](
            out, x2, x2.stride(0), out.stride(0), n_cols,
            BLOCK=block, num_warps=min(max(block // 512, 1), 16),
        )
    else:
        softmax_looped_kernel[(n_rows,)](
            out, x2, x2.stride(0), out.stride(0), n_cols,
            BLOCK=LOOP_BLOCK, num_warps=8,
        )
    return out.view(x.shape)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return softmax(x)


if __name__ == "__main__":
    x = torch.randn(4096, 4096, device="cuda")
    ms = do_bench(lambda: ModelNew()(x))
    print(f"{ms:.3f} ms, {2 * x.numel() * x.element_size() / ms / 1e6:.0f} GB/s")
