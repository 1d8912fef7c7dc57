#!/usr/bin/env bash
# Set up a fresh machine: a .venv with CPU torch first (a plain `torch` would pull a multi-GB
# CUDA build), then the harness with its workloads, consistency, history, tensorboard, trl and test
# extras, then the npm tooling that lints the GitHub workflows. Safe to re-run.
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$PYTHON" -m venv .venv
.venv/bin/python -m pip install --quiet --upgrade pip
.venv/bin/python -m pip install --quiet "torch==2.13.0"
.venv/bin/python -m pip install --quiet -e ".[workloads,consistency,history,tensorboard,trl,test]"
if command -v npm >/dev/null 2>&1; then
  npm ci --no-audit --no-fund --loglevel=error
else
  echo "bootstrap: npm not found; the workflow lint tests will skip (and fail under CI=true)" >&2
fi
