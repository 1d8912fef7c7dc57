"""Triage rules for the eval path (issue 11)."""

from __future__ import annotations

from types import MappingProxyType

from autotest.judge.model import FAIL, PASS, CheckResult
from autotest.judge.trace import Trace
from autotest.judge.triage import triage

CURRENT = Trace("t", MappingProxyType({}), train_steps=tuple(range(1, 46)), eval_steps=(0, 15, 30, 45))


def result(metric: str, status: str = PASS, first: int | None = None) -> CheckResult:
    return CheckResult(f"{metric}[x]", status, f"{metric} {status}", metric=metric,
                       first_breach_step=first if status == FAIL else None)


TRAINING_OK = [result("response/rewards/mean"), result("entropy/mean"), result("mismatch/mismatch_k3_kl"),
               result("response/response_len/mean")]


def test_eval_breach_with_every_training_gate_in_bounds_is_the_eval_path() -> None:
    findings = triage([*TRAINING_OK, result("eval/accuracy", FAIL, 45)], CURRENT)
    assert [f.rule for f in findings] == ["eval-path"]
    assert "weight refresh before eval" in findings[0].suggestion
    assert "eval/accuracy FAIL (only eval breached)" in findings[0].evidence
    assert "reward within bounds at every step (1 gate check); entropy within bounds" in findings[0].evidence


def test_eval_path_warns_when_a_training_gate_came_close() -> None:
    near = CheckResult("response/rewards/mean[pooled 31-45]", PASS, "rewards pooled PASS",
                       metric="response/rewards/mean", method="absolute", operator="<", threshold=4.0, observed=3.4)
    findings = triage([near, *TRAINING_OK[1:], result("eval/accuracy", FAIL, 45)], CURRENT)
    assert [f.rule for f in findings] == ["eval-path"]
    assert "a training change that the eval sees first is also possible" in findings[0].suggestion
    assert "the closest response/rewards/mean[pooled 31-45] at 0.85 of its threshold" in findings[0].evidence
    far = CheckResult("response/rewards/mean[pooled 31-45]", PASS, "rewards pooled PASS",
                      metric="response/rewards/mean", method="absolute", operator="<", threshold=4.0, observed=1.0)
    quiet = triage([far, *TRAINING_OK[1:], result("eval/accuracy", FAIL, 45)], CURRENT)
    assert "also possible" not in quiet[0].suggestion


def test_eval_breach_with_a_training_breach_stays_gradual() -> None:
    rewards = result("response/rewards/mean", FAIL, 20)
    findings = triage([rewards, *TRAINING_OK[1:], result("eval/accuracy", FAIL, 30)], CURRENT)
    assert findings[0].rule == "gradual"


def test_eval_breach_without_training_gates_is_not_called_an_eval_path_bug() -> None:
    # nothing vouches for training: no evidence that the trained policy is the golden one
    assert [f.rule for f in triage([result("eval/accuracy", FAIL, 45)], CURRENT)] == ["gradual"]


MOPD = Trace("t", MappingProxyType({}), train_steps=tuple(range(1, 26)), eval_steps=(0, 5, 10, 15, 20, 25))


def test_distillation_kl_at_step_1_is_the_teacher_path_not_initialisation() -> None:
    kl = result("distillation/reduced_distillation_kl", FAIL, 1)
    findings = triage([kl, result("response/rewards/mean")], MOPD)
    assert findings[0].rule == "teacher-path" and "rewards within threshold" in findings[0].evidence


def test_kl_breaching_before_rewards_is_still_the_teacher_path() -> None:
    kl = result("distillation/teacher_kl/digit_sum_teacher", FAIL, 3)
    rewards = result("response/rewards/mean", FAIL, 12)
    findings = triage([kl, rewards], MOPD)
    assert findings[0].rule == "teacher-path"
    assert "rewards breached later, from step 12" in findings[0].evidence
    # rewards first: not the teacher path
    assert triage([result("distillation/reduced_distillation_kl", FAIL, 14), rewards], MOPD)[0].rule == "gradual"


def probe(teacher: str, status: str = PASS, first: int | None = None) -> CheckResult:
    metric = f"distillation/teacher_probe/{teacher}"
    return CheckResult(f"{metric}[points]", status, f"{metric} {status}", metric=metric, method="value",
                       operator="<=", threshold=1e-3, first_breach_step=first if status == FAIL else None)


def test_a_failed_teacher_bound_names_the_teacher_and_decides_the_teacher_path() -> None:
    """A teacher probe (its answers against its own checkpoint) that failed is the teacher path even when rewards
    breached first (a teacher's temperature moves rewards from step 3 while its KL is checked pooled)."""
    rewards = result("response/rewards/mean", FAIL, 3)
    findings = triage([rewards, probe("digit_sum_teacher", FAIL, 25), probe("digit_product_teacher")], MOPD)
    assert findings[0].rule == "teacher-path"
    assert "start with the teacher a failed bound names (distillation/teacher_probe/digit_sum_teacher from step 25)" \
        in findings[0].suggestion
    assert "a teacher bound breached (distillation/teacher_probe/digit_sum_teacher)" in findings[0].evidence
    assert "gradual" not in [f.rule for f in findings]
    # probes that pass change nothing: rewards first is still not the teacher path
    kl = result("distillation/reduced_distillation_kl", FAIL, 14)
    plain = triage([kl, rewards, probe("digit_sum_teacher"), probe("digit_product_teacher")], MOPD)
    assert plain[0].rule == "gradual" and "failed bound" not in plain[0].suggestion
