from __future__ import annotations

from types import MappingProxyType

from autotest.judge.model import ERROR, FAIL, PASS, CheckResult
from autotest.judge.trace import Trace
from autotest.judge.triage import triage

CURRENT = Trace("t", MappingProxyType({}), train_steps=tuple(range(1, 26)), eval_steps=(0, 5, 10, 15, 20, 25))


def fail(metric, first, status=FAIL, kind="metric"):
    return CheckResult(f"{metric}[x]", status, f"{metric} breached", kind=kind, metric=metric,
                       first_breach_step=first)


def ok(metric):
    return CheckResult(f"{metric}[x]", PASS, "ok", metric=metric)


def rules(results):
    return [f.rule for f in triage(results, CURRENT)]


def test_mismatch_breach_comes_first_and_requests_a_dump():
    findings = triage([fail("response/rewards/mean", 12), fail("mismatch/mismatch_k3_kl", 3)], CURRENT)
    assert findings[0].rule == "mismatch" and findings[0].primary
    assert "consistency dump job is requested" in findings[0].suggestion
    assert "step 3" in findings[0].evidence
    assert rules([fail("rollout_corr/k3_kl", 2)]) == ["mismatch"]
    assert rules([fail("train/train_rollout_logprob_abs_diff", 2)]) == ["mismatch"]


def test_first_step_or_first_eval_drift_points_at_init():
    assert rules([fail("entropy/mean", 1), fail("response/rewards/mean", 12)]) == ["first-step"]
    assert rules([fail("eval/gsm8k/acc", 0)]) == ["first-step"]


def test_rewards_alone_at_the_first_step_point_at_the_judger():
    assert rules([fail("response/rewards/mean", 1), ok("entropy/mean")]) == ["rewards-only"]
    assert rules([fail("response/rewards/mean", 1), fail("entropy/mean", 1)]) == ["first-step"]


def test_distill_breach_with_healthy_rewards_points_at_teacher():
    assert rules([fail("distillation/reduced_distillation_kl", 5), ok("response/rewards/mean")]) == ["teacher-path"]


def test_rewards_only_drift_in_distillation_points_at_judger():
    results = [fail("response/rewards/mean", 10), ok("distillation/reduced_distillation_kl")]
    # a drift after the start fits the training loop too: shown second, with why it ranks below
    findings = triage(results, CURRENT)
    assert [f.rule for f in findings] == ["rewards-only", "gradual"]
    assert findings[1].rank == 2 and "more narrowly" in findings[1].why_ranked


def test_gradual_divergence_points_at_training_loop():
    assert rules([fail("response/rewards/mean", 12), fail("eval/accuracy", 30)]) == ["gradual"]


def test_time_only_is_performance():
    assert rules([fail("time/step", 3)]) == ["performance-only"]


def test_incomplete_run():
    results = [fail("steps[count]", None, status=ERROR, kind="structural")]
    assert rules(results) == ["run-incomplete"]


def test_non_finite_is_numerical_not_mismatch():
    nan = CheckResult("mismatch/mismatch_k3_kl[x]", FAIL, "nan", metric="mismatch/mismatch_k3_kl",
                      first_breach_step=7, observed=float("nan"))
    assert rules([nan]) == ["non-finite"]


def test_pass_has_no_findings():
    assert triage([ok("response/rewards/mean")], CURRENT) == ()
