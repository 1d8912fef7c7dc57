from __future__ import annotations

import json
import os
from dataclasses import replace
from pathlib import Path

import pytest

from autotest.inputs.case import load_case
from autotest.pipeline import DRY_RUN, SKIP, LaunchOptions, PublishOptions, RunOptions, run_case
from autotest.run.infra import DEFAULT_POLICY, InfraKind, KindPolicy, RetryPolicy
from tests.helpers import DATA

CASE = DATA / "cases" / "scripted.yaml"


@pytest.fixture
def case():
    return load_case(CASE)


def options(tmp_path: Path, **launch) -> RunOptions:
    return RunOptions(LaunchOptions(results_root=tmp_path / "results", poll_interval_s=0.2, **launch),
                      publish=PublishOptions(with_plots=False))


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_clean_run_passes_and_keeps_everything(case, tmp_path):
    run = run_case(case, options(tmp_path))
    assert run.status == "PASS", [r.message for r in run.verdict.results]
    folder = run.results_dir
    for name in ("results.json", "report.md", "card.md", "preflight.json", "tracker.jsonl",
                 "logs/stdout.log", "logs/stderr.log", "logs/launch.json", "run_config/exp_dir/config.json"):
        assert (folder / name).exists(), name
    assert run.consistency_request is None
    data = json.loads((folder / "results.json").read_text())
    assert data["context"]["commit"]["sha"]
    assert "判读标准" in (folder / "card.md").read_text()


def test_mismatch_breach_fails_and_requests_a_consistency_dump(case, tmp_path):
    run = run_case(case, options(tmp_path, fault="mismatch-from:4"))
    assert run.status == "FAIL"
    assert run.verdict.triage[0].rule == "mismatch"
    request = json.loads(run.consistency_request.read_text())
    assert request["case"] == "scripted" and request["reason"] == "breach"
    assert request["breaches"][0]["metric"] == "mismatch/mismatch_k3_kl"
    assert request["breaches"][0]["first_breach_step"] == 4
    # portable: paths relative to the results folder, so a job on another runner can use the artifact
    assert (request["results_dir"], request["tracker"], request["work_dir"]) == (".", "tracker.jsonl", "work")
    assert (run.consistency_request.parent / request["tracker"]).exists()


def test_policy_off_never_requests(case, tmp_path):
    off = replace(case, consistency=replace(case.consistency, policy="off"))
    assert run_case(off, options(tmp_path, fault="mismatch-from:4")).consistency_request is None


def test_fail_fast_stops_the_run_at_the_first_decided_breach(case, tmp_path):
    slow = replace(case, launch=replace(case.launch, command=tuple(
        "1.0" if a == "0.2" else a for a in case.launch.command)))
    run = run_case(slow, options(tmp_path, fault="mismatch-from:2").changed(judge={"fail_fast": True}))
    assert run.status == "FAIL"
    completion = next(r for r in run.verdict.results if r.check_id == "run[completion]")
    assert completion.status == "INFO"
    assert completion.message.startswith("run stopped by fail-fast at step 2 of 10 (20% of the run's steps): "
                                          "mismatch/mismatch_k3_kl at step 2")
    # what the stopped run could not decide is reported as not reached, never as ERROR
    assert not [r for r in run.verdict.results if r.status == "ERROR"]
    assert any(r.message.startswith("not reached: stopped by fail-fast at step 2 of 10 (20% of the run's steps), "
                                    "after the first breach at step 2")
               for r in run.verdict.results if r.status == "INFO")
    context = json.loads((run.results_dir / "results.json").read_text())["context"]
    assert context["time_to_verdict_s"] is not None and context["time_to_verdict_s"] < 8
    assert (context["decided"]["step"], context["decided"]["of"], context["decided"]["fraction"]) == (2, 10, 0.2)
    assert "FAIL decided at step 2 of 10 (20% of the run's steps)" in (run.results_dir / "report.md").read_text()


