"""platform.requires is checked in the framework's own Python (a real venv), never the harness's."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from autotest.inputs.case import load_case
from autotest.run.preflight import framework_environment, run_preflight


@pytest.fixture
def node_python(tmp_path: Path) -> Path:
    venv = tmp_path / "node-python"
    subprocess.run([getattr(sys, "_base_executable", sys.executable), "-m", "venv", "--without-pip", str(venv)],
                   check=True)
    return venv


def _lmdeploy(venv: Path, version: str) -> None:
    (site,) = venv.glob("lib/python*/site-packages")
    info = site / f"lmdeploy-{version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: lmdeploy\nVersion: {version}\n")


def _problems(venv: Path) -> list[str]:
    case = load_case("grpo-gsm8k-qwen3-8b-lmdeploy")
    env = {"PATH": "/usr/bin:/bin", "FRAMEWORK_PYTHON": str(venv / "bin" / "python"), "RL_AUTOTEST_GPU_COUNT": "0"}
    return run_preflight(case, environ=env).requirement_problems(case)


def test_the_nodes_version_is_recorded_and_satisfies_the_case(node_python):
    _lmdeploy(node_python, "0.10.2")
    case = load_case("grpo-gsm8k-qwen3-8b-lmdeploy")
    found = framework_environment(case, {"PATH": "/usr/bin:/bin", "FRAMEWORK_PYTHON": str(node_python / "bin" / "python")})
    assert found["python"] == str(node_python / "bin" / "python") and found["packages"]["lmdeploy"] == "0.10.2"
    assert found["packages"]["torch"] is None  # the node's packages, not the harness venv's
    assert _problems(node_python) == []


@pytest.mark.parametrize("version, expected", [
    (None, "lmdeploy is not installed in the framework's python"),
    ("0.8.0", "has lmdeploy 0.8.0, the case needs >=0.9"),
])
def test_a_missing_or_old_lmdeploy_is_one_error_line(node_python, version, expected):
    if version:
        _lmdeploy(node_python, version)
    (problem,) = _problems(node_python)
    assert "\n" not in problem and "grpo-gsm8k-qwen3-8b-lmdeploy.yaml: platform.requires.lmdeploy: " in problem
    assert expected in problem, problem
