"""Every fault of the embedded GRPO workload, run for real against the committed baseline:
the verdict, the breached metrics and the primary triage rule its catalogue entry documents."""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path

import pytest

from autotest.inputs.case import load_case
from autotest.pipeline import JudgeOptions, LaunchOptions, PublishOptions, RunOptions, run_case
from autotest.scopes.period import ordinal
from autotest.workloads.faults import MISMATCH, REWARDS, catalogue

ARGS = {"crash-at": "10", "hang-at": "10", "nan-at": "10", "truncated-tracker": "10"}
# Faults whose verdict a prefix of the run decides run with fail-fast, as a CI run would stop them, instead
# of all 45 steps: k3 breaches its stepwise gate from step 1; slow-step's median step time is decided once 23
# of the 45 steps are slow. unsynced-layer keeps the full run, so one mismatch fault is still judged on a
# complete run.
STOPPED_EARLY = {"perturbed-sync", "rollout-impl", "slow-step"}
FAULTS = [(f["name"], f["expected"]) for f in catalogue()]


def _processes_mentioning(text: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if text in (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace"):
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


@pytest.mark.slow
@pytest.mark.parametrize("name,expected", FAULTS, ids=[n for n, _ in FAULTS])
def test_fault_gives_its_documented_verdict(name, expected, tmp_path):
    case = load_case("tiny-grpo")
    if name == "hang-at":
        case = replace(case, launch=replace(case.launch, timeout_s=30))
    fault = f"{name}:{ARGS[name]}" if name in ARGS else name
    run = run_case(case, RunOptions(LaunchOptions(results_root=tmp_path, fault=fault, poll_interval_s=1),
                                    JudgeOptions(fail_fast=name in STOPPED_EARLY), PublishOptions(with_plots=False)))
    verdict = run.verdict
    failing = {r.metric for r in verdict.results if r.status == "FAIL" and r.is_gate}
    detail = "\n".join(f"{r.status} {r.check_id}: {r.message}" for r in verdict.results)
    assert verdict.status == expected["verdict"], detail
    assert set(expected["breached"]) <= failing, detail
    if "period" in expected:  # an intermittent fault: the per-step bound names the period its breaches follow
        bounded = next(r for r in verdict.results if r.check_id == f"{MISMATCH}[breaches]")
        assert bounded.status == "FAIL" and f"every {ordinal(expected['period'])} step" in bounded.message, detail
    primary = next((f.rule for f in verdict.triage if f.primary), "")
    assert primary == expected["triage"], f"{primary}: {[f.evidence for f in verdict.triage]}\n{detail}"
    # logs, tracker and report are kept whatever happened, and nothing of the run survives
    for kept in ("logs/stdout.log", "logs/stderr.log", "logs/launch.json", "report.md", "results.json"):
        assert (run.results_dir / kept).exists(), kept
    assert not verdict.context["launch"]["survivors"]
    assert _processes_mentioning(str(run.results_dir)) == [os.getpid()] or not _processes_mentioning(
        str(run.results_dir / "work"))
    # a consistency dump is requested exactly for train-inference mismatch
    assert (run.consistency_request is not None) == (primary == "mismatch")


@pytest.mark.slow
def test_fail_fast_stops_a_never_synced_layer_within_a_few_steps(tmp_path):
    run = run_case(load_case("tiny-grpo"), RunOptions(LaunchOptions(results_root=tmp_path, fault="unsynced-layer",
                                                                    poll_interval_s=0.5),
                                                      JudgeOptions(fail_fast=True), PublishOptions(with_plots=False)))
    verdict = run.verdict
    assert verdict.status == "FAIL" and verdict.triage[0].rule == "mismatch"
    stepwise = next(r for r in verdict.results if r.check_id == "mismatch/mismatch_k3_kl[stepwise]")
    completion = next(r for r in verdict.results if r.check_id == "run[completion]")
    assert completion.message.startswith("run stopped by fail-fast at step ") and MISMATCH in completion.message
    # what the stopped run could not reach is INFO "not reached", never ERROR "cannot decide"
    assert not [r for r in verdict.results if r.status == "ERROR"]
    # the gate that stopped it is named on the completion line: the per-step value bound with its breach count
    # (decided at its allowed + 1-th breaching step) or the stepwise drift bound (at its first breach)
    stopper = next(r for r in verdict.results if r.status == "FAIL" and r.check_id.startswith(MISMATCH)
                   and r.check_id.removeprefix(MISMATCH) in ("[breaches]", "[stepwise]")
                   and r.first_breach_step is not None)
    allowed = 0
    if stopper.check_id.endswith("[breaches]"):
        from autotest.inputs.baseline import load_baseline
        from autotest.scopes.breaches import allowed_breaches

        spec = next(c for c in load_baseline(load_case("tiny-grpo").baseline_path).checks
                    if c.metric == MISMATCH and c.scope == "breaches")
        allowed = allowed_breaches(spec)
    decided_at = stopper.points.breaches()[allowed].step
    last_step = max(p.step for p in stepwise.points)
    assert last_step <= decided_at + 3, (stopper.check_id, last_step, decided_at)
    assert verdict.context["time_to_verdict_s"] is not None
    assert run.consistency_request is not None


@pytest.mark.slow
def test_fail_fast_decides_a_grader_bug_at_an_early_look_of_its_pooled_reward_gate(tmp_path):
    """judge-bug moves the rewards from step 1: the pooled reward gate of steps 1-15 is looked at after 3 of its steps
    (its budget spent over the looks, autotest.judge.step_looks) and stops the run within 20% of its steps, where
    the end of the window (step 15, a third of the run) decided it before."""
    run = run_case(load_case("tiny-grpo"), RunOptions(LaunchOptions(results_root=tmp_path, fault="judge-bug",
                                                                    poll_interval_s=0.5),
                                                      JudgeOptions(fail_fast=True), PublishOptions(with_plots=False)))
    verdict = run.verdict
    detail = "\n".join(f"{r.status} {r.check_id}: {r.message}" for r in verdict.results)
    assert verdict.status == "FAIL", detail
    assert next(f.rule for f in verdict.triage if f.primary) == "rewards-only", detail
    pooled = next(r for r in verdict.results if r.check_id == f"{REWARDS}[pooled 1-15]")
    assert pooled.status == "FAIL" and pooled.parameters["look"] == 1, detail
    assert pooled.parameters["decided_step"] == 3
    assert pooled.message.startswith(f"{REWARDS} decided at step 3 (early look 1")
    decided = verdict.context["decided"]
    assert decided["of"] == 45 and decided["step"] <= 9 and decided["fraction"] <= 0.2, decided
    completion = next(r for r in verdict.results if r.check_id == "run[completion]")
    assert completion.message.startswith(f"run stopped by fail-fast at step {decided['step']} of 45 (")
    assert "early look 1 of 4" in completion.message
    assert not [r for r in verdict.results if r.status == "ERROR"], detail
    for kept in ("logs/stdout.log", "logs/stderr.log", "report.md", "results.json", "tracker.jsonl"):
        assert (run.results_dir / kept).exists(), kept
