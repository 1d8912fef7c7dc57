"""tiny-mopd through the harness (``run_case``), clean and with each fault: the verdict, its primary
triage rule, and that no teacher server, training or Ray process of the run is left afterwards."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest

from autotest.inputs.case import load_case  # noqa: E402
from autotest.pipeline import CaseRun, JudgeOptions, LaunchOptions, PublishOptions, RunOptions, run_case  # noqa: E402
from autotest.run.infra import RetryPolicy  # noqa: E402
from autotest.workloads.mopd_launch import FAULTS  # noqa: E402
from autotest.workloads.teachers import Fixture  # noqa: E402

from .test_mopd_launch import assert_nothing_left  # noqa: E402

#: each test is a whole tiny-mopd run with its teacher servers (≈ 30 s of a core each: docs/benchmarks.md)
pytestmark = pytest.mark.slow

GATES = ("distillation/reduced_distillation_kl", "distillation/reduced_distillation_abs_loss", "response/rewards/mean",
         "response/response_len/mean", "eval/digit_sum/acc", "eval/digit_product/acc")


def run(tmp_path: Path, fault: str | None = None, timeout_s: float | None = None, seed: int | None = None,
        baseline: Path | None = None) -> CaseRun:
    case = load_case("tiny-mopd")
    if timeout_s is not None:
        case = dataclasses.replace(case, launch=dataclasses.replace(case.launch, timeout_s=timeout_s))
    # no relaunch: a dead teacher is a known infra signature the default policy would retry; one run, not
    # the case's replicates: a fault's verdict is one run's plumbing (replicates are tested on their own)
    options = RunOptions(LaunchOptions(results_root=tmp_path, fault=fault, seed=seed,
                                       retry_policy=RetryPolicy(per_kind={}, max_total_relaunches=0)),
                         JudgeOptions(replicates=1, baseline_path=baseline), PublishOptions(with_plots=False))
    outcome = run_case(case, options)
    assert outcome.results_dir is not None and outcome.verdict is not None
    assert_nothing_left(outcome.results_dir / "work")
    return outcome


def failing_gates(outcome: CaseRun) -> set[str]:
    assert outcome.verdict is not None
    return {r.metric for r in outcome.verdict.results if r.is_gate and r.status == "FAIL"}


def primary_rule(outcome: CaseRun) -> str:
    assert outcome.verdict is not None
    return next(f.rule for f in outcome.verdict.triage if f.primary)


def expected(outcome: CaseRun, fault: str) -> None:
    """The outcome the fault catalogue (mopd_launch.FAULTS) promises."""
    promised = FAULTS[fault.partition(":")[0]]
    assert outcome.status == promised["verdict"], outcome.verdict.failing()
    assert primary_rule(outcome) == promised["triage"]
    assert set(promised["breached"]) <= failing_gates(outcome)


#: the clean control's seed: no calibration run (seeds 0-9) used it. The default seed 0 is a calibration run,
#: bitwise: the golden and every threshold were made to cover it, so its PASS cannot show a false alarm (a baseline
#: with each gate fitted to the seed-0 run passed it; at this seed 6 of those 12 gates fail)
FRESH_SEED = max(load_case("tiny-mopd").seed.calibration) + 1


def test_a_clean_run_passes(tmp_path: Path, mopd_cache_env: Fixture) -> None:
    outcome = run(tmp_path, seed=FRESH_SEED)
    assert outcome.status == "PASS", outcome.verdict.failing()
    checked = {r.metric for r in outcome.verdict.results if r.kind == "metric" and r.status == "PASS"}
    assert set(GATES) <= checked
    # every eval point was compared, step 0 included
    evals = next(r for r in outcome.verdict.results if r.metric == "eval/digit_sum/acc")
    assert evals.points.steps == (0, 5, 10, 15, 20, 25)
    assert (outcome.results_dir / "tracker.jsonl").is_file()


def test_swapped_teachers_breach_distill_kl_with_healthy_rewards(tmp_path: Path, mopd_cache_env: Fixture) -> None:
    outcome = run(tmp_path, "teacher-swap")
    expected(outcome, "teacher-swap")
    assert "response/rewards/mean" not in failing_gates(outcome)


def test_a_teacher_that_misscores_from_step_k_is_the_teacher_path(tmp_path: Path,
                                                                  mopd_cache_env: Fixture) -> None:
    """The teacher answers otherwise from step 3: the probe after the last step says which one, the start probe
    says it answered as its checkpoint before."""
    outcome = run(tmp_path, "teacher-misscore:3")
    expected(outcome, "teacher-misscore")
    probes = {r.metric: r for r in outcome.verdict.results if r.metric and "teacher_probe" in r.metric}
    sum_probe, product_probe = (probes[f"distillation/teacher_probe/{t}_teacher"]
                                for t in ("digit_sum", "digit_product"))
    assert sum_probe.status == "FAIL" and product_probe.status == "PASS"
    assert sum_probe.first_breach_step == 25
    assert sum_probe.points.steps == (1, 25) and sum_probe.points.current[0] < 1e-4  # float rounding, not 0: another forward
    log = (outcome.results_dir / "logs" / "stdout.log").read_text(encoding="utf-8", errors="replace")
    assert "teacher probe at end (after step 25)" in log
    assert "ANSWERS DIFFER from the checkpoint: digit_sum_teacher" in log


def test_a_judge_bug_drifts_rewards_only(tmp_path: Path, mopd_cache_env: Fixture) -> None:
    outcome = run(tmp_path, "judge-bug")
    expected(outcome, "judge-bug")
    assert failing_gates(outcome) == {"response/rewards/mean"}


def test_a_teacher_dying_mid_run_is_an_error_naming_it_and_its_log(tmp_path: Path, mopd_cache_env: Fixture) -> None:
    outcome = run(tmp_path, "teacher-dies:3")
    expected(outcome, "teacher-dies:3")
    log = outcome.results_dir / "work" / "teachers" / "digit_sum_teacher-0.log"
    assert "injected fault teacher-dies:3" in log.read_text()
    stderr = (outcome.results_dir / "logs" / "stderr.log").read_text()
    assert re.search(rf"ERROR: teacher server 'digit_sum_teacher' \(replica 0, pid \d+\) exited with code 3 during "
                     rf"training; its log: {re.escape(str(log))}", stderr), stderr
    messages = " | ".join(r.message for r in outcome.verdict.results if r.status == "ERROR")
    assert "digit_sum_teacher" in messages and str(log) in messages, messages


def test_a_training_crash_is_an_error_and_stops_the_servers(tmp_path: Path, mopd_cache_env: Fixture) -> None:
    outcome = run(tmp_path, "crash-at:2")
    expected(outcome, "crash-at:2")
    completion = next(r for r in outcome.verdict.results if r.check_id == "run[completion]")
    assert completion.message == "run exited with code 1 at step 1 of 25"
    assert "stopped 2 teacher server(s)" in (outcome.results_dir / "logs" / "stdout.log").read_text()


def test_a_hung_run_times_out_and_leaves_nothing(tmp_path: Path, mopd_cache_env: Fixture) -> None:
    outcome = run(tmp_path, "hang-at:2", timeout_s=30)
    expected(outcome, "hang-at:2")
    completion = next(r for r in outcome.verdict.results if r.check_id == "run[completion]")
    # normally at step 1; on a crowded machine the timeout may come while the teachers still start
    assert re.fullmatch(r"run timed out after 30 s (at step 1 of 25|before any step was logged \(expected 25\))",
                        completion.message), completion.message
