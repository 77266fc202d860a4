"""Where the gap between the verifier's event time and ncu's kernel time comes from.

    python3 benchmarks/timing_gpu.py --out $OUT/timing.json

For known-good candidates and their eager reference, in one plain process (no
sandbox), the same call timed four ways:

- harness: `verifier.timing.time_callable`, as the verifier times (GPU idle
  when the start event is recorded, so the host's cost of the call is inside);
- harness after profiler: the same, after a torch.profiler session like the
  one the verifier's launch counter opens during the correctness trials;
- busy GPU: a spin kernel keeps the GPU busy while the host issues the call,
  so the events hold the device's time alone;
- graph: the call captured once in a CUDA graph and replayed on an idle GPU
  (the host's part shrinks to one graph launch);
- do_bench: `triton.testing.do_bench`, median.

and the host's time to issue one call while the GPU is busy. If "harness"
minus "busy GPU" matches the host time, the gap to ncu is the launch path;
if "after profiler" is slower, the profiler session left overhead behind.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import statistics
import sys
import time
from pathlib import Path

import torch
import triton.testing

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from verifier import timing  # noqa: E402
from verifier.task import import_task_module  # noqa: E402

GOOD = ROOT / "tests" / "verifier" / "candidates" / "good"


def busy_gpu_ms(fn, reps: int, flush: torch.Tensor, spin_cycles: int) -> tuple[float, float]:
    """Median event time with the GPU kept busy while the host issues fn, and the host's median issue time."""
    times, host = [], []
    for _ in range(reps):
        flush.zero_()
        torch.cuda.synchronize()
        torch.cuda._sleep(spin_cycles)
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        h0 = time.perf_counter()
        fn()
        host.append((time.perf_counter() - h0) * 1e3)
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times), statistics.median(host)


def graph_ms(fn, reps: int, flush: torch.Tensor) -> float | None:
    """Median time of fn replayed from a CUDA graph, as `kgen verify --timing graph` times it."""
    t, _, note = timing.time_call(fn, method="graph", reps=reps, flush=flush)
    if note:
        print(note, flush=True)
        return None
    return t.median_ms


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="timing_gpu.json")
    ap.add_argument("--tasks", default="softmax,layernorm,rmsnorm")
    ap.add_argument("--reps", type=int, default=100)
    args = ap.parse_args()
    flush = timing.l2_flush_buffer()
    rows = []
    for name in args.tasks.split(","):
        task = import_task_module(str(ROOT / "tasks" / f"{name}.py"), f"task_{name}")
        spec = importlib.util.spec_from_file_location(f"cand_{name}", GOOD / f"{name}.py")
        cand = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(cand)
        torch.manual_seed(0)
        init = task.get_init_inputs()
        ref, new = task.Model(*init).cuda(), cand.ModelNew(*init).cuda()
        new.load_state_dict(ref.state_dict(), strict=False)
        with torch.device("cuda"):
            xs = [x.cuda() if isinstance(x, torch.Tensor) else x for x in task.get_inputs()]
        with torch.no_grad():
            for label, model in (("candidate", new), ("eager", ref)):
                fn = lambda: model(*xs)  # noqa: E731
                harness = timing.time_callable(fn, reps=args.reps, warmup=10, flush=flush)
                busy, host = busy_gpu_ms(fn, args.reps, flush, spin_cycles=20_000_000)
                bench = triton.testing.do_bench(fn, return_mode="median")
                replay = graph_ms(fn, args.reps, flush)
                row = {"task": name, "what": label, "harness_ms": harness.median_ms, "harness_host_ms": harness.host_ms,
                       "busy_gpu_ms": busy, "host_issue_ms": host, "graph_ms": replay, "do_bench_ms": bench}
                rows.append(row)
                print(json.dumps(row), flush=True)
    # Once a profiler session has run in this process, as in the verifier's correctness trials:
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]):
        with torch.no_grad():
            new(*xs)
    torch.cuda.synchronize()
    with torch.no_grad():
        after = timing.time_callable(lambda: new(*xs), reps=args.reps, warmup=10, flush=flush)
    rows.append({"task": name, "what": "candidate after a profiler session", "harness_ms": after.median_ms,
                 "harness_host_ms": after.host_ms})
    Path(args.out).write_text(json.dumps(rows, indent=2))
    print("\n| task | what | harness ms | host in harness ms | busy-GPU ms | host issue ms | graph ms | do_bench ms |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        f = lambda k: f"{r[k]:.4f}" if r.get(k) is not None else "-"  # noqa: E731
        print(f"| {r['task']} | {r['what']} | {f('harness_ms')} | {f('harness_host_ms')} | {f('busy_gpu_ms')} | "
              f"{f('host_issue_ms')} | {f('graph_ms')} | {f('do_bench_ms')} |")


if __name__ == "__main__":
    main()
