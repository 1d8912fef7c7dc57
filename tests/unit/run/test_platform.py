"""Platform check: skip reasons (GPUs, framework checkout, packages) and GPU detection from recorded
nvidia-smi output; runs of a stand-in nvidia-smi are in tests/integration/run/test_platform.py."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from autotest.errors import UsageError
from autotest.inputs.case import load_case
from autotest.run.platform import (
    check_platform,
    detect_gpus,
    parse_cuda_version,
    parse_nvidia_smi_list,
)
from tests.helpers import DATA

LISTING = """GPU 0: NVIDIA H200 (UUID: GPU-6f0b5c1e-0000-0000-0000-000000000000)
GPU 1: NVIDIA H200 (UUID: GPU-6f0b5c1e-0000-0000-0000-000000000001)
  MIG 1g.18gb     Device  0: (UUID: MIG-0a1b2c3d-0000-0000-0000-000000000000)
GPU 2: NVIDIA H200 (UUID: GPU-6f0b5c1e-0000-0000-0000-000000000002)
"""
BANNER = """+-----------------------------------------------------------------------------------------+
| NVIDIA-SMI 550.54.15              Driver Version: 550.54.15      CUDA Version: 12.4     |
|-----------------------------------------+------------------------+----------------------+
"""


def test_parsers_on_recorded_output() -> None:
    assert parse_nvidia_smi_list(LISTING) == ("NVIDIA H200",) * 3  # the MIG line is not a GPU
    assert parse_nvidia_smi_list("") == ()
    assert parse_cuda_version(BANNER) == "12.4"
    assert parse_cuda_version("no banner") is None


def test_gpu_count_override_and_bad_value() -> None:
    assert detect_gpus({"RL_AUTOTEST_GPU_COUNT": "8"}).count == 8
    with pytest.raises(UsageError) as info:
        detect_gpus({"RL_AUTOTEST_GPU_COUNT": "eight"})
    assert str(info.value) == ("environment: RL_AUTOTEST_GPU_COUNT: 'eight' is not a whole number; "
                               "set it to the number of GPUs or unset it")


def test_nvidia_smi_absent_counts_zero(tmp_path: Path) -> None:
    info = detect_gpus({"PATH": str(tmp_path)})
    assert (info.count, info.source) == (0, "nvidia-smi not found")


def test_gpu_case_skip_reasons(tmp_path: Path) -> None:
    case = load_case("grpo-gsm8k-qwen3-8b-lmdeploy")
    check = check_platform(case, {"RL_AUTOTEST_GPU_COUNT": "0"})
    assert not check.runnable
    assert check.skip_reason == ("needs 8 GPUs, found 0 (RL_AUTOTEST_GPU_COUNT); "
                                 "XTUNER_ROOT is not set (xtuner checkout)")
    check = check_platform(case, {"RL_AUTOTEST_GPU_COUNT": "8"})
    assert check.reasons == ("XTUNER_ROOT is not set (xtuner checkout)",)
    missing = tmp_path / "nowhere"
    check = check_platform(case, {"RL_AUTOTEST_GPU_COUNT": "8", "XTUNER_ROOT": str(missing)})
    assert check.reasons == (f"XTUNER_ROOT={missing} is not a directory (xtuner checkout)",)
    check = check_platform(case, {"RL_AUTOTEST_GPU_COUNT": "8", "XTUNER_ROOT": str(tmp_path)})
    assert check.runnable and check.skip_reason is None
    assert check.framework_dir == str(tmp_path.resolve()) and check.gpus_found == 8
    assert check.to_dict()["skip_reason"] is None


def test_cpu_case_runs_anywhere() -> None:
    check = check_platform(load_case("tiny-grpo"), {"RL_AUTOTEST_GPU_COUNT": "0", "PATH": os.defpath})
    assert check.runnable and check.gpus_needed == 0


def test_missing_python_package(tmp_path: Path) -> None:
    text = (DATA / "bad_cases" / "timeout_zero.yaml").read_text()
    path = tmp_path / "pkgs.yaml"
    path.write_text(text.replace("name: timeout_zero", "name: pkgs").replace("timeout_s: 0", "timeout_s: 5")
                    .replace("framework: null", "framework: null\n  python_packages: [pyyaml, rl-autotest-no-such-dist]"))
    check = check_platform(load_case(path), {})
    assert check.reasons == ("needs Python package rl-autotest-no-such-dist (not installed)",)
    assert check.missing_packages == ("rl-autotest-no-such-dist",)
