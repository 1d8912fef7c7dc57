"""A case in shadow (``shadow: true``) runs for real: its breached gates are recorded as shadow FAILs, the run
passes, the report says what would have failed, and no consistency dump is asked for."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

from autotest.inputs.case import load_case
from autotest.pipeline import LaunchOptions, PublishOptions, RunOptions, run_case
from tests.helpers import DATA


def test_a_case_in_shadow_passes_a_mismatch_breach_and_records_it(tmp_path: Path) -> None:
    case = replace(load_case(DATA / "cases" / "scripted.yaml"), shadow=True)
    run = run_case(case, RunOptions(LaunchOptions(results_root=tmp_path / "results", poll_interval_s=0.2,
                                                  fault="mismatch-from:4"),
                                    publish=PublishOptions(with_plots=False)))
    assert run.status == "PASS", [r.message for r in run.verdict.results]
    data = json.loads((run.results_dir / "results.json").read_text())
    mismatch = [r for r in data["results"] if r.get("metric") == "mismatch/mismatch_k3_kl"]
    assert [(r["status"], r["severity"]) for r in mismatch] == [("FAIL", "shadow")]
    assert run.consistency_request is None and not run.verdict.triage
    assert f"- shadow: {mismatch[0]['check_id']} would have failed (" in (run.results_dir / "report.md").read_text()
