"""The consistency dump job end to end on the embedded GRPO workload: real re-runs, real MSProbe dumps."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from autotest.consistency.job import REQUEST_FILE, run_consistency_job
from autotest.workloads.faults import catalogue
from tests import waits

ROOT = Path(__file__).resolve().parents[3]
EXPECTED = {f["name"]: f["expected"] for f in catalogue()}


def accuracy_results(tmp_path: Path, fault: str, window: int = 2, case_file: Path | None = None) -> Path:
    """A results folder as an accuracy run leaves it: tracker, saved config, results.json, request."""
    results = tmp_path / "results"
    work = results / "work"
    waits.run([sys.executable, "-m", "autotest.workloads.grpo", "--work-dir", str(work), "--seed", "0",
               "--steps", str(window + 1), "--fault", fault], check=True, capture_output=True, limit_s=300)
    exp = next(work.iterdir())
    (results / "run_config" / "exp_dir").mkdir(parents=True)
    (results / "run_config" / "exp_dir" / "config.json").write_bytes((exp / "config.json").read_bytes())
    (results / "tracker.jsonl").write_bytes((exp / "logs" / "exp_tracking" / "tracker.jsonl").read_bytes())
    (results / "results.json").write_text(json.dumps({"context": {"seed": 0, "fault": fault}}))
    (results / "report.md").write_text("# tiny-grpo: FAIL\n")
    request = {"case": "tiny-grpo", "case_file": str(case_file or ROOT / "autotest/cases/tiny-grpo.yaml"),
               "breaches": [{"metric": "mismatch/mismatch_k3_kl", "first_breach_step": window}],
               "tracker": str(results / "tracker.jsonl"), "results_dir": str(results)}
    (results / REQUEST_FILE).write_text(json.dumps(request))
    return results


@pytest.mark.slow
@pytest.mark.parametrize("fault", ["unsynced-layer", "perturbed-sync", "rollout-impl"])
def test_fault_is_localised_to_its_module(tmp_path, fault):
    expected = EXPECTED[fault]["consistency"]
    results = accuracy_results(tmp_path, fault)
    outcome = run_consistency_job(results)
    assert outcome.executed and outcome.verdict == "root_cause_found", outcome.summary
    report = json.loads(outcome.report_json.read_text())
    cause = report["root_cause"]
    assert cause["bucket"] == expected["bucket"]
    assert cause["module"].startswith(expected["module"]) or cause["localisation"].startswith(expected["module"])
    assert report["context"]["tasks"] == ["tensor"] and cause["evidence"] == "tensor"
    # the rollout's sampler reports what its own model computes: the divergence is a module's, not sampling's
    sampling, model, _ = report["logprob_comparison"]["pairs"]
    assert report["divergence"] == "module" and sampling["status"] == "agrees" and model["status"] == "diverges"
    for name in ("output_1_key_mapping", "output_2_mapping", "output_3_value_compare", "output_4_module_analysis"):
        assert (outcome.out_dir / f"{name}.json").exists() and (outcome.out_dir / f"{name}.csv").exists()
    wrapper = (outcome.out_dir / "tensor" / "diagnostic_wrapper.sh").read_text()
    assert f"--fault {fault}" in wrapper and "--diagnostic-config" in wrapper
    assert "Consistency dump job" in (results / "report.md").read_text()


def test_cli_consistency_on_a_folder_without_request(tmp_path):
    result = waits.run([sys.executable, "-m", "autotest.cli", "consistency", str(tmp_path)],
                       capture_output=True, text=True, limit_s=120)
    assert result.returncode == 2 and result.stderr.count("\n") == 1 and "no consistency request here" in result.stderr
