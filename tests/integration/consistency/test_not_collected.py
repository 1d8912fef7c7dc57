"""A breach on xtuner, whose 8-GPU case cannot run here: the job ends "not collected", exit 3, with the steps.

The results folder is made on one "runner" and the job runs on a copy of it somewhere else, as the
nightly's consistency job does from the uploaded artifact: the request's relative paths must hold.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

from autotest.consistency.job import REQUEST_FILE
from tests.helpers import ROOT, write_tracker
from tests import waits

CASE_FILE = "autotest/cases/grpo-gsm8k-qwen3-8b-lmdeploy.yaml"


def _results(folder: Path) -> Path:
    summary = {s: {"mismatch/mismatch_k3_kl": 2e-5 if s < 3 else 5e-3, "response/rewards/mean": 0.5}
               for s in range(1, 6)}
    write_tracker(folder / "tracker.jsonl", summary)
    (folder / "run_config" / "work_dir").mkdir(parents=True)
    (folder / "run_config" / "work_dir" / "config.py").write_text("recompute_logprobs = True\n")
    (folder / "work").mkdir()
    (folder / "results.json").write_text(json.dumps({"context": {"seed": 0, "fault": None}}))
    (folder / "report.md").write_text("# grpo-gsm8k-qwen3-8b-lmdeploy: FAIL\n")
    request = {"schema_version": 2, "case": "grpo-gsm8k-qwen3-8b-lmdeploy", "case_file": CASE_FILE,
               "breaches": [{"metric": "mismatch/mismatch_k3_kl", "first_breach_step": 3}],
               "results_dir": ".", "work_dir": "work", "tracker": "tracker.jsonl", "run_config": "run_config"}
    (folder / REQUEST_FILE).write_text(json.dumps(request))
    return folder


def test_not_runnable_here_is_not_collected_with_the_manual_steps(tmp_path: Path) -> None:
    made = _results(tmp_path / "runner-a" / "results")
    moved = tmp_path / "runner-b" / "downloaded"
    shutil.copytree(made, moved)
    shutil.rmtree(made)  # nothing of the first runner's paths is left to lean on
    env = {**os.environ, "PYTHONPATH": str(ROOT), "RL_AUTOTEST_GPU_COUNT": "0", "XTUNER_ROOT": str(tmp_path),
           "CI_SHARE_MODEL": "/share/m", "CI_SHARE_DATA": "/share/d", "FRAMEWORK_PYTHON": sys.executable}
    done = waits.run([sys.executable, "-m", "autotest.cli", "consistency", str(moved)], env=env, check=False,
                     capture_output=True, text=True, limit_s=120)
    assert done.returncode == 3, done.stdout + done.stderr
    assert "consistency: not collected: the case cannot run here: needs 8 GPUs" in done.stdout
    manual = (moved / "consistency" / "how_to_collect.md").read_text()
    assert "RL_AUTOTEST_COLLECT=" in manual and "PYTHONPATH=" in manual
    assert "bash consistency/statistics/diagnostic_wrapper.sh" in manual
    assert "rl-autotest consistency analyze --train-dump consistency/statistics/" in manual
    assert str(tmp_path) not in manual  # relative to the results folder: readable on any runner
    assert (moved / "consistency" / "statistics" / "diagnostic_wrapper.sh").is_file()
    assert "not collected" in (moved / "report.md").read_text()
    report = json.loads((moved / "consistency" / "output_5_root_cause_report.json").read_text())
    assert report["context"]["screening"]["window_values"]  # screened from the moved tracker
