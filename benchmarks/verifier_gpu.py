"""Verifier on a GPU: known-good kernels verified and timed, timing stability, events vs ncu, harness speed.

    python3 benchmarks/verifier_gpu.py --out $OUT/verifier.json

For each known-good candidate (Triton, CuPy and load_inline): `verify()` on the
task's real inputs with eager and both torch.compile modes, the candidate timed
twice in the same run. Then: the event median against ncu's
gpu__time_duration for one single-kernel candidate (and the same candidate
timed from CUDA-graph replays, `timing="graph"`), the wall time of
`kgen verify` from start to verdict, where that time goes, and candidates
verified per minute once the baselines are cached. Prints a markdown table last.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from verifier.records import TIMING_METHODS, VerifyConfig  # noqa: E402
from verifier.task import load_task  # noqa: E402
from verifier.verify import verify  # noqa: E402

GOOD = ROOT / "tests" / "verifier" / "candidates" / "good"
CUDA = ROOT / "tests" / "verifier" / "candidates" / "cuda"


def cases(only: set[str] | None = None) -> list[tuple[str, Path]]:
    found = [(p.stem, p) for p in sorted(GOOD.glob("*.py")) if only is None or p.stem in only]
    for p in sorted(CUDA.glob("*.py")):
        task = p.stem.split("_cupy")[0].split("_load_inline")[0].split("_inline")[0]
        found.append((task, p))
    return found


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="verifier_gpu.json")
    ap.add_argument("--reps", type=int, default=100)
    ap.add_argument("--timing", default=VerifyConfig.timing, choices=TIMING_METHODS)
    ap.add_argument("--tasks", default="", help="comma-separated good candidates to run (default: all)")
    args = ap.parse_args()
    only = set(args.tasks.split(",")) if args.tasks else None
    config = VerifyConfig(device="cuda", repeat_timing=True, reps=args.reps, timeout_s=900, timing=args.timing)
    rows, records = [], []
    ncu_cmp: dict = {}
    speed: dict = {}

    def save() -> None:     # after every step, so a run cut short still leaves its numbers
        Path(args.out).write_text(json.dumps({"records": records, "ncu_vs_events": ncu_cmp, "speed": speed},
                                             indent=2, default=str))

    for task_name, path in cases(only):
        task = load_task(ROOT / "tasks" / f"{task_name}.py")
        t0 = time.perf_counter()
        r = verify(task, path.read_text(), config)
        wall = time.perf_counter() - t0
        rec = {"task": task_name, "candidate": str(path.relative_to(ROOT)), "wall_s": wall, **r.to_dict()}
        rec.pop("stdout"), rec.pop("stderr")
        records.append(rec)
        med = r.timing.median_ms if r.timing else None
        rep = r.timing_repeat.median_ms if r.timing_repeat else None
        rows.append((task_name, path.name, r.backend, r.status, med, rep,
                     r.baselines.get("eager"), r.baselines.get("compile"), r.baselines.get("compile-max-autotune"),
                     r.speedups, r.floor_ms, r.reason if not r.passed else ""))
        print(f"{task_name:16s} {path.name:24s} {r.status:10s} {med} {rep} {r.speedups} wall {wall:.1f}s", flush=True)
        save()

    # Events vs ncu for a single-kernel candidate.
    try:
        from profiler.profile import profile_candidate

        task = load_task(ROOT / "tasks" / "softmax.py")
        src = (GOOD / "softmax.py").read_text()
        diag = profile_candidate(task, src, timeout_s=300)
        ev = next(x for x in records if x["task"] == "softmax" and x["backend"] == "triton")
        ncu_us = sum(k.duration_us or 0 for k in diag.kernels)
        ncu_cmp = {"median_ms": ev["timing"]["median_ms"], "timed_as": ev["timing"].get("method"),
                   "host_ms": ev["timing"].get("host_ms"),
                   "ncu_ms": ncu_us / 1e3, "kernels": [k.name for k in diag.kernels], "source": diag.source,
                   "notes": diag.notes, "ncu_passes_s": diag.passes_s}
    except Exception as exc:  # the table says what failed
        ncu_cmp = {"error": f"{type(exc).__name__}: {exc}"}
    # The same candidate timed by the other method (events around each call as issued, or graph replays).
    other = "events" if config.timing == "graph" else "graph"
    g = verify(load_task(ROOT / "tasks" / "softmax.py"), (GOOD / "softmax.py").read_text(),
               VerifyConfig(device="cuda", timing=other, baselines=False, reps=args.reps))
    ncu_cmp.update(method=config.timing, other_method=other, other_status=g.status, other_reason=g.reason,
                   other_median_ms=g.timing and g.timing.median_ms, other_host_ms=g.timing and g.timing.host_ms,
                   other_timed_as=g.timing and g.timing.method, other_flags=g.flags,
                   other_eager_ms=g.baselines.get("eager") and g.baselines["eager"].median_ms)
    save()
    print("ncu vs events:", json.dumps(ncu_cmp, default=str), flush=True)

    # Harness speed: `kgen verify` from start to verdict with the baselines cached by now, three times,
    # and where the last one's time went (the verdict's phases).
    walls = []
    for _ in range(3):
        t0 = time.perf_counter()
        done = subprocess.run([sys.executable, "-m", "agent", "verify", "tasks/softmax.py",
                               str(GOOD / "softmax.py"), "--json"], cwd=ROOT, capture_output=True, text=True)
        walls.append(time.perf_counter() - t0)
    speed["kgen_verify_wall_s"] = walls
    speed["kgen_verify_rc"] = done.returncode
    speed["candidates_per_minute"] = 60 * len(walls) / sum(walls)
    try:
        speed["phases_s"] = json.loads(done.stdout).get("phases")
    except json.JSONDecodeError:
        speed["phases_s"] = {"unreadable": done.stdout[-300:] + done.stderr[-300:]}
    save()

    def ms(t):
        return f"{t.median_ms:.4f}" if t else "-"

    print("\n| task | candidate | backend | status | cand ms | again ms | Δ% | eager ms | compile ms | max-autotune ms | vs eager | vs compile | vs max-autotune | floor ms |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for (task, name, backend, status, med, rep, e, c, m, sp, floor, reason) in rows:
        delta = f"{100 * abs(rep - med) / med:.1f}" if med and rep else "-"
        f = lambda k: f"{sp[k]:.2f}x" if k in sp else "-"  # noqa: E731
        print(f"| {task} | {name} | {backend} | {status} {reason[:60]} | {med and f'{med:.4f}' or '-'} | "
              f"{rep and f'{rep:.4f}' or '-'} | {delta} | {ms(e)} | {ms(c)} | {ms(m)} | {f('eager')} | {f('compile')} | "
              f"{f('compile-max-autotune')} | {floor and f'{floor:.4f}' or '-'} |")
    print("\nncu vs events:", json.dumps(ncu_cmp, default=str))
    print("speed:", json.dumps(speed, default=str))


if __name__ == "__main__":
    main()
