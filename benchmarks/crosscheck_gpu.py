"""The ncu cross-check's margin, measured: each known-good kernel's claimed time against ncu's device time.

    PYTHONPATH=$PWD python3 benchmarks/crosscheck_gpu.py [NAME ...]     # one GPU, ncu on PATH

For every kernel in tests/verifier/candidates/good/ with a task of the same name in tasks/ (or the
names given), verifies it on the GPU as the loop does (graph replays, no baselines), runs the ncu
cross-check (profiler/crosscheck.py) and prints one markdown row: the claimed median, ncu's device
time per call, claim / ncu, and the check's status. An honest claim / ncu under 1 / NCU_MARGIN (0.8)
would be a false "inconsistent": the margin is right only while every row stays above it.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main(names: list[str]) -> int:
    from profiler.crosscheck import cross_check
    from verifier import timing
    from verifier.records import VerifyConfig
    from verifier.task import load_task
    from verifier.verify import verify

    good = ROOT / "tests" / "verifier" / "candidates" / "good"
    names = names or sorted(p.stem for p in good.glob("*.py") if (ROOT / "tasks" / p.name).exists())
    print(f"NCU_MARGIN {timing.NCU_MARGIN:g}: a claim / ncu below {1 / timing.NCU_MARGIN:.2f} is rejected\n")
    print("| kernel | claimed ms (graph) | ncu ms per call | kernels | claim / ncu | check |")
    print("|---|---|---|---|---|---|")
    worst = 0
    for name in names:
        task, source = load_task(ROOT / "tasks" / f"{name}.py"), (good / f"{name}.py").read_text()
        result = verify(task, source, VerifyConfig(device="cuda", baselines=False, reps=50))
        if not result.passed:
            print(f"| {name} | {result.status}: {result.reason[:80]} | | | | |")
            worst = 1
            continue
        check = cross_check(task, source, result)
        if check.ncu_ms:
            print(f"| {name} | {check.claimed_ms:.4f} | {check.ncu_ms:.4f} | {check.kernels} | "
                  f"{check.claimed_ms / check.ncu_ms:.3f} | {check.status} |")
        else:
            print(f"| {name} | {result.timing.median_ms:.4f} | | | | {check.line} |")
        worst = max(worst, check.status != "consistent")
    return worst


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
