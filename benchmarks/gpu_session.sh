#!/usr/bin/env bash
# GPU measurements behind benchmarks/*.md, on a machine with no package index.
# Run from the repository root with the wheels in .whl/ (docs/offline-gpu.md):
#   bash benchmarks/gpu_session.sh STAGE...      stages: verifier profile gputests agent
# Full logs go to $OUT (default ./gpu-out); a short table is printed last.
set -u
OUT=${OUT:-$PWD/gpu-out}; mkdir -p "$OUT"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl >/dev/null 2>&1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader | tee "$OUT/gpu.txt"
python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)" | tee -a "$OUT/gpu.txt"
G=tests/verifier/candidates

for stage in "$@"; do
case $stage in
verifier)
  python3 benchmarks/verifier_gpu.py --tasks softmax,layernorm,rmsnorm,cross_entropy,pointwise_chain,swiglu \
    --out "$OUT/verifier.json" 2>&1 | tee "$OUT/verifier.log" | tail -30 ;;
profile)
  for pair in "softmax $G/good/softmax.py" "layernorm $G/good/layernorm.py" "matmul $G/good/matmul.py" \
              "softmax $G/cuda/softmax_cupy.py" "transpose $G/good/transpose.py"; do
    set -- $pair; name=$1_$(basename $2 .py)
    s=$(date +%s.%N)
    python3 -m agent profile tasks/$1.py $2 > "$OUT/profile_$name.txt" 2>&1
    e=$(date +%s.%N)
    python3 -m agent profile tasks/$1.py $2 --json > "$OUT/profile_$name.json" 2>/dev/null
    s2=$(date +%s.%N)
    python3 -m agent verify tasks/$1.py $2 > "$OUT/verify_$name.txt" 2>&1
    e2=$(date +%s.%N)
    echo "PROFILE $name profile_wall_s=$(echo "$e - $s" | bc) verify_wall_s=$(echo "$e2 - $s2" | bc)" | tee -a "$OUT/profile_walls.txt"
    head -30 "$OUT/profile_$name.txt"
  done ;;
gputests)
  python3 -m pytest -m gpu -q -p no:cacheprovider -o addopts="" 2>&1 | tee "$OUT/pytest_gpu.log" | tail -25 ;;
agent)
  bash benchmarks/agent_gpu.sh "$OUT" 2>&1 | tee "$OUT/agent.log" | tail -60 ;;
esac
done
