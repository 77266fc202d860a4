#!/usr/bin/env bash
# kgen optimize end to end on a GPU against the scripted OpenAI-compatible server, on two tasks.
# Usage: bash benchmarks/agent_gpu.sh OUTDIR   (after benchmarks/gpu_session.sh has set PYTHONPATH)
set -u
OUT=$1; RES=/tmp/kgen-agent-results; rm -rf $RES; mkdir -p $RES
# the baselines this GPU has already timed (eager and both torch.compile modes) are reused, not recompiled
[ -d results/baselines ] && cp -r results/baselines $RES/
export OPENAI_API_KEY=sk-gpu-test-secret-123456
for task in softmax layernorm; do
  python3 - "$task" > /tmp/script_$task.json <<'P'
import json, sys
src = open(f"tests/verifier/candidates/good/{sys.argv[1]}.py").read()
reply = "Here is the kernel.\n\n```python\n" + src + "\n```\n"
print(json.dumps([reply, reply.replace("Here is the kernel.", "Same kernel, checked again.")]))
P
  python3 tests/agent/openai_server.py --script /tmp/script_$task.json --port 8765 > /tmp/server_$task.log 2>&1 &
  SERVER=$!; sleep 2
  export OPENAI_BASE_URL=http://127.0.0.1:8765/v1
  s=$(date +%s)
  python3 -m agent optimize tasks/$task.py --model test-model --max-iters 2 --keep-going --results $RES
  echo "optimize $task exit=$? wall_s=$(( $(date +%s) - s ))"
  kill $SERVER
  R=$(ls -d $RES/$task/*/ | tail -1)
  cp $R/run.json $OUT/agent_${task}_run.json
  for a in $R/attempt-*; do
    python3 -c "import json; d=json.load(open('$a/verify.json')); print('$a', d['status'], d['reason'], d['device'], d['timing'] and round(d['timing']['median_ms'],4), {k: round(v,2) for k,v in d['speedups'].items()}, d['floor_ms'])"
  done
  test -f $R/attempt-002/prompt.md && cp $R/attempt-002/prompt.md $OUT/agent_${task}_prompt2.md
  grep -n -A14 -i "profile\|diagnos" $R/attempt-002/prompt.md | head -30
done
grep -rl sk-gpu-test-secret $RES && echo "KEY LEAK" || echo "no key in results"
python3 - <<'P'
import sqlite3; c = sqlite3.connect("/tmp/kgen-agent-results/kgen.sqlite"); c.row_factory = sqlite3.Row
for r in c.execute("select run_id,status,stop_reason,best_attempt,best_speedup,best_ms,wall_s from runs"): print(dict(r))
P
