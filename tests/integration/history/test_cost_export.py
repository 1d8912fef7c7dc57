"""Cost beside power end to end: two real verdicts of the scripted case (a real process writing its metric log,
judged by ``rl-autotest run`` and recorded in the history: a PASS and a FAIL), exported as CSV by ``history
export`` and read back with pandas: each run's measured cost and each gate's MDE are there, equal to what the
verdicts' results.json say."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from autotest.inputs.case import REPO_ROOT
from tests import waits

CASE = REPO_ROOT / "tests" / "data" / "cases" / "scripted.yaml"
BASELINE = REPO_ROOT / "tests" / "data" / "baselines" / "scripted.yaml"
CLI = [sys.executable, "-m", "autotest.cli"]
REWARDS = "response/rewards/mean[stepwise]"


def _calibrated_case(folder: Path) -> Path:
    """The scripted case, its rewards gate given the calibration facts an MDE is computed from (5 runs, their
    largest run-to-run deviation), as ``calibrate`` writes them."""
    baseline = yaml.safe_load(BASELINE.read_text())
    baseline["calibration"] = {"runs": 5, "margin": 1.5}
    rewards = next(c for c in baseline["checks"] if c["metric"] == "response/rewards/mean")
    rewards["measured_max_deviation"] = 0.004
    (folder / "golden.yaml").write_text(yaml.safe_dump(baseline, sort_keys=False))
    case = yaml.safe_load(CASE.read_text())
    case["baseline"] = str(folder / "golden.yaml")
    case["launch"]["command"] = [str(REPO_ROOT / a) if a.endswith(".py") else a for a in case["launch"]["command"]]
    (folder / "scripted.yaml").write_text(yaml.safe_dump(case, sort_keys=False))
    return folder / "scripted.yaml"


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return waits.run([*CLI, *args], capture_output=True, text=True, limit_s=180, cwd=cwd)


def test_two_real_verdicts_export_their_cost_and_mde_to_csv(tmp_path) -> None:
    pandas = pytest.importorskip("pandas")
    case = _calibrated_case(tmp_path)
    root = tmp_path / "results"
    lines = {}
    for fault, code in (("", 0), ("mismatch-from:4", 1)):
        done = _cli("run", str(case), "--yes", "--results-dir", str(root), *(["--fault", fault] if fault else []),
                    cwd=tmp_path)
        assert done.returncode == code, done.stdout + done.stderr
        lines[fault] = done.stdout.strip().splitlines()[-1]
    # the console line states the cost beside the MDE (a FAIL claims no MDE, its cost alone)
    metric = REWARDS.split("[")[0]  # the PASS line names the metric, then each MDE with its steps and scope
    assert f"PASS — could have caught: {metric} ±" in lines[""] and " CPU-s (report: " in lines[""]
    assert " over steps 1-10 [stepwise] for " in lines[""]
    assert "FAIL" in lines["mismatch-from:4"] and " — cost " in lines["mismatch-from:4"]

    out = tmp_path / "history.csv"
    done = _cli("history", "export", "--format", "csv", "--out", str(out), "--results-dir", str(root), cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    table = pandas.read_csv(out)
    assert set(table["status"]) == {"PASS", "FAIL"} and table["run_id"].nunique() == 2

    for folder in sorted(p.parent for p in root.rglob("results.json")):
        data = json.loads((folder / "results.json").read_text())
        cost = data["context"]["cost"]
        gate = next(r for r in data["results"] if r["check_id"] == REWARDS)
        rows = table[table["started_at"].notna() & (table["status"] == data["status"])]
        # a real measurement: the run's process tree got CPU time, under its wall time (one thread)
        assert cost["basis"] == "cpu-seconds" and 0 < cost["device_seconds"] < cost["wall_s"]
        assert set(rows["device_seconds"]) == {cost["device_seconds"]} and set(rows["cost_basis"]) == {"cpu-seconds"}
        (mde,) = rows.loc[rows["check_id"] == REWARDS, "mde"]
        assert gate["mde"] is not None and mde == pytest.approx(gate["mde"])
        # the MDE is the calibration's: threshold + z x sigma x sqrt(1 + 1/5), above the threshold itself
        assert gate["mde"] > gate["threshold"]
