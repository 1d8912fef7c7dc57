"""The resume phase inside the one pipeline, for real: a clean tiny-grpo run resumes bitwise from its checkpoint;
a run that did not complete is not resumed, and says so. (Each resume fault's verdict: workloads/test_faults.py.)"""

from __future__ import annotations

import json

import pytest

from autotest.inputs.case import load_case
from autotest.pipeline import LaunchOptions, PublishOptions, RunOptions, run_case

from ..workloads.test_faults import _processes_mentioning


@pytest.mark.slow
def test_a_clean_run_resumes_bitwise_and_keeps_the_resumed_logs(tmp_path):
    run = run_case(load_case("tiny-grpo"), RunOptions(LaunchOptions(results_root=tmp_path, poll_interval_s=1),
                                                      publish=PublishOptions(with_plots=False)))
    verdict = run.verdict
    resume = {r.check_id: r for r in verdict.results if r.check_id.startswith("resume[")}
    detail = "\n".join(f"{r.status} {r.check_id}: {r.message}" for r in verdict.results if r.status != "PASS")
    # a busy runner may leave the step-time gate to the environment (exit 75); nothing else may fail
    assert not [r for r in verdict.results if r.is_gate and r.status in ("FAIL", "ERROR") and not r.is_environment], \
        detail
    assert set(resume) == {"resume[completion]", "resume[step-counter]", "resume[match]"}
    assert all(r.status == "PASS" for r in resume.values()), detail
    assert resume["resume[match]"].message.startswith("27 metrics bitwise equal at steps 21-23")
    # the main run saved the checkpoint without changing a number: its own gates passed above
    folder = run.results_dir / "resume"
    for kept in ("logs/stdout.log", "logs/stderr.log", "logs/launch.json", "tracker.jsonl"):
        assert (folder / kept).is_file(), kept
    steps = {json.loads(line)["step"] for line in (folder / "tracker.jsonl").read_text().splitlines()}
    assert steps == {21, 22, 23}
    context = json.loads((run.results_dir / "results.json").read_text())["context"]["resume"]
    assert "--resume-from" in context["command_line"] and context["exit_code"] == 0
    assert "--save-checkpoint-at 20" in json.loads((run.results_dir / "logs/launch.json").read_text())["command_line"]
    assert not _processes_mentioning(str(folder / "work"))


def test_a_run_that_did_not_complete_is_not_resumed(tmp_path):
    run = run_case(load_case("tiny-grpo"), RunOptions(LaunchOptions(results_root=tmp_path, fault="crash-at:2",
                                                                    poll_interval_s=0.5),
                                                      publish=PublishOptions(with_plots=False)))
    verdict = run.verdict
    completion = next(r for r in verdict.results if r.check_id == "resume[completion]")
    assert completion.status == "INFO"
    assert completion.message.startswith("resume phase not run: the main run did not complete (run exited with "
                                         "code 1")
    assert not (run.results_dir / "resume").exists()
    assert verdict.status == "ERROR" and verdict.triage[0].rule == "run-incomplete"
