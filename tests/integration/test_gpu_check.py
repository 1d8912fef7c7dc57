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


def _steps():
    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        import gpu_check
    finally:
        sys.path.remove(str(ROOT / "scripts"))
    return gpu_check


def test_the_environment_step_holds_the_harness_gpu_count_to_torchs(monkeypatch) -> None:
    """The slot step holds every GPU the harness counts; that count is held to another reading (the CUDA
    runtime's), or a harness that miscounts would pass the slot step on GPUs the node does not have."""
    from autotest.run.platform import GPU_COUNT_ENV

    gpu_check = _steps()
    torch_gpus = pytest.importorskip("torch").cuda.device_count()
    monkeypatch.setenv(GPU_COUNT_ENV, str(torch_gpus + 2))  # a harness that counts two GPUs too many
    with pytest.raises(AssertionError, match=rf"the harness counts {torch_gpus + 2} GPUs .*torch sees {torch_gpus}"):
        gpu_check.environment(on_cpu=False)
    assert gpu_check.environment(on_cpu=True)["harness_gpus"] == torch_gpus + 2  # --cpu: no GPU step relies on it
    monkeypatch.setenv(GPU_COUNT_ENV, str(torch_gpus))
    assert gpu_check.environment(on_cpu=False)["torch_gpus"] == torch_gpus


FAKE_SMI = """#!/bin/sh
case "$*" in
  *--query-gpu=*) echo "0, GPU-fake, 1980, 1980, 0x0, 40, 1200" ;;
  *--query-compute-apps=*) [ -n "$FAKE_GPU_PID" ] && echo "GPU-fake, $FAKE_GPU_PID, 812" ;;
esac
exit 0
"""


@pytest.mark.parametrize("listed", ["workload", "other", "nothing"])
def test_the_clean_runs_device_is_the_drivers_view_not_the_workloads_word(tmp_path: Path, monkeypatch,
                                                                          listed: str) -> None:
    """A workload whose log says `device: cuda` while it computes elsewhere passed the old check (its own line, an
    echo of the variable the check sets); the step now asks nvidia-smi, polled during the run, for a workload
    process with memory on the GPU. nvidia-smi here is a stand-in listing a real process of this machine."""
    gpu_check = _steps()
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "nvidia-smi").write_text(FAKE_SMI)
    (bin_dir / "nvidia-smi").chmod(0o755)
    folder = tmp_path / "run"
    (folder / "logs").mkdir(parents=True)
    (folder / "logs" / "stdout.log").write_text("[tiny-grpo] exp dir x (fault: none, ray: False, device: cuda)\n")
    assert gpu_check.on_device(folder, "cuda")  # the old evidence, whatever the GPU saw
    marker = ["autotest.workloads.grpo"] if listed == "workload" else ["some.other.program"]
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", *marker])
    try:
        if listed != "nothing":  # nvidia-smi runs in this process's environment
            monkeypatch.setenv("FAKE_GPU_PID", str(proc.pid))
        with gpu_check.GpuWatch({"PATH": f"{bin_dir}:{os.environ['PATH']}"}, interval_s=0.05) as watch:
            waits.until(lambda: watch.polls >= 3, 30)
    finally:
        proc.kill()
        proc.wait()
    if listed == "workload":
        seen = gpu_check.device_evidence(folder, "cuda", watch)
        assert [e["pid"] for e in seen["driver_saw"]] == [proc.pid] and seen["driver_saw"][0]["memory_mib"] == 812
    else:
        with pytest.raises(AssertionError, match="nvidia-smi listed no workload process with memory on the GPU"):
            gpu_check.device_evidence(folder, "cuda", watch)
    assert gpu_check.device_evidence(folder, "cuda", None) == {"workload_says": "cuda"}  # --cpu: the word is all
