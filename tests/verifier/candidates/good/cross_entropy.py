"""Mean cross-entropy in Triton without materialising log-softmax (known-good candidate for
tasks/cross_entropy.py).

Kernel 1, one program per row: an online pass over vocabulary blocks gives the row's
log-sum-exp, and the loss is logsumexp - logits[target]; only one fp32 per row is written.
Kernel 2, one program: sums the per-row losses block by block in a fixed order (deterministic,
unlike atomics) and divides by the row count. Every target is assumed to be a valid class index.
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl

BLOCK_VOCAB = 4096
BLOCK_ROWS = 1024


@triton.jit
def row_loss_kernel(
    loss_ptr,               # *fp32 [n_rows] per-row loss
    logits_ptr,             # *[n_rows, n_cols] logits
    targets_ptr,            # *int64 [n_rows] class index of each row
    logits_row_stride,      # elements between consecutive rows of logits
    n_cols,                 # vocabulary size
    BLOCK: tl.constexpr,    # columns per step
):
    row = tl.program_id(0)
    row_ptr = logits_ptr + row * logits_row_stride
    running_max = -float("inf")
    running_sum = 0.0
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        x = tl.load(row_ptr + cols, mask=cols < n_cols, other=-float("inf")).to(tl.float32)
        new_max = tl.maximum(running_max, tl.max(x, axis=0))
        # Rescale what was summed under the old max before adding this block.
        running_sum = running_sum * tl.exp(running_max - new_max) + tl.sum(tl.exp(x - new_max), axis=0)
        running_max = new_max
    target = tl.load(targets_ptr + row)
    target_logit = tl.load(row_ptr + target).to(tl.float32)
    tl.store(loss_ptr + row, running_max + tl.log(running_sum) - target_logit)


@triton.jit
def mean_kernel(
    out_ptr,                # *[] the mean, in the output dtype
    values_ptr,             # *fp32 [n] values to average
    n,                      # number of values
    BLOCK: tl.constexpr,    # values per step
):
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for start in range(0, n, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        acc += tl.load(values_ptr + offs, mask=offs < n, other=0.0)
    tl.store(out_ptr, (tl.sum(acc, axis=0) / n).to(out_ptr.dtype.element_ty))


def cross_entropy(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    if logits.stride(-1) != 1:
        logits = logits.contiguous()
    targets = targets.contiguous()
    n_rows, n_cols = logits.shape
    losses = torch.empty(n_rows, dtype=torch.float32, device=logits.device)
    row_loss_kernel[(n_rows,)](
        losses, logits, targets, logits.stride(0), n_cols,
        BLOCK=min(triton.next_power_of_2(n_cols), BLOCK_VOCAB), num_warps=8,
    )
    out = torch.empty((), dtype=logits.dtype, device=logits.device)
    mean_kernel[(1,)](out, losses, n_rows, BLOCK=BLOCK_ROWS, num_warps=4)
    return out


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        return cross_entropy(logits, targets)
