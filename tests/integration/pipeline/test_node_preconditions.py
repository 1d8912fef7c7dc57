"""A case's node preconditions in the pipeline: unmet, the run is one ERROR and never launches (a dry run lists
them too); met, the run goes on as before."""

from __future__ import annotations

import json
from dataclasses import replace

from autotest.inputs.case import load_case
from autotest.inputs.case_node import NodeRequirements
from autotest.pipeline import DRY_RUN, run_case
from tests.integration.test_pipeline import CASE, options


def test_an_unmet_node_is_one_error_line_before_launch_and_a_met_one_runs(tmp_path):
    case = load_case(CASE)
    unmet = replace(case, node=NodeRequirements(executables=("rlat-no-such-command", "bash")))
    run = run_case(unmet, options(tmp_path))
    assert run.status == "ERROR"
    expected = (f"{case.source}: node: 1 precondition of the launch script unmet, nothing launched: "
                "(1) `rlat-no-such-command`: not on the run's PATH, and the script calls it bare")
    assert run.reason.startswith(expected), run.reason  # what the terminal shows, as for any preflight problem
    assert not (run.results_dir / "logs" / "launch.json").exists()  # never launched
    results = json.loads((run.results_dir / "results.json").read_text())
    ((check_id, status, message),) = [(r["check_id"], r["status"], r["message"]) for r in results["results"]]
    assert (check_id, status) == ("preflight", "ERROR") and message.startswith(expected), message
    assert expected in (run.results_dir / "report.md").read_text()
    assert "node, checked before launch: `rlat-no-such-command`, `bash` from the framework's Python on PATH" \
        in (run.results_dir / "card.md").read_text()

    shown = run_case(unmet, options(tmp_path, dry_run=True))
    assert shown.status == DRY_RUN and any(p.startswith(expected) for p in shown.problems)

    met = run_case(replace(case, node=NodeRequirements(executables=("bash",))), options(tmp_path))
    assert met.status == "PASS", [r.message for r in met.verdict.results]
