"""KernelBench's example solutions and its adversarial kernels through `kgen verify`, on a GPU.

    python3 benchmarks/kernelbench_examples_gpu.py KB_ROOT --out $OUT/kb_examples.json

KB_ROOT is a copy of KernelBench (its `src/kernelbench/prompts/` and
`src/kernelbench/unit_tests/test_kernels/`). Each pair is verified by the CLI,
as a user runs it, in a process of its own, its wall time measured from start to
verdict:

- the example CUDA solutions (`load_inline`, the legacy default stream) against
  their references: expected to pass;
- the Triton example: expected to pass;
- KernelBench's adversarial kernels against tasks/matmul.py (the square 4096 fp32
  matmul they were written against): expected to be rejected, with a reason;
- the first CUDA example once more, its extension now in the torch extensions
  cache: the cached build time against the cold one.

With --prebuild, every other case's load_inline source is first built side by
side in one round (verifier.inline_build.prebuild_round, as the loop does for a
round's candidates), each build's time printed; those cases then find their
builds in the cache, and the first stays cold.

A JSON line per case goes to --out; a markdown table is printed last.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def cases(kb: Path) -> list[tuple[str, Path, Path, str]]:
    """(label, task, kernel, expected) for every case, in the order they run."""
    prompts = kb / "src" / "kernelbench" / "prompts"
    adversarial = kb / "src" / "kernelbench" / "unit_tests" / "test_kernels"
    found = [
        ("cuda add (cold build)", prompts / "model_ex_add.py", prompts / "model_new_ex_add.py", "ok"),
        ("cuda add (cached build)", prompts / "model_ex_add.py", prompts / "model_new_ex_add.py", "ok"),
        ("cuda fuse_gelu", prompts / "few_shot" / "model_ex_fuse_gelu.py",
         prompts / "few_shot" / "model_new_ex_fuse_gelu.py", "ok"),
        ("cuda tiled_matmul", prompts / "few_shot" / "model_ex_tiled_matmul.py",
         prompts / "few_shot" / "model_new_ex_tiled_matmul.py", "ok"),
        ("triton add", prompts / "model_ex_add.py", prompts / "model_new_ex_add_triton.py", "ok"),
    ]
    for kernel in sorted(adversarial.glob("*.py")):
        found.append((f"adversarial {kernel.stem}", ROOT / "tasks" / "matmul.py", kernel, "rejected"))
    return found


def verify(task: Path, kernel: Path, timing: str) -> tuple[float, dict, str]:
    t0 = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "agent", "verify", str(task), str(kernel), "--json",
                           "--no-baselines", "--timing", timing],
                          capture_output=True, text=True, cwd=ROOT, env=dict(os.environ, PYTHONUNBUFFERED="1"))
    wall_s = time.perf_counter() - t0
    try:
        result = json.loads(done.stdout)
    except json.JSONDecodeError:
        result = {"status": f"no JSON (exit {done.returncode})", "reason": done.stderr[-500:]}
    return wall_s, result, done.stderr[-2000:]


def prebuild_all(found) -> None:
    """The distinct load_inline sources of the cases, built at once by verifier.inline_build.prebuild_round."""
    sys.path.insert(0, str(ROOT))
    from verifier import inline_build

    # the cold case stays cold: its build is measured inside its own verification
    cold = {kernel.read_text() for label, _, kernel, _ in found if "(cold build)" in label and kernel.exists()}
    sources = list(dict.fromkeys(kernel.read_text() for _, _, kernel, _ in found
                                 if kernel.exists() and "load_inline" in kernel.read_text()
                                 and kernel.read_text() not in cold))
    t0 = time.perf_counter()
    n = inline_build.prebuild_round(sources, "cuda", timeout_s=600, parallel=len(sources) or 1)
    print(f"prebuild round: {n} load_inline sources built side by side in {time.perf_counter() - t0:.1f} s",
          flush=True)
    for entry in sorted(inline_build.index_dir().glob("*.json")):
        record = json.loads(entry.read_text())
        print(f"  {', '.join(record.get('names', []))}: {record.get('build_s')} s (key {record.get('key')})",
              flush=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("kb_root", type=Path)
    ap.add_argument("--out", type=Path, default=Path("kb_examples.json"))
    ap.add_argument("--timing", default="graph")
    ap.add_argument("--prebuild", action="store_true",
                    help="first build every case's load_inline extensions side by side (one round, as the loop "
                         "does for a round's candidates); the cases then find them built")
    args = ap.parse_args()
    if args.prebuild:
        prebuild_all(cases(args.kb_root))
    rows = []
    with args.out.open("w") as log:
        for label, task, kernel, expected in cases(args.kb_root):
            if not kernel.exists() or not task.exists():
                rows.append((label, expected, "missing", "", 0.0, ""))
                continue
            wall_s, result, stderr = verify(task, kernel, args.timing)
            phases = result.get("phases") or {}
            # a load_inline extension is built when the candidate's module is imported
            build_s = next((v for k, v in phases.items() if "build" in k or k.startswith("import")), None)
            timing = result.get("timing") or {}
            speed = (result.get("speedups") or {}).get("eager")
            log.write(json.dumps({"label": label, "task": str(task), "kernel": str(kernel), "wall_s": wall_s,
                                  "expected": expected, "result": result, "stderr": stderr}) + "\n")
            log.flush()
            reason = " ".join(str(result.get("reason", "")).split())[:110]
            median = timing.get("median_ms") if isinstance(timing, dict) else None
            extra = " / ".join("-" if v is None else f"{v:.3g}" for v in (build_s, median, speed))
            rows.append((label, expected, result.get("status", "?"), reason, wall_s, extra))
            print(f"{label}: {result.get('status')} in {wall_s:.1f} s: {reason}", flush=True)
    print("\n| case | expected | verdict | wall s | import+build s / median ms / vs eager | reason |")
    print("|---|---|---|---|---|---|")
    for label, expected, status, reason, wall_s, extra in rows:
        print(f"| {label} | {expected} | {status} | {wall_s:.1f} | {extra} | {reason} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
