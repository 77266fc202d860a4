#!/usr/bin/env bash
# Set up kgen in .venv on a machine without a GPU: PyTorch's CPU build (about 200 MB,
# not the multi-GB CUDA build), Triton for its CPU interpreter, kgen itself, its test tools and Ray.
# Usage: scripts/setup-cpu.sh            (idempotent: a second run only checks)
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$PY" -m venv .venv
. .venv/bin/activate
python -m pip install -q --upgrade pip >/dev/null
# The CPU build comes from PyTorch's own index; where a local wheel store already
# holds torch 2.13.0 (pip's find-links), pip takes it from there.
if ! python -c "import torch" 2>/dev/null; then
  if pip download -q --no-deps -d /tmp/kgen-probe "torch==2.13.0" --no-index 2>/dev/null; then
    pip install -q "torch==2.13.0"
  else
    pip install -q "torch==2.13.0" --index-url https://download.pytorch.org/whl/cpu
  fi
fi
# NOTE: Triton 3.6's interpreter converts 1-element arrays with int(), which NumPy 2.4 refuses
# ("only 0-dimensional arrays can be converted"): keep NumPy below 2.4 where the interpreter runs.
# Triton 3.6.0 matches the GPU machine kgen is measured on, so the CPU interpreter checks
# kernels with the same front end that compiles them there.
# Ray (the `ray` extra) so that the Ray executor's tests run on a small local cluster in CI too.
pip install -q -e ".[test,ray]" "numpy>=1.26,<2.4" "triton==3.6.0"
echo "kgen is set up in .venv (torch $(python -c 'import torch; print(torch.__version__)'), CPU only)."
