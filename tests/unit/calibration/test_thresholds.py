from __future__ import annotations

import math
from pathlib import Path
from types import MappingProxyType

import numpy as np
import pytest

from autotest.calibration.thresholds import (
    CALIBRATED,
    KEPT,
    UNCALIBRATED,
    CalibrationError,
    calibrate,
    exceed_chance,
    leave_one_out,
    round_up,
    sample_size_warnings,
)
from autotest.errors import UsageError
from autotest.inputs.baseline_model import Baseline, CalibrationSpec, CheckSpec, StepPolicy
from autotest.judge.model import FAIL, PASS
from autotest.judge.trace import Trace
from autotest.judge.verdict import compare

STEPS = range(1, 21)


def run(name: str, series: dict[str, dict[int, float]]) -> Trace:
    train = sorted({s for m, v in series.items() if not m.startswith("eval/") for s in v})
    evals = sorted({s for m, v in series.items() if m.startswith("eval/") for s in v})
    frozen = {m: MappingProxyType(dict(sorted(v.items()))) for m, v in series.items()}
    return Trace(name, MappingProxyType(frozen), tuple(train), tuple(evals))


def spec(*checks: CheckSpec, settings: CalibrationSpec | None = None, **kw) -> Baseline:
    return Baseline(name="s", path=Path("s.yaml"), checks=checks, golden_table=MappingProxyType({}),
                    calibration=settings, **kw)


def chk(metric="m", method="absolute", operator="<", threshold=1.0, **kw) -> CheckSpec:
    return CheckSpec(metric=metric, method=method, operator=operator, threshold=threshold, **kw)


def noisy_runs(n=3, sd=0.05, seed=0, base=lambda s: 0.5 + 0.01 * s, metric="m") -> list[Trace]:
    rng = np.random.default_rng(seed)
    return [run(f"run{i}", {metric: {s: base(s) + float(rng.normal(0, sd)) for s in STEPS}}) for i in range(n)]


@pytest.mark.parametrize("value,expected", [
    (0.0185, 0.019), (0.03, 0.03), (1e-4, 1e-4), (0.0001234, 0.00013), (0.2222 * 1.5, 0.34), (12.01, 13.0),
    (0.0, 0.0),
])
def test_round_up_never_lowers(value, expected):
    assert round_up(value) == pytest.approx(expected)
    assert round_up(value) >= value


def test_golden_is_the_per_step_mean_and_uncovered_steps_stay_out():
    runs = [run("a", {"m": {1: 1.0, 2: 2.0, 3: 3.0}}), run("b", {"m": {1: 3.0, 2: 4.0}}),
            run("c", {"m": {1: 2.0, 2: 3.0, 3: 9.0}})]
    cal = calibrate(spec(chk()), runs)
    assert dict(cal.baseline.golden_table["m"]) == {1: 2.0, 2: 3.0}
    assert cal.uncovered == {"m": (3,)}
    assert cal.baseline.calibrated_range == (1, 2)
    assert cal.num_runs == 3


def test_stepwise_threshold_is_max_pairwise_deviation_times_margin():
    runs = [run("a", {"m": {1: 1.0, 2: 1.0}}), run("b", {"m": {1: 1.1, 2: 1.0}}),
            run("c", {"m": {1: 1.0, 2: 0.7}})]
    cal = calibrate(spec(chk(), settings=CalibrationSpec(relative_floor=0)), runs)
    (c,) = cal.checks
    assert c.status == CALIBRATED
    assert c.measured == pytest.approx(0.3)  # b vs c at step 2... the largest of every ordered pair
    assert c.per_run == pytest.approx((0.3, 0.3, 0.3))
    assert c.check.threshold == pytest.approx(0.45)
    assert c.check.measured_max_deviation == pytest.approx(0.3)
    assert "max run-to-run deviation 0.3 x margin 1.5 = 0.45" in c.check.derivation


def test_percentile_deviation_uses_the_check_engine_statistic():
    runs = noisy_runs(3)
    cal = calibrate(spec(chk(scope="percentile", percentile=80)), runs)
    (c,) = cal.checks
    expected = max(float(np.percentile([abs(a.series["m"][s] - b.series["m"][s]) for s in STEPS], 80))
                   for a in runs for b in runs if a is not b)
    assert c.measured == pytest.approx(expected)
    assert c.check.threshold == round_up(expected * 1.5)


