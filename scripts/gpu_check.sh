#!/usr/bin/env bash
# The GPU check (docs/gpu-runners.md, "GPU check"): the embedded GRPO workload on CUDA end to end through the
# harness (the GPU slot, the GPU contention and memory probes, a clean run, a mismatch fault collected with MSProbe
# and analysed on CUDA). One H100, no network, well under 10 minutes; the steps are in scripts/gpu_check.py.
#
#   bash scripts/gpu_check.sh --wheels    here, with PyPI: the harness as a wheel and the packages the GPU
#                                         machine's image lacks, into .whl/ (git-ignored; about 11 MB)
#   bash scripts/gpu_check.sh             on the GPU machine: install .whl/ --no-deps into a folder of its own
#                                         (its python3 already has torch with CUDA), then run every step
#   bash scripts/gpu_check.sh --cpu       the same flow on this machine's CPU (no slot or GPU probe steps)
#   bash scripts/gpu_check.sh --dry-run   check the setup only (wheels, imports, the case's card); nothing trains
#
# Where the summary goes: $OUT (set on the lent GPU machine; what is written there comes back), else
# results/gpu-check/. PYTHON picks the interpreter (default: python3, or .venv/bin/python with --cpu/--dry-run).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"

MODE=${1:-gpu}
case "$MODE" in
  gpu|--cpu|--dry-run|--wheels) ;;
  *) echo "gpu_check: unknown argument '$MODE'; use --wheels, --cpu, --dry-run or none (the GPU run)" >&2; exit 2 ;;
esac

# the image's python3 lacks these (its package list: /work/.library/device/KINDS.md); versions as this project's
# venv has them. Everything else the harness imports (torch, transformers, numpy, matplotlib, PyYAML, filelock,
# packaging, pandas, einops, tensorboard, tqdm) is in the image.
MISSING=(mindstudio-probe==26.2.0 sqlalchemy==2.1.9 orjson==3.13.0 pytz==2026.6)
PLATFORMS=(--platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64
           --platform manylinux2014_x86_64 --platform manylinux1_x86_64 --platform any)

if [ "$MODE" = --wheels ]; then
  PY=${PYTHON:-.venv/bin/python}
  rm -rf .whl && mkdir .whl
  "$PY" -m pip wheel --quiet --no-deps --no-build-isolation -w .whl .
  "$PY" -m pip download --quiet --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    "${PLATFORMS[@]}" -d .whl "${MISSING[@]}"
  ls -l .whl
  exit 0
fi

if [ "$MODE" = gpu ]; then PY=${PYTHON:-python3}; else PY=${PYTHON:-$ROOT/.venv/bin/python}; fi
SUMMARY=${OUT:-$ROOT/results/gpu-check}
WORK=$(mktemp -d "${TMPDIR:-/tmp}/gpu-check.XXXXXX")
mkdir -p "$SUMMARY"

if [ "$MODE" = gpu ]; then
  # the harness from its wheel, run from outside the checkout (else `python -m` would import the source tree)
  compgen -G ".whl/rl_autotest-*.whl" >/dev/null \
    || { echo "gpu_check: no .whl/rl_autotest-*.whl: run 'bash scripts/gpu_check.sh --wheels' here and carry .whl" >&2; exit 2; }
  "$PY" -m pip install --quiet --no-index --no-deps --no-compile --no-cache-dir --target "$WORK/site" .whl/*.whl
  export PYTHONPATH="$WORK/site"
else
  export PYTHONPATH="$ROOT"  # here: the checkout itself
fi
export PYTHONUNBUFFERED=1 RAY_USAGE_STATS_ENABLED=0
cd "$WORK"
"$PY" - <<'EOF'
import importlib.util, sys
needed = ["autotest", "torch", "transformers", "numpy", "yaml", "sqlalchemy", "orjson", "matplotlib", "filelock",
          "packaging"]
missing = [name for name in needed if importlib.util.find_spec(name) is None]
msprobe = importlib.util.find_spec("msprobe") is not None
import autotest, torch
print(f"gpu_check: harness from {autotest.__file__}; torch {torch.__version__} (CUDA {torch.version.cuda}, "
      f"available: {torch.cuda.is_available()}); msprobe: {'yes' if msprobe else 'MISSING (the fault step fails)'}")
if missing:
    sys.exit(f"gpu_check: cannot import {', '.join(missing)}")
EOF

if [ "$MODE" = --dry-run ]; then
  "$PY" - "$ROOT" "$WORK" <<'EOF'
import sys
from pathlib import Path
sys.path.insert(0, str(Path(sys.argv[1]) / "scripts"))
import gpu_check
print(f"gpu_check: case file {gpu_check.case_file(Path(sys.argv[2]), on_cpu=False)}")
EOF
  # exit 0 with the card where a GPU is, exit 2 with the skip's reason on a CPU machine: both read the case
  card=$("$PY" -m autotest.cli run "$WORK/case/tiny-grpo.yaml" --dry-run --results-dir "$WORK/results" --no-history 2>&1) || true
  printf '%s\n' "$card" | tail -n 12
  case "$card" in
    *"tiny-grpo: DRY-RUN"*|*"tiny-grpo: SKIP — needs 1 GPUs"*) ;;
    *) echo "gpu_check: the one-GPU case did not read (above)" >&2; exit 1 ;;
  esac
  echo "gpu_check: dry run: setup ok; nothing trained (steps: scripts/gpu_check.py)"
  exit 0
fi

status=0
if [ "$MODE" = --cpu ]; then
  "$PY" "$ROOT/scripts/gpu_check.py" "$WORK" --cpu || status=$?
else
  "$PY" "$ROOT/scripts/gpu_check.py" "$WORK" || status=$?
fi
# what comes back from the lent machine: the summary, the logs and the reports (at most 8 files, 2 folders deep)
cp "$WORK"/gpu_check.json "$WORK"/*.log "$SUMMARY"/ 2>/dev/null || true
for side in clean fault; do
  report=$(find "$WORK/$side" -name report.md -print -quit 2>/dev/null || true)
  [ -n "$report" ] && cp "$report" "$SUMMARY/$side-report.md"
done
echo "gpu_check: summary in $SUMMARY (work folder $WORK)"
exit "$status"
