"""Calibration of pooled checks: noise table, leave-one-out spread, t-quantile threshold, false-alarm rate."""

from __future__ import annotations

from pathlib import Path
from types import MappingProxyType

import numpy as np
import pytest

from autotest.calibration.thresholds import calibrate, leave_one_out
from autotest.inputs.baseline import Baseline, CalibrationSpec, CheckSpec, load_baseline
from autotest.inputs.baseline_writer import baseline_yaml
from autotest.judge.checks import evaluate_check
from autotest.judge.model import FAIL, PASS
from autotest.judge.per_step_noise import roughness, z_scores
from autotest.judge.trace import Trace
from autotest.judge.verdict import golden_trace


def _student_t():
    """SciPy's t distribution, the reference: SciPy comes with the test extras (`bootstrap.sh --all`), not the
    grpo install, so `pytest tests/unit` on the gate's install skips this test instead of failing to collect."""
    return pytest.importorskip("scipy.stats", reason="SciPy is a test extra: bash scripts/bootstrap.sh --all").t


METRIC = "response/rewards/mean"
STEPS = np.arange(1, 31)
CURVE = 0.9 / (1 + np.exp(-(STEPS - 15) / 3))


def _run(rng: np.random.Generator, shift: float = 0.0, name: str = "run") -> Trace:
    # a seed learns a little faster or slower as a whole (correlated across steps) plus per-step noise
    values = CURVE + rng.normal(0, 0.01) + rng.normal(0, 0.02, len(STEPS)) + shift
    series = MappingProxyType({METRIC: MappingProxyType({int(s): float(v) for s, v in zip(STEPS, values)})})
    return Trace(name, series, train_steps=tuple(int(s) for s in STEPS))


SPEC = Baseline("synthetic", Path("synthetic.yaml"),
                (CheckSpec(METRIC, "absolute", "<", 1e9, scope="pooled", window=(1, 30)),),
                calibration=CalibrationSpec(runs=5, false_alarm_budget=0.05))


def test_threshold_is_the_t_quantile_times_the_leave_one_out_spread() -> None:
    rng = np.random.default_rng(0)
    runs = [_run(rng, name=f"r{i}") for i in range(5)]
    made = calibrate(SPEC, runs)
    check = made.checks[0]
    n = 5
    spread = np.sqrt(np.mean(np.square(check.per_run))) * np.sqrt((1 + 1 / n) / (1 + 1 / (n - 1)))
    student_t = _student_t()
    quantile = student_t.ppf(1 - 0.05 / 2, df=n - 1)  # one pooled gate check takes the whole budget
    assert check.proposed == pytest.approx(quantile * spread)
    assert made.baseline.checks[0].threshold >= check.proposed  # rounded up, never down
    assert "t(4 dof) quantile" in made.baseline.checks[0].derivation
    assert set(made.baseline.noise_table[METRIC]) == {int(s) for s in STEPS}


def test_fresh_clean_runs_stay_within_the_budget_and_a_shift_is_caught() -> None:
    rng = np.random.default_rng(1)
    baseline = calibrate(SPEC, [_run(rng) for _ in range(5)]).baseline
    golden = golden_trace(baseline)
    check = baseline.checks[0]
    fresh = [evaluate_check(check, baseline, golden, _run(rng), True).status for _ in range(300)]
    assert fresh.count(FAIL) / len(fresh) <= 0.05  # the declared budget (t quantile pays for N = 5)
    shifted = [evaluate_check(check, baseline, golden, _run(rng, shift=-0.06), True).status for _ in range(50)]
    assert shifted.count(FAIL) / len(shifted) >= 0.9  # a 3-sigma-per-step shift, 0.06 on a 0.9 curve


def test_leave_one_out_self_check_runs_pooled_checks() -> None:
    rng = np.random.default_rng(2)
    runs = [_run(rng, name=f"r{i}") for i in range(5)]
    self_check = leave_one_out(SPEC, runs)
    assert [h.status for h in self_check.held_out] == [PASS] * 5


def test_too_few_runs_leave_the_check_uncalibrated() -> None:
    rng = np.random.default_rng(3)
    made = calibrate(SPEC, [_run(rng), _run(rng)])
    assert made.checks[0].status == "uncalibrated"
    assert "3 or more calibration runs" in made.baseline.checks[0].derivation


def _tilted(rng: np.random.Generator, tilt: float, name: str = "run") -> Trace:
    # a slower start that catches up later: a line through the curve, zero on average
    run = _run(rng, name=name)
    values = {s: v + tilt * (s - 15.5) / 14.5 for s, v in run.series[METRIC].items()}
    return Trace(name, MappingProxyType({METRIC: MappingProxyType(values)}), train_steps=run.train_steps)


def _false_alarm_rate(statistic: str, calibrations: int = 40, fresh_runs: int = 50) -> float:
    """Averaged over calibrations: one calibration from 5 runs may be lucky or not; the budget is the average."""
    check = CheckSpec(METRIC, "absolute", "<", 1e9, scope="pooled", window=(1, 30), statistic=statistic)
    spec = Baseline("synthetic", Path("synthetic.yaml"), (check,), calibration=CalibrationSpec(runs=5))
    alarms = 0
    for seed in range(calibrations):
        rng = np.random.default_rng(100 + seed)
        baseline = calibrate(spec, [_run(rng) for _ in range(5)]).baseline
        golden = golden_trace(baseline)
        alarms += sum(evaluate_check(baseline.checks[0], baseline, golden, _run(rng), True).status == FAIL
                      for _ in range(fresh_runs))
    return alarms / (calibrations * fresh_runs)


@pytest.mark.parametrize("statistic", ["mean", "trend"])
def test_the_declared_budget_holds_on_average_over_calibrations(statistic: str) -> None:
    assert _false_alarm_rate(statistic) <= 0.06  # budget 0.05; 2,000 fresh runs over 40 calibrations


def test_a_trend_check_is_calibrated_from_its_own_statistic_and_catches_a_tilt() -> None:
    trend = CheckSpec(METRIC, "absolute", "<", 1e9, scope="pooled", window=(1, 30), statistic="trend")
    spec = Baseline("synthetic", Path("synthetic.yaml"), (trend,), calibration=CalibrationSpec(runs=5))
    rng = np.random.default_rng(2)
    made = calibrate(spec, [_run(rng) for _ in range(5)])
    assert "leave-one-out trend z" in made.baseline.checks[0].derivation
    baseline, golden = made.baseline, golden_trace(made.baseline)
    tilted = [evaluate_check(baseline.checks[0], baseline, golden, _tilted(rng, 0.08), True).status
              for _ in range(50)]
    assert tilted.count(FAIL) / len(tilted) >= 0.9


def test_calibration_records_the_calmest_runs_roughness_and_the_baseline_keeps_it(tmp_path: Path) -> None:
    """golden.roughness: the least step-to-step roughness of a calibration run, what a smoothed log is read against;
    written and read back with the baseline."""
    rng = np.random.default_rng(2)
    runs = [_run(rng, name=f"r{i}") for i in range(5)]
    baseline = calibrate(SPEC, runs).baseline
    golden = golden_trace(baseline)
    each = [roughness(z_scores(METRIC, golden, r, baseline.noise_table[METRIC])) for r in runs]
    assert baseline.roughness[METRIC] == pytest.approx(min(each)) and min(each) > 0.5  # per-step noise dominates
    path = tmp_path / "b.yaml"
    path.write_text(baseline_yaml(baseline), encoding="utf-8")
    assert load_baseline(path).roughness[METRIC] == pytest.approx(min(each), rel=1e-3)
