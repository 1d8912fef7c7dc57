"""The teachers reading: a teacher's KL off at once or the teachers' KL moving apart is a teacher's path; every
teacher's KL leaving the golden later, one way, is the student's update (a slower student), read as gradual."""

from __future__ import annotations

from pathlib import Path
from types import MappingProxyType

import yaml

from autotest.inputs.baseline import load_baseline
from autotest.judge.teacher_evidence import TEACHERS
from autotest.judge.trace import Trace
from autotest.judge.verdict import compare

STEPS = range(1, 26)
SUM, PRODUCT = "distillation/teacher_kl/digit_sum_teacher", "distillation/teacher_kl/digit_product_teacher"
REWARD = "response/rewards/mean"
SD = 0.1


def _golden() -> dict[str, dict[int, float]]:
    return {SUM: {s: 1.0 - 0.015 * s for s in STEPS}, PRODUCT: {s: 1.1 - 0.015 * s for s in STEPS},
            REWARD: {s: 0.45 + 0.01 * s for s in STEPS}}


def _baseline(tmp_path: Path):
    checks = [{"metric": m, "method": "absolute", "operator": "<", "threshold": 0.25} for m in (SUM, PRODUCT)]
    checks.append({"metric": REWARD, "method": "absolute", "operator": "<", "threshold": 0.3})
    golden = {"table": _golden(), "noise": {m: {s: SD for s in STEPS} for m in _golden()}}
    path = tmp_path / "b.yaml"
    path.write_text(yaml.safe_dump({"golden": golden, "checks": checks}))
    return load_baseline(path)


def _verdict(tmp_path: Path, sum_kl=lambda s: 0.0, product_kl=lambda s: 0.0, reward=lambda s: 0.0):
    series = _golden()
    series[SUM] = {s: v + sum_kl(s) for s, v in series[SUM].items()}
    series[PRODUCT] = {s: v + product_kl(s) for s, v in series[PRODUCT].items()}
    series[REWARD] = {s: v + reward(s) for s, v in series[REWARD].items()}
    trace = Trace("current", MappingProxyType({m: MappingProxyType(v) for m, v in series.items()}),
                  train_steps=tuple(STEPS))
    verdict = compare(_baseline(tmp_path), trace).verdict
    return verdict, next(m for m in verdict.measured if m.hypothesis == TEACHERS)


def test_a_teacher_answering_otherwise_from_the_first_step_is_the_teacher_path(tmp_path: Path) -> None:
    verdict, reading = _verdict(tmp_path, product_kl=lambda s: 0.4)
    assert reading.holds and reading.values["at_once"] == PRODUCT
    assert verdict.triage[0].rule == "teacher-path"


def test_a_teacher_that_leaves_the_golden_within_the_first_steps_is_the_teacher_path(tmp_path: Path) -> None:
    """A fifth of the samples routed to the other teacher: 2 sd off from step 2 on, under 3 sd at step 1."""
    verdict, reading = _verdict(tmp_path, product_kl=lambda s: 0.1 if s == 1 else 0.35)
    assert reading.holds and reading.values["at_once"] == PRODUCT
    assert verdict.triage[0].rule == "teacher-path"


def test_the_kl_rising_later_while_the_scores_fall_with_it_is_the_student_not_a_teacher(tmp_path: Path) -> None:
    """A slower student: the harder domain's KL rises from step 8, the other's a little later and less, and the
    rewards fall behind the golden's as it learns less of the task too."""
    verdict, reading = _verdict(tmp_path, product_kl=lambda s: max(0.0, 0.04 * (s - 6)),
                                sum_kl=lambda s: max(0.0, 0.015 * (s - 10)), reward=lambda s: -max(0.0, 0.02 * (s - 6)))
    assert not reading.holds and reading.values["student"] == "yes" and reading.values["scores_fell"] == REWARD
    assert "a training-loop change, not a teacher" in reading.finding
    assert [f.rule for f in verdict.triage][:1] == ["gradual"] and "teacher-path" not in [f.rule for f in verdict.triage]


def test_the_kl_rising_later_while_the_scores_hold_is_the_teacher_path(tmp_path: Path) -> None:
    """A fifth of the samples routed to the other teacher: the KL drifts up, the task is learnt as well as ever."""
    verdict, reading = _verdict(tmp_path, product_kl=lambda s: max(0.0, 0.03 * (s - 6)),
                                sum_kl=lambda s: max(0.0, 0.03 * (s - 6)))
    assert reading.holds and reading.values["above"] and not reading.values["scores_fell"]
    assert "while no score fell" in reading.finding and verdict.triage[0].rule == "teacher-path"


def test_teachers_moving_apart_is_a_domains_path(tmp_path: Path) -> None:
    """One domain's prompts dropped: the student distils the other domain's teacher better, this one worse."""
    verdict, reading = _verdict(tmp_path, product_kl=lambda s: max(0.0, 0.03 * (s - 8)),
                                sum_kl=lambda s: -max(0.0, 0.03 * (s - 8)))
    assert reading.holds and reading.values["above"] == PRODUCT and reading.values["below"] == SUM
    assert verdict.triage[0].rule == "teacher-path"
