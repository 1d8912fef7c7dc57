"""The GPU workflows leave the node's environment alone: no harness venv on PATH, no machine-wide
`ray stop --force`, the framework's Python named; calibration uploads its per-run trackers and opens its
pull request with a token that triggers CI when one is set."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
GPU_WORKFLOWS = ("accuracy-gate.yml", "nightly.yml", "calibration.yml", "framework-accuracy.yml")


def _runs(name: str) -> list[str]:
    data = yaml.safe_load((ROOT / ".github" / "workflows" / name).read_text())
    return [step.get("run", "") for job in data["jobs"].values() for step in job.get("steps", [])]


@pytest.mark.parametrize("name", GPU_WORKFLOWS)
def test_no_venv_on_path_and_no_machine_wide_ray_stop(name: str) -> None:
    text = (ROOT / ".github" / "workflows" / name).read_text()
    for run in _runs(name):
        assert "GITHUB_PATH" not in run, run
        assert "ray stop" not in run, run
    assert "FRAMEWORK_PYTHON: ${{ vars.GPU_PYTHON || 'python3' }}" in text


def test_calibration_uploads_the_provenance_trackers_and_documents_its_token() -> None:
    data = yaml.safe_load((ROOT / ".github" / "workflows" / "calibration.yml").read_text())
    steps = data["jobs"]["calibrate"]["steps"]
    keep = next(s for s in steps if s.get("name", "").startswith("Keep the per-run trackers"))
    assert 'provenance.get("trackers")' in keep["run"]
    upload = next(s for s in steps if s.get("with", {}).get("name") == "calibration-${{ inputs.case }}-trackers")
    assert upload["if"] == "always()" and upload["with"]["path"] == "${{ runner.temp }}/trackers"
    opened = next(s for s in data["jobs"]["pull-request"]["steps"] if "gh pr create" in s.get("run", ""))
    assert opened["env"]["GH_TOKEN"] == "${{ secrets.CALIBRATION_PR_TOKEN || secrets.GITHUB_TOKEN }}"
    env = data["jobs"]["calibrate"]["env"]
    assert env["RL_AUTOTEST_SLOTS_DIR"].startswith("${{ vars.GPU_SLOTS_DIR")
