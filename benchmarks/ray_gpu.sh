#!/usr/bin/env bash
# Tasks per hour on one H200: a board through `--executor ray` (a one-node Ray cluster, one GPU actor,
# --loops-per-gpu loops sharing it) against the local executor (one task at a time on the GPU), on the
# same KernelBench problems, with the same call (heuristic proposer, same rounds). Each board starts cold:
# its own results folder (baseline cache) and its own torch.compile cache.
#
# Usage: bash benchmarks/ray_gpu.sh OUTDIR KB_DIR PROBLEM...        (from the checkout's root)
#   KB_DIR: a folder holding the problems (the GPU machine has the checkout only: copy them into the tree)
#   e.g.  mkdir -p kb && cp /work/shared/kernelbench/KernelBench/level1/{20_LeakyReLU,22_Tanh,25_Swish,27_SELU_,\
#         28_HardSigmoid,29_Softplus,30_Softsign,31_ELU}.py kb/
#         bash benchmarks/ray_gpu.sh /tmp/out kb 20_LeakyReLU.py 22_Tanh.py 25_Swish.py 27_SELU_.py \
#              28_HardSigmoid.py 29_Softplus.py 30_Softsign.py 31_ELU.py
#   Settings: ROUNDS (default 3, --max-iters), LOOPS (default 2, --loops-per-gpu), RAY_PORT (default 6390),
#   BOARD_SECONDS (default none: each board stops there as Ctrl-C stops it, its finished tasks kept, and
#   tasks per hour counts the finished tasks only).
#
# Ray on a GPU machine with no package index. The wheel is about 79 MB and a call carries at most 64 MiB,
# so Ray travels repacked, as .ray/ray-site.tar.xz (an ignored path, carried), and this script unpacks it
# into /tmp/ray-site when `import ray` fails. To make it, on a machine with an index, from the checkout:
#   python3 -m pip download --only-binary=:all: --python-version 3.12 --implementation cp \
#     --platform manylinux2014_x86_64 --platform manylinux_2_28_x86_64 -d .whl-ray "ray==2.60.0"
#   # the GPU image has the rest (its package list): keep Ray and the four it lacks
#   cd .whl-ray && ls | grep -v -E '^(ray|jsonschema|jsonschema_specifications|referencing|rpds_py)-' | xargs rm -f; cd ..
#   # unpacked keeping each file's mode (`python3 -m zipfile -e` drops the executable bits of gcs_server,
#   # raylet and the like, and `ray start` then fails with "Permission denied")
#   mkdir -p .ray-site && python3 -c 'import glob, os, zipfile
#   for w in glob.glob(".whl-ray/*.whl"):
#       z = zipfile.ZipFile(w)
#       for i in z.infolist():
#           p = z.extract(i, ".ray-site"); m = i.external_attr >> 16
#           if m & 0o111: os.chmod(p, m & 0o7777)'
#   # the libraries on top of Ray's core, which a board does not use (Java jars, RLlib, Data, Tune, Train, Serve)
#   rm -rf .ray-site/ray/{jars,rllib,data,tune,train,serve,llm}; find .ray-site -name __pycache__ -prune -exec rm -rf {} +
#   mkdir -p .ray && tar -C .ray-site -cf - . | xz -T0 -6 > .ray/ray-site.tar.xz    # check: ls -l .ray (< 60 MB)
# (measured on Ray 2.60.0's cp311 build, so pruned: 240 MB unpacked, 29.7 MB as xz -6; its few pure-Python and
# small binary dependencies add a few MB)
# then carry ".ray" with the call. Without it the script runs only the local board and says so. The CPU
# cluster tests run there the same way: python3 -m pytest tests/agent/test_board_ray.py -q
set -u
OUT=$1; KB=$2; shift 2
[ $# -ge 1 ] || { echo "usage: bash benchmarks/ray_gpu.sh OUTDIR KB_DIR PROBLEM..."; exit 2; }
ROUNDS=${ROUNDS:-3}; LOOPS=${LOOPS:-2}; RAY_PORT=${RAY_PORT:-6390}
mkdir -p "$OUT"; OUT=$(cd "$OUT" && pwd)
export PYTHONPATH=${PYTHONPATH:-}:$PWD
unset OPENAI_API_KEY OPENAI_BASE_URL       # the heuristic proposer: no endpoint, nothing to leak

if ! python3 -c "import ray" 2>/dev/null && [ -f .ray/ray-site.tar.xz ]; then
  mkdir -p /tmp/ray-site && tar -xJf .ray/ray-site.tar.xz -C /tmp/ray-site
  export PYTHONPATH=/tmp/ray-site:$PYTHONPATH
fi
HAVE_RAY=0; python3 -c "import ray; print('ray', ray.__version__)" && HAVE_RAY=1

SUITE=$OUT/suite.txt; : > "$SUITE"
for p in "$@"; do
  [ -f "$KB/$p" ] || { echo "no problem file $KB/$p"; exit 2; }
  echo "$(cd "$(dirname "$KB/$p")" && pwd)/$(basename "$p")" >> "$SUITE"
done
N=$(wc -l < "$SUITE")
nvidia-smi --query-gpu=name,memory.used,memory.total --format=csv,noheader | tee "$OUT/gpu.txt"

board() {   # board NAME EXTRA-FLAGS...: one board, cold; prints its wall seconds and tasks per hour
  local name=$1; shift
  local res=/tmp/kgen-raybench-$name; rm -rf "$res" "/tmp/inductor-$name"
  local s=$(date +%s.%N)
  TORCHINDUCTOR_CACHE_DIR=/tmp/inductor-$name timeout -s INT "${BOARD_SECONDS:-864000}" \
    python3 -m agent leaderboard "$SUITE" --name "$name" \
    --results "$res" --proposer heuristic --max-iters "$ROUNDS" "$@" > "$OUT/$name.out" 2> "$OUT/$name.err"
  local code=$?
  local wall=$(python3 -c "import time; print(f'{time.time() - $s:.1f}')")
  cp "$res/leaderboards/$name/leaderboard.md" "$OUT/$name.md" 2>/dev/null
  cp "$res/leaderboards/$name/leaderboard.json" "$OUT/$name.json" 2>/dev/null
  # finished: a row whose task ended (succeeded or failed), not pending, interrupted or running
  local done=$(python3 -c "
import json, sys
rows = json.load(open(sys.argv[1])).get('rows', [])
print(sum(r.get('status') in ('succeeded', 'failed') for r in rows))" "$OUT/$name.json" 2>/dev/null || echo 0)
  python3 -c "print(f'$name: exit $code, $done of $N tasks finished in $wall s: {$done * 3600 / $wall:.1f} tasks/hour')" \
    | tee -a "$OUT/summary.txt"
}

: > "$OUT/summary.txt"
if [ $HAVE_RAY = 1 ]; then
  # NOTE: the cluster starts without the key (there is none here anyway), as docs/distributed.md says
  env -u OPENAI_API_KEY python3 -m ray.scripts.scripts start --head --port "$RAY_PORT" --num-gpus 1 \
    --include-dashboard=false > "$OUT/ray_start.log" 2>&1 || { tail -5 "$OUT/ray_start.log"; HAVE_RAY=2; }
fi
if [ $HAVE_RAY = 1 ]; then
  board ray-$LOOPS --executor ray --ray-address "127.0.0.1:$RAY_PORT" --loops-per-gpu "$LOOPS"
  python3 -m ray.scripts.scripts stop > /dev/null 2>&1
elif [ $HAVE_RAY = 2 ]; then
  echo "ray: \`ray start --head\` failed (ray_start.log): the Ray board was not run" | tee -a "$OUT/summary.txt"
else
  echo "ray: not importable here and no .ray/ray-site.tar.xz carried: the Ray board was not run" \
    | tee -a "$OUT/summary.txt"
fi
board local --executor local --allow-incomplete-isolation   # the H200 host delegates no pids controller
echo "rows (task, status, vs eager, attempts, where):"
for f in "$OUT"/*.md; do
  echo "== $f"; sed -n '/^## Tasks/,$p' "$f" | grep '^| ' | grep -v '^| task ' | cut -d'|' -f2,3,4,7,11
done
cat "$OUT/summary.txt"
