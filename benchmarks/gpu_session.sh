#!/usr/bin/env bash
# GPU measurements behind benchmarks/*.md, on a machine with no package index.
# Run from the repository root with the wheels in .whl/ (docs/offline-gpu.md):
#   bash benchmarks/gpu_session.sh STAGE...
# stages: baselines verifier timing profile gputests agent leaderboard handwritten kernelbench, each inside one
# 10-minute call except leaderboard: it is resumable (run the stage again, results/ carried back, and
# finished tasks are skipped; LB_ITERS rounds a task, default 2; TIMING graph|events, default graph;
# LB_SECONDS stops a board as Ctrl-C does; LB_GPUS=0,1 spreads it over GPUs; LB_SUFFIX starts a
# board anew under another name).
# baselines times eager and both torch.compile modes for all 18 tasks (15-40 s a task on an H200) into
# the cache under results/baselines. One GPU per run: on a 2-GPU host, two runs side by side with
# CUDA_VISIBLE_DEVICES=0 and =1 and their own OUT.
# Full logs go to $OUT (default ./gpu-out); a short table is printed last.
set -u
OUT=${OUT:-$PWD/gpu-out}; mkdir -p "$OUT"
# Installed once per machine: two sessions started side by side (one per GPU) share it.
[ -f /tmp/site/.kgen-installed ] || { python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir \
  --upgrade --target /tmp/site .whl/*.whl >/dev/null 2>&1 && touch /tmp/site/.kgen-installed; }
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader | tee "$OUT/gpu.txt"
python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)" | tee -a "$OUT/gpu.txt"
G=tests/verifier/candidates
TIMING=${TIMING:-graph}      # the boards' timing method (graph, kgen's default, or events)

for stage in "$@"; do
case $stage in
verifier)
  python3 benchmarks/verifier_gpu.py --tasks softmax,layernorm,rmsnorm,cross_entropy,pointwise_chain,swiglu \
    --out "$OUT/verifier.json" 2>&1 | tee "$OUT/verifier.log" | tail -30 ;;
timing)
  python3 benchmarks/timing_gpu.py --out "$OUT/timing.json" 2>&1 | tee "$OUT/timing.log" | tail -12 ;;
profile)
  # One log for all pairs (the device returns at most 8 files): each diagnosis, its JSON, and the
  # wall time of `kgen profile` against plain `kgen verify` (baselines cached) for the same pair.
  for pair in "softmax $G/good/softmax.py" "layernorm $G/good/layernorm.py" "matmul $G/good/matmul.py" \
              "softmax $G/cuda/softmax_cupy.py" "transpose $G/good/transpose.py"; do
    set -- $pair
    python3 - "$1" "$2" >> "$OUT/profile.log" 2>&1 <<'P'
import json, subprocess, sys, time
task, kernel = sys.argv[1], sys.argv[2]
def timed(args):
    t0 = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "agent", *args], capture_output=True, text=True)
    return time.perf_counter() - t0, done
verify_s, v = timed(["verify", f"tasks/{task}.py", kernel])
profile_s, p = timed(["profile", f"tasks/{task}.py", kernel])
_, pj = timed(["profile", f"tasks/{task}.py", kernel, "--json"])
print(f"=== {task} {kernel}: profile_wall_s={profile_s:.1f} verify_wall_s={verify_s:.1f}")
print(v.stdout[-1500:]); print(p.stdout[-3000:], p.stderr[-1000:]); print("JSON", pj.stdout.replace("\n", " ")[:6000])
P
    grep "^===" "$OUT/profile.log" | tail -1
  done ;;
baselines)
  python3 - > "$OUT/baselines.log" 2>&1 <<'P'
import time
from pathlib import Path
from verifier.records import VerifyConfig
from verifier.task import load_task
from verifier.verify import cached_baselines
for path in sorted(Path("tasks").glob("*.py")):
    t0 = time.perf_counter()
    try:
        base = cached_baselines(load_task(path), VerifyConfig(device="cuda"))
    except Exception as exc:      # BaselineError says why; the next task still runs
        print(path.stem, f"{time.perf_counter() - t0:.0f}s FAILED", exc, flush=True)
        continue
    print(path.stem, f"{time.perf_counter() - t0:.0f}s", {k: round(v.median_ms, 4) for k, v in base.items()}, flush=True)
P
  tail -20 "$OUT/baselines.log" ;;
leaderboard)
  # Resumable: run the stage again (with results/ carried back) and finished tasks are skipped.
  # LB_SECONDS: stop (as Ctrl-C does, finished tasks kept) after that long, to fit a time-limited call.
  # NOTE: the H200 host does not delegate the pids cgroup controller: every verdict names the missing pids cap
  timeout -s INT "${LB_SECONDS:-86400}" python3 -m agent leaderboard tasks/suite-h200.txt --proposer heuristic \
    --allow-incomplete-isolation --max-iters "${LB_ITERS:-2}" --keep-going --timing "$TIMING" --name "h200-heuristic-$TIMING${LB_SUFFIX:-}" ${LB_GPUS:+--gpus $LB_GPUS} \
    >> "$OUT/leaderboard.log" 2>&1
  cp "results/leaderboards/h200-heuristic-$TIMING${LB_SUFFIX:-}/leaderboard.md" "$OUT/leaderboard_heuristic.md"
  python3 benchmarks/heuristic_report.py results --board "h200-heuristic-$TIMING${LB_SUFFIX:-}" > "$OUT/heuristic_table.md" 2>&1
  tail -30 "$OUT/heuristic_table.md" ;;
handwritten)
  timeout -s INT "${LB_SECONDS:-86400}" python3 -m agent leaderboard tasks --verify-only tests/verifier/candidates/good \
    --allow-incomplete-isolation --timing "$TIMING" --name "h200-handwritten-$TIMING${LB_SUFFIX:-}" >> "$OUT/leaderboard.log" 2>&1
  cp "results/leaderboards/h200-handwritten-$TIMING${LB_SUFFIX:-}/leaderboard.md" "$OUT/leaderboard_handwritten.md"
  tail -30 "$OUT/leaderboard_handwritten.md" ;;
kernelbench)
  # KernelBench's level-1 and level-2 problems at their own sizes, the heuristic proposer, one round each
  # (benchmarks/kernelbench.md). Resumable as leaderboard is; KB=path of a KernelBench copy (default
  # ../shared/kernelbench), KB_LEVELS (default "level1 level2"), KB_PROBLEMS (e.g. 1-20) narrows each level.
  KB=${KB:-../shared/kernelbench}
  for level in ${KB_LEVELS:-level1 level2}; do
    timeout -s INT "${LB_SECONDS:-86400}" python3 -m agent leaderboard "$KB/KernelBench/$level" --proposer heuristic \
      --max-iters 1 --keep-going --allow-incomplete-isolation --timing "$TIMING" --name "h200-kb-$level${LB_SUFFIX:-}" \
      ${KB_PROBLEMS:+--problems $KB_PROBLEMS} >> "$OUT/kernelbench.log" 2>&1
    cp "results/leaderboards/h200-kb-$level${LB_SUFFIX:-}/leaderboard.md" "$OUT/kb_$level.md" 2>/dev/null
    tail -8 "$OUT/kb_$level.md" 2>/dev/null
  done ;;
gputests)
  python3 -m pytest -m gpu -q -p no:cacheprovider -o addopts="" 2>&1 | tee "$OUT/pytest_gpu.log" | tail -25 ;;
agent)
  bash benchmarks/agent_gpu.sh "$OUT" 2>&1 | tee "$OUT/agent.log" | tail -60 ;;
esac
done
# results/ (baseline cache, runs, leaderboards) comes back too: unpack it here and carry it into the next call.
tar czf "$OUT/results.tgz" results 2>/dev/null
