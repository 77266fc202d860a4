"""Honest (tasks/transpose.py): a tiled batched transpose, 2-D tiles loaded along rows and stored along columns.

Each program moves one TILE x TILE tile of one batch: loads it with row-major offsets and stores
it to the transposed position (`tl.trans`), masked on both ragged edges. LLM habits: a grid from a
helper, strides passed explicitly, `import sys` used only to print to stderr in the `__main__`
check, and `torch.cuda.synchronize()` in forward under `is_available()`.
"""
import sys

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def transpose_kernel(
    in_ptr, out_ptr,
    H, W,
    s_ib, s_ih, s_iw,
    s_ob, s_ow, s_oh,
    TILE: tl.constexpr,
):
    b = tl.program_id(2)
    pid_h = tl.program_id(0)
    pid_w = tl.program_id(1)
    offs_h = pid_h * TILE + tl.arange(0, TILE)
    offs_w = pid_w * TILE + tl.arange(0, TILE)
    mask = (offs_h[:, None] < H) & (offs_w[None, :] < W)
    tile = tl.load(in_ptr + b * s_ib + offs_h[:, None] * s_ih + offs_w[None, :] * s_iw, mask=mask)
    out_mask = (offs_w[:, None] < W) & (offs_h[None, :] < H)
    tl.store(out_ptr + b * s_ob + offs_w[:, None] * s_ow + offs_h[None, :] * s_oh, tl.trans(tile), mask=out_mask)


def grid_for(B: int, H: int, W: int, tile: int):
    return (triton.cdiv(H, tile), triton.cdiv(W, tile), B)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, H, W = x.shape
        out = torch.empty((B, W, H), device=x.device, dtype=x.dtype)
        TILE = 32
        transpose_kernel[grid_for(B, H, W, TILE)](
            x, out, H, W,
            x.stride(0), x.stride(1), x.stride(2),
            out.stride(0), out.stride(1), out.stride(2),
            TILE=TILE,
        )
        if torch.cuda.is_available():
            torch.cuda.synchronize()
        return out


if __name__ == "__main__":
    x = torch.randn(8, 4096, 4096, device="cuda")
    y = ModelNew()(x)
    print("max err", (y - x.transpose(1, 2)).abs().max().item(), file=sys.stderr)
