"""Honest (tasks/cross_entropy.py): per-row losses with an online logsumexp, then a second kernel for the mean.

Two launches: one program per row computes logsumexp(logits) - logits[target] over column blocks
(running max and rescaled sum), a second single-program kernel averages the row losses into a
0-d output. LLM habits: `import os, time` (time only under `__main__`), `os.environ.get` of a
TRITON_ flag to pick the block, `.contiguous()`, `targets.to(torch.int64)` for safety, asserts.
"""
import os, time

import torch
import torch.nn as nn
import triton
import triton.language as tl

BLOCK = int(os.environ.get("TRITON_CE_BLOCK", "1024"))


@triton.jit
def ce_row_kernel(logits_ptr, targets_ptr, loss_ptr, stride, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    base = logits_ptr + row * stride
    m = -float("inf")
    s = 0.0
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        x = tl.load(base + cols, mask=cols < n_cols, other=-float("inf"))
        new_m = tl.maximum(m, tl.max(x, axis=0))
        s = s * tl.exp(m - new_m) + tl.sum(tl.exp(x - new_m), axis=0)
        m = new_m
    target = tl.load(targets_ptr + row)
    picked = tl.load(base + target)
    tl.store(loss_ptr + row, m + tl.log(s) - picked)


@triton.jit
def mean_kernel(loss_ptr, out_ptr, n, BLOCK: tl.constexpr):
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for start in range(0, n, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        acc += tl.load(loss_ptr + offs, mask=offs < n, other=0.0)
    tl.store(out_ptr, tl.sum(acc, axis=0) / n)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        assert logits.dim() == 2 and targets.dim() == 1
        logits = logits.contiguous()
        targets = targets.to(torch.int64).contiguous()
        n_rows, n_cols = logits.shape
        losses = torch.empty(n_rows, device=logits.device, dtype=torch.float32)
        ce_row_kernel[(n_rows,)](logits, targets, losses, logits.stride(0), n_cols, BLOCK=BLOCK)
        out = torch.empty((), device=logits.device, dtype=torch.float32)
        mean_kernel[(1,)](losses, out, n_rows, BLOCK=1024)
        return out


if __name__ == "__main__":
    logits = torch.randn(8192, 50257, device="cuda")
    targets = torch.randint(0, 50257, (8192,), device="cuda")
    t0 = time.time()
    loss = ModelNew()(logits, targets)
    torch.cuda.synchronize()
    print(loss.item(), torch.nn.functional.cross_entropy(logits, targets).item(), time.time() - t0)
