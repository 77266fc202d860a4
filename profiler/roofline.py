"""Where a task sits on a GPU's roofline, and how close a measured time comes to it.

`roofline(work, peaks)` gives the arithmetic intensity (FLOP per byte), the
ridge point where the memory and compute roofs meet, which roof bounds an
ideal kernel, the speed-of-light time, the physics check's floor, and, given a
measured time, the % of speed-of-light reached. The counting and the peak
table live in verifier/physics.py, shared with the verifier's physics check.

    python -m profiler.roofline FLOPS BYTES [GPU-NAME] [DTYPE] [MEASURED-MS]
"""

from __future__ import annotations

import sys

from profiler.records import Roofline
from verifier.physics import Peaks, Work, floor_ms, peaks_for, sol_ms


def roofline(work: Work, peaks: Peaks, dtype: str | None = None, measured_ms: float | None = None,
             *, margin: float = 0.8) -> Roofline:
    """The roofline of `work` on `peaks`; `sol_pct` only when `measured_ms` is given."""
    dtype = dtype or work.dtype
    compute_tflops = peaks.compute_tflops(dtype)
    ridge = compute_tflops * 1e12 / (peaks.mem_gbps * 1e9)
    intensity = work.flops / work.bytes if work.bytes else float("inf")
    sol = sol_ms(work, peaks, dtype)
    return Roofline(
        gpu=peaks.name, dtype=dtype, flops=work.flops, bytes=work.bytes, intensity=intensity, ridge=ridge,
        roof="compute" if intensity >= ridge else "memory", compute_tflops=compute_tflops,
        mem_gbps=peaks.mem_gbps, sol_ms=sol, floor_ms=floor_ms(work, peaks, dtype, margin=margin),
        measured_ms=measured_ms,
        sol_pct=100.0 * sol / measured_ms if measured_ms else None,
    )


def from_child(child: dict, measured_ms: float | None = None, peaks_override: str | None = None) -> Roofline | None:
    """The roofline from a profiling child's report (its GPU name and counted work), if both are known."""
    if not child.get("work") or not child.get("device"):
        return None
    peaks = peaks_for(child["device"], peaks_override)
    if peaks is None:
        return None
    return roofline(Work.from_dict(child["work"]), peaks, measured_ms=measured_ms or None)


def main(argv: list[str]) -> int:
    if len(argv) < 2:
        print(__doc__)
        return 2
    flops, nbytes = int(float(argv[0])), int(float(argv[1]))
    gpu = argv[2] if len(argv) > 2 else "H200"
    peaks = peaks_for(gpu)
    if peaks is None:
        print(f"unknown GPU {gpu!r}")
        return 2
    dtype = argv[3] if len(argv) > 3 else "float32"
    measured = float(argv[4]) if len(argv) > 4 else None
    r = roofline(Work(flops=flops, bytes=nbytes, read_bytes=nbytes, dtype=dtype), peaks, dtype, measured)
    print(f"{r.gpu} {r.dtype}: {r.intensity:.3g} FLOP/B (ridge {r.ridge:.3g}) -> {r.roof} roof; "
          f"SOL {r.sol_ms * 1e3:.4g} us, floor {r.floor_ms * 1e3:.4g} us"
          + (f", measured {r.sol_pct:.0f}% of SOL" if r.sol_pct is not None else ""))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
