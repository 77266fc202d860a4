"""Inductor-seeded candidates against the heuristic templates, eager and torch.compile, on one GPU.

    python3 benchmarks/inductor_seed_gpu.py --out $OUT tasks/layernorm.py tasks/cumsum.py \\
        /work/shared/kernelbench/KernelBench/level1/38_L1Norm_.py ...

The twelve problems of the first GPU run (KB: the KernelBench folder on that machine), within
--budget-s 330 (tasks still waiting then are listed as skipped):

    KB=/work/shared/kernelbench/KernelBench
    PYTHONPATH=$PWD python3 benchmarks/inductor_seed_gpu.py --out $OUT/inductor_seed --budget-s 330 \\
        tasks/layernorm.py tasks/l2_normalize.py tasks/cumsum.py tasks/softmax.py tasks/rmsnorm.py \\
        tasks/matmul.py $KB/level1/35_GroupNorm_.py $KB/level1/37_FrobeniusNorm_.py \\
        $KB/level1/38_L1Norm_.py $KB/level1/91_cumsum_reverse.py $KB/level1/51_Argmax_over_a_dimension.py \\
        $KB/level1/9_Tall_skinny_matrix_multiplication_.py

For each task file given (kgen's tasks/ or KernelBench level-1/2 files, used in place, never
copied): capture the seed (Inductor compiled for the GPU, stopped after code generation), write
its candidate at Inductor's first configurations, and the template candidate at the GPU walk's
round-one default where a template covers the task; `verify()` both on the task's own inputs with
eager and both torch.compile modes as baselines (`--timing graph`: CUDA-graph replays, L2 flushed).
Writes $OUT/inductor_seed_gpu.json (every VerifyResult, the seed's reason where there is none),
$OUT/candidates/<task>_{seed,template}.py and $OUT/wrappers/ (Inductor's own wrapper source), and
prints a table last. `--budget-s` stops starting new tasks once that much time has gone.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from agent.proposers.heuristic import configs  # noqa: E402
from agent.proposers.heuristic.inductor import Seed, capture  # noqa: E402
from agent.proposers.heuristic.inductor_emit import SeedConfig, emit_candidate, seed_note_default  # noqa: E402
from agent.proposers.heuristic.proposer import _emitter  # noqa: E402
from agent.proposers.heuristic.recognise import recognise  # noqa: E402
from verifier.records import VerifyConfig  # noqa: E402
from verifier.task import load_task  # noqa: E402
from verifier.verify import verify  # noqa: E402


def template_source(path: Path) -> tuple[str | None, str]:
    rec = recognise(path)
    if not rec.supported:
        return None, rec.reason
    [choice] = configs.first_round(rec.problem, True, 1, set())
    return _emitter(rec.family)(rec, choice.config, choice.note), choice.note


def run_one(path: Path, out: Path, config: VerifyConfig) -> dict:
    row: dict = {"task": path.stem, "path": str(path)}
    t0 = time.time()
    seed = capture(path)
    row["capture_s"] = round(time.time() - t0, 1)
    sources = {}
    if isinstance(seed, Seed):
        sources["seed"] = (emit_candidate(seed, SeedConfig()), seed_note_default(seed, SeedConfig()))
        row["seed_kernels"] = seed.kernel_summary()
        for plan in seed.plans:
            (out / "wrappers" / f"{path.stem}_{plan.label}.py").write_text(plan.wrapper)
    else:
        row["seed_unavailable"] = str(seed)
    source, note = template_source(path)
    if source is not None:
        sources["template"] = (source, note)
    else:
        row["template_unavailable"] = note
    task = load_task(path)
    for kind, (src, note) in sources.items():
        (out / "candidates" / f"{path.stem}_{kind}.py").write_text(src)
        result = verify(task, src, config)
        row[kind] = {"note": note, **result.to_dict()}
    return row


def _ms(entry: dict | None, key: str = "timing") -> str:
    if not entry:
        return "-"
    t = entry.get(key)
    return f"{t['median_ms']:.4f}" if isinstance(t, dict) and t.get("median_ms") else "-"


def table(rows: list[dict]) -> str:
    lines = ["| task | seed | template | eager ms | compile ms | compile-max-autotune ms | seed ms | template ms "
             "| seed / compile | template / compile |", "|" + "---|" * 10]
    for row in rows:
        seed, tmpl = row.get("seed"), row.get("template")
        base = (seed or tmpl or {}).get("baselines") or {}

        def b(name):
            t = base.get(name)
            return f"{t['median_ms']:.4f}" if t else "-"

        def vs(entry):
            if not entry or entry.get("status") != "ok":
                return "-"
            s = (entry.get("speedups") or {}).get("compile")
            return f"{s:.2f}x" if s else "-"

        def status(entry, why):
            if entry:
                return entry["status"]
            return "n/a (" + (why or "")[:40] + ")"

        lines.append(f"| {row['task']} | {status(seed, row.get('seed_unavailable'))} "
                     f"| {status(tmpl, row.get('template_unavailable'))} | {b('eager')} | {b('compile')} "
                     f"| {b('compile-max-autotune')} | {_ms(seed)} | {_ms(tmpl)} | {vs(seed)} | {vs(tmpl)} |")
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("tasks", nargs="+", type=Path)
    ap.add_argument("--out", type=Path, default=Path("inductor_seed_gpu"))
    ap.add_argument("--reps", type=int, default=50)
    ap.add_argument("--budget-s", type=float, default=330.0, help="start no new task after this many seconds")
    ap.add_argument("--device", default="cuda", help="cpu: a smoke test of this script under the interpreter")
    args = ap.parse_args()
    for sub in ("candidates", "wrappers"):
        (args.out / sub).mkdir(parents=True, exist_ok=True)
    config = VerifyConfig(device=args.device, reps=args.reps, timeout_s=300, timing="graph")
    rows, start = [], time.time()
    for path in args.tasks:
        if time.time() - start > args.budget_s:
            rows.append({"task": path.stem, "path": str(path), "skipped": "over --budget-s"})
            print(f"{path.stem}: skipped (over the {args.budget_s:.0f} s budget)", flush=True)
            continue
        try:
            row = run_one(path, args.out, config)
        except Exception as exc:   # kgen's own failure on one task: record it, go on with the others
            row = {"task": path.stem, "path": str(path), "error": f"{type(exc).__name__}: {exc}"}
        rows.append(row)
        print(f"{path.stem}: seed {row.get('seed', {}).get('status', row.get('seed_unavailable'))}; "
              f"template {row.get('template', {}).get('status', row.get('template_unavailable'))} "
              f"({time.time() - start:.0f} s)", flush=True)
        (args.out / "inductor_seed_gpu.json").write_text(json.dumps(rows, indent=1, default=str))
    print()
    print(table([r for r in rows if "skipped" not in r and "error" not in r]))
    for r in rows:
        if "error" in r or "skipped" in r:
            print(f"{r['task']}: {r.get('error') or r.get('skipped')}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