def test_relative_and_points_and_final_scopes():
    runs = [run(n, {"r": {s: 10.0 + d for s in STEPS}, "eval/acc": {0: 0.5 + d / 10, 10: 0.6, 20: 0.7 + d / 10}})
            for n, d in (("a", 0.0), ("b", 1.0), ("c", 0.5))]
    cal = calibrate(spec(chk("r", "relative", scope="final"),
                         chk("eval/acc", scope="points", points=[0, 10, 20, 30])), runs)
    rel, points = cal.checks
    assert rel.measured == pytest.approx(0.1)  # 11 vs 10, relative to the golden run's 10
    assert points.measured == pytest.approx(0.1)
    assert points.compared_steps == (0, 10, 20)  # step 30 was never logged: stays uncalibrated
    assert set(cal.baseline.golden_table["eval/acc"]) == {0, 10, 20}


def test_floors_bind_when_runs_agree():
    identical = [run(n, {"k3": {s: 1e-14 for s in STEPS}, "len": {s: 4.0 for s in STEPS},
                         "rew": {s: 0.5 for s in STEPS}}) for n in "abc"]
    settings = CalibrationSpec(floors={"k3": 1e-4}, relative_floor=0.02)
    cal = calibrate(spec(chk("k3", operator="<="), chk("len", "relative"), chk("rew"), settings=settings), identical)
    k3, length, reward = cal.checks
    # the declared bf16-sized floor is capped at 1000 x the case's own healthy level (fp32: 1e-14)
    assert k3.check.threshold == 1e-11 and "calibration.floors 0.0001 capped at floor_headroom 1000 x the case's " \
        "own level 1e-14" in k3.check.derivation
    assert length.check.threshold == 0.02 and "relative floor 0.02" in length.floor_source
    assert reward.check.threshold == pytest.approx(0.01)  # 0.02 x max |golden| 0.5
    assert "threshold = the floor" in reward.check.derivation


def test_a_declared_floor_holds_where_the_cases_own_level_is_near_it():
    """A bf16 rollout's healthy k3 is ~1e-4: the seed's floor applies unchanged."""
    runs = [run(n, {"k3": {s: 2e-4 + 1e-6 * i for s in STEPS}}) for i, n in enumerate("abc")]
    cal = calibrate(spec(chk("k3", operator="<="), settings=CalibrationSpec(floors={"k3": 1e-3})), runs)
    (k3,) = cal.checks
    assert k3.check.threshold == 1e-3 and k3.floor_source == "calibration.floors 0.001"


def test_the_floor_headroom_is_a_setting():
    runs = [run(n, {"k3": {s: 1e-14 for s in STEPS}}) for n in "abc"]
    settings = CalibrationSpec(floors={"k3": 1e-4}, floor_headroom=1e6)
    (k3,) = calibrate(spec(chk("k3", operator="<="), settings=settings), runs).checks
    assert k3.check.threshold == 1e-8


def test_binomial_floor_for_eval_accuracy():
    runs = [run(n, {"eval/accuracy": {0: 0.5, 15: 0.9}}) for n in "abc"]
    cal = calibrate(spec(chk("eval/accuracy", scope="points", points=[0, 15])), runs,
                    eval_set_size={"eval/accuracy": 18})
    (c,) = cal.checks
    assert c.floor == pytest.approx(2 * math.sqrt(0.25 / 18))
    assert c.check.threshold == 0.24 and "n=18, p=0.5" in c.floor_source
    # the spec's declared size wins over one read from the runs' config
    declared = calibrate(spec(chk("eval/accuracy", scope="points", points=[0, 15]),
                              settings=CalibrationSpec(eval_set_size={"eval/accuracy": 1000})), runs,
                         eval_set_size={"eval/accuracy": 18})
    assert declared.checks[0].floor == pytest.approx(2 * math.sqrt(0.25 / 1000))


def test_a_zero_threshold_is_refused_with_the_key_to_fix():
    zeros = [run(n, {"m": {1: 0.0, 2: 0.0}}) for n in "ab"]
    with pytest.raises(UsageError, match=r"s.yaml: calibration.floors.m: .* threshold would be 0; declare a floor"):
        calibrate(spec(chk()), zeros)


