"""Where a large output's hand-over time goes on a GPU machine (the judge <- candidate tensor files).

    python3 benchmarks/transfer_gpu.py [GIB ...]      # default: 1.5 6

For a CUDA float32 tensor of each size, the pieces of one hand-over as verifier.tensorfile makes it
through /dev/shm: device-to-host into the page-locked staging buffer, the file's write, its read into the
judge's staging buffer, host-to-device, the unlink. Each twice: with one thread (the file path before
large files took several threads) and as tensorfile does now (PARALLEL_MIN_BYTES, PARALLEL_THREADS).
Then the device-side work of a correctness check on the same tensor (the reference's tanh, the comparison,
making the inputs) for scale. One JSON line per size, a table last.
"""

from __future__ import annotations

import json
import os
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from verifier import tensorfile  # noqa: E402
from verifier.correctness import compare_outputs  # noqa: E402


def clock(fn):
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    out = fn()
    torch.cuda.synchronize()
    return out, time.perf_counter() - t0


def hand_over(t: torch.Tensor, cand: tensorfile.Staging, judge: tensorfile.Staging, row: dict, label: str) -> None:
    path = "/dev/shm/kgen-transfer-bench.t"
    nbytes = t.numel() * t.element_size()
    for _ in range(2):   # the second time is recorded: buffers registered, pages of the last file freed
        host = cand.take(nbytes)
        _, d2h = clock(lambda: host.view(t.dtype).copy_(t))
        _, write = clock(lambda: tensorfile.write(path, t, cand))
        back, read = clock(lambda: tensorfile.read(path, 1 << 40, judge, nbytes))
        same, h2d = clock(lambda: back.to("cuda", copy=True))
        _, unlink = clock(lambda: os.unlink(path))
    assert torch.equal(same, t)
    row.update({f"{label}: d2h (in write)": d2h, f"{label}: write": write, f"{label}: read": read,
                f"{label}: h2d": h2d, f"{label}: unlink": unlink,
                f"{label}: one hand-over": write + read + h2d + unlink})


def one(gib: float) -> dict:
    n = int(gib * (1 << 30)) // 4
    t = torch.randn(n, device="cuda")
    nbytes = n * 4
    cand, judge = tensorfile.Staging(), tensorfile.Staging()
    cand.take(nbytes), judge.take(nbytes)
    row = {"gib": gib, "pinned": cand.pinned and judge.pinned, "threads": tensorfile.PARALLEL_THREADS}
    default = tensorfile.PARALLEL_MIN_BYTES
    tensorfile.PARALLEL_MIN_BYTES = 1 << 62
    hand_over(t, cand, judge, row, "one thread")
    tensorfile.PARALLEL_MIN_BYTES = default
    hand_over(t, cand, judge, row, f"{tensorfile.PARALLEL_THREADS} threads")
    ref = torch.tanh(t)
    _, row["device: reference (tanh)"] = clock(lambda: torch.tanh(t))
    _, row["device: compare_outputs"] = clock(lambda: compare_outputs(ref.clone(), ref, 1e-4, 1e-4))
    _, row["device: randn"] = clock(lambda: torch.randn(n, device="cuda"))
    cand.release(), judge.release()
    return {k: (round(v, 3) if isinstance(v, float) else v) for k, v in row.items()}


def main() -> None:
    sizes = [float(a) for a in sys.argv[1:]] or [1.5, 6.0]
    rows = []
    for g in sizes:
        r = one(g)
        print(json.dumps(r), flush=True)
        rows.append(r)
        torch.cuda.empty_cache()
    keys = [k for k in rows[0] if k not in ("gib", "pinned", "threads")]
    print("| step (s) | " + " | ".join(f"{r['gib']} GiB" for r in rows) + " |")
    print("|---|" + "---:|" * len(rows))
    for k in keys:
        print(f"| {k} | " + " | ".join(str(r[k]) for r in rows) + " |")


if __name__ == "__main__":
    main()
