"""A tier's run: the case shortened, the baseline cut to what the prefix can judge, the statement of what it gave up."""

from __future__ import annotations

import pytest

from autotest.errors import UsageError
from autotest.inputs.baseline import load_baseline
from autotest.inputs.case import load_case
from autotest.judge.model import INFO, PASS, Verdict
from autotest.judge.tier import tier_baseline, tier_case, tier_lines, tier_record, with_tier
from autotest.judge.verdict import Comparison
from tests.helpers import ROOT


def test_the_tier_s_args_are_appended_to_the_launch_and_its_steps_expected():
    case = load_case("tiny-grpo")
    short = tier_case(case, "pr")
    assert short.launch.command == (*case.launch.command, "--stop-at-step", "30")
    assert short.expected.steps == 30 and case.expected.steps == 45


def test_an_undeclared_tier_is_one_line_naming_the_declared_ones():
    case = load_case("tiny-grpo")
    with pytest.raises(UsageError, match=r"--tier nightly: the case declares no tier 'nightly' \(declared: pr\); "):
        tier_case(case, "nightly")


def test_the_tier_s_baseline_keeps_the_gates_its_steps_hold_and_expects_its_steps():
    baseline = load_baseline(ROOT / "baselines" / "tiny-grpo.yaml")
    short = tier_baseline(baseline, 30)
    kept = {c.check_id for c in short.checks}
    assert {"response/rewards/mean[pooled 1-15]", "response/rewards/mean[pooled 16-30]",
            "mismatch/mismatch_k3_kl[stepwise]", "entropy/mean[points]"} <= kept
    assert not kept & {"response/rewards/mean[pooled 31-45]", "eval/accuracy[final]", "time/step[percentile]",
                       "eval/greedy_accuracy[final]"}  # a reference check past the prefix goes too
    assert short.steps.expected == 30 and short.steps.exact == baseline.steps.exact
    assert len(baseline.checks) == 18  # the full baseline is untouched


def test_the_verdict_states_what_the_tier_gave_up():
    baseline = load_baseline(ROOT / "baselines" / "tiny-grpo.yaml")
    record = tier_record("pr", baseline, 30)
    assert record["statement"].startswith("pr tier, 30 of 45 steps: not judged: response/rewards/mean[percentile], ")
    assert "eval/accuracy: no gate judged (the full run's best ±0.098)" in record["statement"]
    verdict = Verdict(case="tiny-grpo", status=PASS, results=())
    judged = with_tier(Comparison(verdict, None, None, None), record).verdict
    assert [(r.check_id, r.status, r.message) for r in judged.results] == [("tier[pr]", INFO, record["statement"])]
    assert judged.status == PASS and tier_lines(judged) == [f"tier: {record['statement']}"]
    assert with_tier(Comparison(verdict, None, None, None), None).verdict is verdict


def test_tiny_mopd_s_pr_tier_judges_its_points_gates_at_the_points_15_steps_hold():
    case = load_case("tiny-mopd")
    short_case = tier_case(case, "pr")
    assert short_case.expected.steps == 15 and list(short_case.launch.command[-2:]) == ["--steps", "15"]
    baseline = load_baseline(ROOT / "baselines" / "tiny-mopd.yaml")
    short = tier_baseline(baseline, 15)
    points = {c.check_id: c.points for c in short.checks if c.points}
    assert points["distillation/reduced_distillation_kl[points]"] == (1, 5, 10, 15)
    assert points["eval/digit_sum/acc[points]"] == (0, 5, 10, 15)
    assert points["distillation/teacher_probe/digit_sum_teacher[points]"] == (1,)
    assert not any(c.scope == "pooled" for c in short.checks)  # every window ends at 25
    record = tier_record("pr", baseline, 15)
    assert record["statement"].startswith("pr tier, 15 of 25 steps: not judged: ")
    assert "distillation/reduced_distillation_kl[points] at steps 20/25" in record["statement"]
    assert "response/rewards/mean[pooled 1-25]" in record["statement"]
