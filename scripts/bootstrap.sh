#!/usr/bin/env bash
# Set up a fresh machine: a .venv with CPU torch first (a plain `torch` would pull a multi-GB CUDA build),
# then the harness editable.
#   bash scripts/bootstrap.sh         what the main job (`pytest -m grpo` on the embedded default) needs:
#                                     the grpo extra (torch, transformers, pytest, the SQLite history) and nothing else
#   bash scripts/bootstrap.sh --all   the whole test suite: the workloads, consistency, history, tensorboard,
#                                     wandb, mlflow, trl and test extras, then the npm tooling that lints the GitHub workflows
# Safe to re-run; `--all` after the plain one installs only the rest.
set -euo pipefail
cd "$(dirname "$0")/.."

case "${1:-}" in
  "") ALL=0 ;;
  --all) ALL=1 ;;
  *) echo "bootstrap: unknown argument '$1'; use no argument (the GRPO gate) or --all (the test suite)" >&2; exit 2 ;;
esac
PYTHON=${PYTHON:-python3}
PIP=(.venv/bin/python -m pip install --quiet)
[ -x .venv/bin/python ] || "$PYTHON" -m venv .venv
# pip byte-compiles the wheels it installs, never the editable harness itself: without this, every command
# compiles the harness's modules again where PYTHONDONTWRITEBYTECODE is set (0.14 s of a 0.66 s compare)
compile_harness() { env -u PYTHONDONTWRITEBYTECODE .venv/bin/python -m compileall -q autotest >/dev/null; }
if [ "$ALL" = 0 ]; then
  # The gate alone: pip would byte-compile every file of every wheel, most of torch and transformers never
  # imported here; instead the modules the gate imports are compiled once, by importing them (with bytecode
  # writing on even where PYTHONDONTWRITEBYTECODE is set: without a .pyc each run would compile them again).
  # Torch and transformers, the bulk of that compiling, are installed first and compiled on the second core
  # while pip installs the rest; a compile that raced the install is done again after it.
  # Measured on fresh clones (docs/benchmarks.md, "main job on a fresh clone").
  compile_by_import() { env -u PYTHONDONTWRITEBYTECODE .venv/bin/python -c "import $1"; }
  MODEL="torch, transformers.models.qwen3.modeling_qwen3"
  TRANSFORMERS=$(grep -o '"transformers[^"]*"' pyproject.toml | head -n 1 | tr -d '"')
  "${PIP[@]}" --no-compile "torch==2.13.0" "$TRANSFORMERS"
  compile_by_import "$MODEL" >/dev/null 2>&1 &
  compiling=$!
  "${PIP[@]}" --no-compile -e ".[grpo]"
  wait "$compiling" || compile_by_import "$MODEL"
  compile_by_import "numpy, yaml, sqlalchemy, matplotlib.figure, matplotlib.backends.backend_agg, pytest, \
autotest.pipeline, autotest.history.store"
  compile_harness
  exit 0
fi
"${PIP[@]}" "torch==2.13.0"
"${PIP[@]}" --upgrade pip
"${PIP[@]}" -e ".[grpo,workloads,consistency,history,tensorboard,wandb,mlflow,trl,test]"
compile_harness
if command -v npm >/dev/null 2>&1; then
  npm ci --no-audit --no-fund --loglevel=error
else
  echo "bootstrap: npm not found; the workflow lint tests will skip (and fail under CI=true)" >&2
fi
