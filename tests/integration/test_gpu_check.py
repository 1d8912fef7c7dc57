"""The GPU check script as far as a CPU machine can check it: it parses, shellcheck passes, its dry run sets up and
reads the one-GPU case, and the case it writes is tiny-grpo on CUDA. Its GPU steps run only on a GPU machine
(docs/gpu-runners.md, "GPU check", says whether they have)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from tests import waits

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "gpu_check.sh"


def test_the_script_parses_and_passes_shellcheck() -> None:
    assert subprocess.run(["bash", "-n", str(SCRIPT)]).returncode == 0
    if shutil.which("shellcheck") is None:
        if os.environ.get("CI") == "true":
            pytest.fail("shellcheck not found (apt-get install shellcheck); CI must lint the GPU check")
        pytest.skip("shellcheck not found (apt-get install shellcheck)")
    done = subprocess.run(["shellcheck", str(SCRIPT)], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout


def test_an_unknown_argument_is_one_line_and_exit_2() -> None:
    done = subprocess.run(["bash", str(SCRIPT), "--nope"], capture_output=True, text=True)
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and "unknown argument '--nope'" in done.stderr


def test_the_dry_run_reads_the_one_gpu_case_and_trains_nothing(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHON": sys.executable, "TMPDIR": str(tmp_path)}
    done = waits.run(["bash", str(SCRIPT), "--dry-run"], capture_output=True, text=True, env=env, limit_s=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "setup ok" in done.stdout
    # on a machine without GPUs the one-GPU case is skipped with its reason; on one with a GPU it would run
    assert "tiny-grpo: SKIP — needs 1 GPUs" in done.stdout or "DRY-RUN" in done.stdout
    case = yaml.safe_load(next(tmp_path.glob("gpu-check.*/case/tiny-grpo.yaml")).read_text())
    assert case["platform"]["gpus"] == 1 and "gpu" in case["markers"]
    assert case["launch"]["env"]["RL_AUTOTEST_WORKLOAD_DEVICE"] == "cuda"
    assert Path(case["baseline"]) == ROOT / "baselines" / "tiny-grpo.yaml"


def test_the_steps_take_an_out_folder_and_nothing_else() -> None:
    done = subprocess.run([sys.executable, str(ROOT / "scripts" / "gpu_check.py"), "out", "--gpu"],
                          capture_output=True, text=True)
    assert done.returncode == 2 and "usage: gpu_check.py OUT_DIR [--cpu]" in done.stderr


def test_the_slot_step_holds_every_gpu_and_a_second_process_waits_for_it(tmp_path: Path, monkeypatch) -> None:
    """The slot step's real lock files and processes, on a node the harness is told has two GPUs (no CUDA needed)."""
    from autotest.run.platform import GPU_COUNT_ENV

    monkeypatch.setenv(GPU_COUNT_ENV, "2")
    monkeypatch.setenv("PYTHONPATH", str(ROOT))
    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        import gpu_check
    finally:
        sys.path.remove(str(ROOT / "scripts"))
    seen = gpu_check.slot(tmp_path)
    assert seen["gpus"] == 2 and seen["held"] == [0, 1] and seen["after_release"] == [0]
    assert "gpu-check holder" in seen["blocked"]
