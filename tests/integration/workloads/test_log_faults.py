"""The faults that change the log or the run's length, never a trained step (autotest.workloads.log_faults), run for
real: the next-step line names the cause with its numbers, and report.md shows what was measured for it."""

from __future__ import annotations

import pytest

from autotest.inputs.case import load_case
from autotest.pipeline import LaunchOptions, PublishOptions, RunOptions, run_case


def _run(tmp_path, fault: str):
    run = run_case(load_case("tiny-grpo"), RunOptions(LaunchOptions(results_root=tmp_path, fault=fault,
                                                                    poll_interval_s=1),
                                                      publish=PublishOptions(with_plots=False)))
    return run, run.verdict, (run.results_dir / "report.md").read_text()


@pytest.mark.slow
def test_a_length_logged_twice_is_named_logging_with_its_factor(tmp_path):
    run, verdict, report = _run(tmp_path, "log-scale")
    primary = verdict.triage[0]
    assert primary.rule == "logging-units" and not primary.uncertain_with, verdict.triage
    assert primary.suggestion.startswith("logging / units: response/response_len/mean is 2 x golden at every step "
                                         "while nothing else moved (every other gated metric within its per-step noise "
                                         "against the golden at every step")
    assert "first-step" not in [f.rule for f in verdict.triage][:1]
    assert "| logging/units |" in report
    assert "divided by 2 it stays within its per-step noise at every step and passes" in report
    assert run.consistency_request is None


@pytest.mark.slow
def test_a_loop_one_step_short_is_a_changed_shape_not_a_crash(tmp_path):
    run, verdict, report = _run(tmp_path, "fewer-steps:1")
    assert verdict.status == "ERROR"
    rules = [f.rule for f in verdict.triage]
    assert rules[0] == "run-shape" and "run-incomplete" not in rules, verdict.triage
    assert verdict.triage[0].suggestion.startswith("run shape changed: the run ended cleanly after 44 steps, the case "
                                                   "expects 45")
    completion = next(r for r in verdict.results if r.check_id == "run[completion]")
    assert completion.parameters["exit_code"] == 0 and completion.parameters["clean_exit"]
    assert "| run shape |" in report and "over steps 1-44 (the steps both runs did) all" in report