@pytest.mark.parametrize("fault,expected", [
    ("crash-at:4", "run exited with code 3 at step 3 of 10"),
    ("truncate-at:6", "run ended at step 5 of 10 with exit code 0 (a pipeline may hide a crash)"),
])
def test_crash_and_hidden_crash_are_errors_with_logs_kept(case, tmp_path, fault, expected):
    run = run_case(case, options(tmp_path, fault=fault))
    assert run.status == "ERROR"
    assert expected in next(r.message for r in run.verdict.results if r.check_id == "run[completion]")
    assert run.verdict.triage[0].rule == "run-incomplete"
    assert (run.results_dir / "tracker.jsonl").exists() and (run.results_dir / "logs" / "stdout.log").exists()


def test_hang_times_out_and_leaves_no_process(case, tmp_path):
    short = replace(case, launch=replace(case.launch, timeout_s=3))
    run = run_case(short, options(tmp_path, fault="hang-at:3"))
    assert run.status == "ERROR"
    launch = json.loads((run.results_dir / "logs" / "launch.json").read_text())
    # it hangs at step 3, so only the timeout ends it; the step it names is the last one logged (step 2, or fewer
    # on a machine so busy that the steps before the hang took longer than the 3 s)
    steps = [json.loads(line)["step"] for line in (run.results_dir / "tracker.jsonl").read_text().splitlines()]
    last = f"at step {max(steps)} of 10" if steps else "before any step was logged (expected 10)"
    assert f"timed out after 3 s {last}" in run.verdict.results[0].message, run.verdict.results[0].message
    assert not steps or max(steps) <= 2
    assert not run.verdict.context["launch"]["survivors"]
    assert launch


def test_nan_fails(case, tmp_path):
    run = run_case(case, options(tmp_path, fault="nan-at:5"))
    assert run.status == "FAIL"
    failed = [r for r in run.verdict.results if r.status == "FAIL"]
    assert failed[0].metric == "response/rewards/mean" and failed[0].first_breach_step == 5


def test_infra_failure_is_relaunched_with_a_trail(case, tmp_path):
    policy = RetryPolicy({**DEFAULT_POLICY.per_kind, InfraKind.PORT_IN_USE: KindPolicy(2, 0.1)}, 2)
    run = run_case(case, options(tmp_path, fault="infra-once", retry_policy=policy))
    assert run.status == "PASS"
    trail = run.verdict.context["retries"]
    assert [a["verdict"] for a in trail] == ["ERROR", "PASS"]
    assert trail[0]["infra"]["kind"] == "port_in_use" and trail[0]["decision"]["retry"]
    assert (run.results_dir / "attempts" / "1" / "logs" / "stderr.log").read_text().strip().endswith(
        "Address already in use")
    assert "Retries" in (run.results_dir / "report.md").read_text()


def test_accuracy_fail_is_never_relaunched(case, tmp_path):
    run = run_case(case, options(tmp_path, fault="mismatch-from:4"))
    assert run.verdict.context.get("retries") is None
    assert not (run.results_dir / "attempts").exists()


def test_skip_dry_run_and_missing_inputs(case, tmp_path, monkeypatch):
    gpu_case = replace(case, platform=replace(case.platform, gpus=8))
    monkeypatch.setenv("RL_AUTOTEST_GPU_COUNT", "0")
    skipped = run_case(gpu_case, options(tmp_path))
    assert skipped.status == SKIP and "needs 8 GPUs, found 0" in skipped.reason
    shown = run_case(case, options(tmp_path, dry_run=True))
    assert shown.status == DRY_RUN and "scripted_run.py" in shown.command_line
    assert not (shown.results_dir / "logs").exists()
    needs = replace(case, inputs={"model": str(tmp_path / "no-such-model")})
    failed = run_case(needs, options(tmp_path))
    assert failed.status == "ERROR" and f"input model is missing: {tmp_path / 'no-such-model'} (does not exist)" in failed.reason
    assert not (failed.results_dir / "logs").exists()