def test_broken_runs_cannot_be_calibrated_from():
    good = run("good", {"m": {1: 1.0}})
    with pytest.raises(CalibrationError, match="m is missing from calibration run lacking"):
        calibrate(spec(chk()), [good, run("lacking", {"x": {1: 1.0}})])
    with pytest.raises(CalibrationError, match="m is non-finite at step 1 in calibration run nan"):
        calibrate(spec(chk()), [good, run("nan", {"m": {1: math.nan}})])
    with pytest.raises(CalibrationError, match="no calibration runs"):
        calibrate(spec(chk()), [])


def test_value_checks_and_greater_than_are_kept_and_unlogged_points_uncalibrated():
    runs = [run(n, {"m": {1: 1.0 + d}, "eval/a": {5: 0.5}}) for n, d in (("a", 0.0), ("b", 0.1))]
    cal = calibrate(spec(chk(method="value", threshold=3.0), chk(operator=">", threshold=0.5, scope="final"),
                         chk("eval/a", scope="points", points=[10, 20])), runs)
    value, greater, never = cal.checks
    assert (value.status, value.check.threshold) == (KEPT, 3.0)
    assert (greater.status, greater.check.threshold) == (KEPT, 0.5)
    assert never.status == UNCALIBRATED and never.check.derivation.startswith("uncalibrated:")


def test_metric_aliases_apply_to_calibration_runs():
    runs = [run(n, {"rollout_corr/k3_kl": {1: v}}) for n, v in (("a", 1.0), ("b", 1.2))]
    cal = calibrate(spec(chk("k3"), metric_aliases=MappingProxyType({"k3": "rollout_corr/k3_kl"})), runs)
    assert cal.baseline.golden_table["k3"][1] == pytest.approx(1.1)


def test_candidate_passes_its_own_runs_and_catches_a_shift():
    runs = noisy_runs(4, seed=1)
    checks = (chk(scope="percentile", percentile=80), chk("m", "relative", scope="stepwise"))
    cal = calibrate(spec(*checks, steps=StepPolicy(expected=20, exact=True)), runs)
    for trace in runs:
        assert compare(cal.baseline, trace).verdict.status == PASS
    shifted = run("shifted", {"m": {s: v + 0.5 for s, v in runs[0].series["m"].items()}})
    assert compare(cal.baseline, shifted).verdict.status == FAIL


def test_leave_one_out_flags_an_outlier_run_only():
    runs = noisy_runs(4, sd=0.01, seed=2)
    odd = run("odd", {"m": {s: v + 0.3 for s, v in runs[3].series["m"].items()}})
    check = chk(scope="percentile", percentile=80)
    clean = leave_one_out(spec(check), runs)
    assert clean.false_alarms == 0 and clean.false_alarm_rate == 0.0
    mixed = leave_one_out(spec(check), runs[:3] + [odd], ["r0", "r1", "r2", "odd"])
    statuses = {h.label: h.status for h in mixed.held_out}
    assert statuses["odd"] == FAIL and mixed.false_alarms >= 1
    assert any("m[percentile]" in f for f in next(h for h in mixed.held_out if h.label == "odd").failing)


def test_leave_one_out_from_a_single_run_uses_the_floors():
    runs = noisy_runs(2, sd=0.001)
    result = leave_one_out(spec(chk(), settings=CalibrationSpec(relative_floor=0.1)), runs)
    assert [h.status for h in result.held_out] == [PASS, PASS]


def test_sample_size_warnings():
    assert "N=2 runs" in sample_size_warnings(2, 1.5, None)[0]
    assert sample_size_warnings(3, 1.5, leave_one_out(spec(chk()), noisy_runs(3, sd=0.001))) == []
    flagged = leave_one_out(spec(chk(scope="percentile", percentile=80)),
                            noisy_runs(2, sd=0.01) + [run("odd", {"m": {s: 3.0 for s in STEPS}})])
    assert any("leave-one-out" in w for w in sample_size_warnings(3, 1.5, flagged))
    assert exceed_chance(3) == 0.25
