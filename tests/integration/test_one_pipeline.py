"""`rl-autotest run`, the pytest plugin and `rl-autotest calibrate` run a case through one pipeline:
the same results-folder layout and the same verdict for the same case and seed."""

from __future__ import annotations

import json
import re
import shutil
import sys
from pathlib import Path

from autotest.inputs.case import REPO_ROOT
from tests import waits

CASE = REPO_ROOT / "tests" / "data" / "cases" / "scripted.yaml"
BASELINE = REPO_ROOT / "tests" / "data" / "baselines" / "scripted.yaml"
CLI = [sys.executable, "-m", "autotest.cli"]


def _layout(results_dir: Path) -> set[str]:
    """Every file of a results folder, with run-specific names (timestamped exp dirs) normalised."""
    return {re.sub(r"\d{14}", "<exp>", str(p.relative_to(results_dir)))
            for p in results_dir.rglob("*") if p.is_file()}


def _verdict(results_dir: Path) -> tuple[str, dict[str, tuple[str, float | None]]]:
    data = json.loads((results_dir / "results.json").read_text())
    checks = {r["check_id"]: (r["status"], None if (r["metric"] or "").startswith(("time/", "memory/")) else r["observed"])
              for r in data["results"]}
    return data["status"], checks


def _only_run(root: Path) -> Path:
    (found,) = [p.parent for p in root.rglob("results.json")]
    return found


def test_run_pytest_and_calibrate_give_the_same_folder_and_verdict(tmp_path, pytester):
    by_cli = tmp_path / "cli"
    done = waits.run([*CLI, "run", str(CASE), "--yes", "--seed", "0", "--results-dir", str(by_cli),
                      "--no-history"], capture_output=True, text=True, limit_s=120)
    assert done.returncode == 0, done.stdout + done.stderr

    by_plugin = tmp_path / "plugin"
    pytester.makepyfile(test_scripted=f"""
        from autotest.inputs.case import load_case

        def test_scripted(run_accuracy_case):
            assert run_accuracy_case(load_case({str(CASE)!r})).status == "PASS"
    """)
    outcome = pytester.runpytest_subprocess("--results-dir", str(by_plugin), "--no-history", "-p", "no:cacheprovider")
    outcome.assert_outcomes(passed=1)

    baselines = tmp_path / "baselines"
    baselines.mkdir()
    shutil.copy(BASELINE, baselines / BASELINE.name)
    by_calibration = tmp_path / "calibration"
    done = waits.run([*CLI, "calibrate", str(CASE), "--runs", "2", "--jobs", "1", "--allow-dirty",
                      "--results-dir", str(by_calibration), "--baselines-dir", str(baselines)],
                     capture_output=True, text=True, limit_s=180)
    assert done.returncode in (0, 1), done.stdout + done.stderr  # 1: candidate written, self-check to review
    calibration_run = sorted(by_calibration.rglob("run1-seed0"))[0]

    folders = [_only_run(by_cli), _only_run(by_plugin), calibration_run]
    layouts = [_layout(f) for f in folders]
    assert {"results.json", "report.md", "card.md", "preflight.json", "tracker.jsonl", "logs/launch.json"} <= layouts[0]
    assert layouts[0] == layouts[1] == layouts[2]
    verdicts = [_verdict(f) for f in folders]
    assert verdicts[0][0] == "PASS"
    assert verdicts[0] == verdicts[1] == verdicts[2]
