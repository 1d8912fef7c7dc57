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
    assert "4 training gate checks pass" in findings[0].evidence


def test_eval_breach_with_a_training_breach_stays_gradual() -> None:
    rewards = result("response/rewards/mean", FAIL, 20)
    findings = triage([rewards, *TRAINING_OK[1:], result("eval/accuracy", FAIL, 30)], CURRENT)
    assert findings[0].rule == "gradual"


def test_eval_breach_without_training_gates_is_not_called_an_eval_path_bug() -> None:
    # nothing vouches for training: no evidence that the trained policy is the golden one
    assert [f.rule for f in triage([result("eval/accuracy", FAIL, 45)], CURRENT)] == ["gradual"]
