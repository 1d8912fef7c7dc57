"""Scope ``pooled``: per-step deviations standardised by calibrated noise, averaged over a window."""

from __future__ import annotations

import textwrap
from dataclasses import replace
from pathlib import Path
from types import MappingProxyType

import pytest

from autotest.errors import UsageError
from autotest.inputs.baseline import Baseline, CheckSpec, load_baseline
from autotest.inputs.baseline_writer import baseline_yaml
from autotest.judge.checks import evaluate_check
from autotest.judge.model import ERROR, FAIL, INFO, PASS
from autotest.scopes.pooled import pooled_statistic, step_noise
from autotest.judge.trace import Trace

METRIC = "response/rewards/mean"
STEPS = range(1, 21)
GOLDEN = {s: 0.05 * s for s in STEPS}
NOISE = {s: 0.01 for s in STEPS}
POOLED = CheckSpec(METRIC, "absolute", "<", 1.0, scope="pooled", window=(1, 20))


def _baseline(*checks: CheckSpec, noise=NOISE) -> Baseline:
    table = MappingProxyType({METRIC: MappingProxyType(GOLDEN)})
    return Baseline("b", Path("b.yaml"), tuple(checks), golden_table=table, calibrated_range=(1, 20),
                    noise_table=None if noise is None else MappingProxyType({METRIC: MappingProxyType(noise)}))


def _trace(values: dict[int, float]) -> Trace:
    return Trace("cur", MappingProxyType({METRIC: MappingProxyType(values)}), train_steps=tuple(sorted(values)))


def _golden(baseline: Baseline) -> Trace:
    return _trace(dict(baseline.golden_table[METRIC]))


def _check(spec: CheckSpec, current: dict[int, float], noise=NOISE):
    baseline = _baseline(spec, noise=noise)
    return evaluate_check(spec, baseline, _golden(baseline), _trace(current), True)


def test_a_consistent_small_shift_fails_pooled_while_every_step_passes_a_per_step_bound() -> None:
    shifted = {s: GOLDEN[s] - 0.012 for s in STEPS}  # 1.2 noise units at every step
    stepwise = CheckSpec(METRIC, "absolute", "<", 0.02)  # 2 noise units per step: blind to it
    assert _check(stepwise, shifted).status == PASS
    result = _check(POOLED, shifted)
    assert result.status == FAIL
    assert result.observed == pytest.approx(1.2)
    assert "below golden at 20/20 steps" in result.message
    assert result.first_breach_step == 1  # the running mean is beyond the bound from the start


def test_alternating_noise_of_the_same_size_passes() -> None:
    wobbly = {s: GOLDEN[s] + (0.012 if s % 2 else -0.012) for s in STEPS}
    result = _check(POOLED, wobbly)
    assert result.status == PASS and result.observed == pytest.approx(0.0, abs=1e-9)


def test_small_early_values_weigh_by_their_own_noise() -> None:
    noise = {s: (0.001 if s <= 5 else 0.05) for s in STEPS}  # early rewards ~0.006 vary by ~0.001
    early = CheckSpec(METRIC, "absolute", "<", 1.0, scope="pooled", window=(1, 5))
    current = {s: GOLDEN[s] - (0.003 if s <= 5 else 0.0) for s in STEPS}  # 3 noise units early, invisible late
    assert _check(early, current, noise).status == FAIL
    assert _check(replace(early, window=(6, 20)), current, noise).status == PASS


def test_uncalibrated_missing_steps_and_non_finite() -> None:
    assert _check(POOLED, dict(GOLDEN), noise=None).status == INFO
    partial = {s: GOLDEN[s] for s in STEPS if s != 7}
    result = _check(POOLED, partial)
    assert result.status == ERROR and "7" in result.message
    broken = {**GOLDEN, 3: float("nan")}
    assert _check(POOLED, broken).status == FAIL


def test_statistic_and_noise_helpers() -> None:
    stat = pooled_statistic([1, 2], {1: 1.0, 2: 3.0}, {1: 0.0, 2: 0.0}, {1: 1.0, 2: 1.0})
    assert stat.z == (1.0, 3.0) and stat.mean_z == 2.0 and stat.same_side() == 2
    assert stat.first_crossing(1.5) == 2
    runs = [{1: 0.0, 2: 0.0, 3: 0.0}, {1: 0.0, 2: 0.0, 3: 2.0}]
    noise = step_noise(runs, [1, 2, 3], smooth=0)
    assert noise[3] == pytest.approx(2 ** 0.5)
    assert noise[1] == pytest.approx(0.25 * 2 ** 0.5)  # runs that agree exactly get a floor, not 0


def _yaml(tmp_path: Path, check: str) -> Path:
    path = tmp_path / "b.yaml"
    path.write_text(textwrap.dedent(f"""\
        golden:
          table: {{{METRIC}: {{1: 0.1, 2: 0.2}}}}
          noise: {{{METRIC}: {{1: 0.01, 2: 0.02}}}}
        checks:
        - {check}
        """))
    return path


def test_pooled_checks_load_and_round_trip(tmp_path: Path) -> None:
    path = _yaml(tmp_path, f"{{metric: {METRIC}, method: absolute, operator: <, threshold: 3.1, scope: pooled, "
                           "window: [1, 2]}")
    baseline = load_baseline(path)
    assert baseline.checks[0].check_id == f"{METRIC}[pooled 1-2]"
    assert dict(baseline.noise_table[METRIC]) == {1: 0.01, 2: 0.02}
    again = tmp_path / "again.yaml"
    again.write_text(baseline_yaml(baseline))
    assert load_baseline(again).noise_table == baseline.noise_table
    assert load_baseline(again).checks == baseline.checks


def test_pooled_needs_method_absolute(tmp_path: Path) -> None:
    path = _yaml(tmp_path, f"{{metric: {METRIC}, method: relative, operator: <, threshold: 3, scope: pooled}}")
    with pytest.raises(UsageError, match=r"checks\[0\]\.method: 'relative' cannot be pooled.*method: absolute"):
        load_baseline(path)


TREND = CheckSpec(METRIC, "absolute", "<", 1.0, scope="pooled", window=(1, 20), statistic="trend")


def test_trend_sees_a_slow_start_that_catches_up_where_the_mean_does_not() -> None:
    # learning delayed early (2 noise units below golden), then ahead late: the mean is ~0, the line tilts
    tilted = {s: GOLDEN[s] + 0.01 * (-2 + 4 * (s - 1) / 19) for s in STEPS}
    mean = _check(POOLED, tilted)
    assert mean.status == PASS and mean.observed == pytest.approx(0.0, abs=1e-9)
    trend = _check(TREND, tilted)
    assert trend.status == FAIL
    assert trend.observed == pytest.approx(4.0)
    assert "rises by +4 x calibrated noise from first to last step" in trend.message
    assert trend.check_id == f"{METRIC}[pooled trend 1-20]"
    assert trend.parameters["statistic"] == "trend"
    assert trend.first_breach_step == 2  # the deviation climbs above its start from step 2 on


def test_trend_ignores_a_constant_offset() -> None:
    shifted = {s: GOLDEN[s] - 0.03 for s in STEPS}
    assert _check(POOLED, shifted).status == FAIL
    result = _check(TREND, shifted)
    assert result.status == PASS and result.observed == pytest.approx(0.0, abs=1e-9)


def test_trend_loads_round_trips_and_is_pooled_only(tmp_path: Path) -> None:
    path = _yaml(tmp_path, f"{{metric: {METRIC}, method: absolute, operator: <, threshold: 3.1, scope: pooled, "
                           "window: [1, 2], statistic: trend}")
    baseline = load_baseline(path)
    assert baseline.checks[0].statistic == "trend"
    again = tmp_path / "again.yaml"
    again.write_text(baseline_yaml(baseline))
    assert load_baseline(again).checks == baseline.checks
    wrong_scope = _yaml(tmp_path, f"{{metric: {METRIC}, method: absolute, operator: <, threshold: 3, "
                                  "scope: window, window: [1, 2], statistic: trend}")
    with pytest.raises(UsageError, match=r"checks\[0\]\.statistic: only applies to scope 'pooled'"):
        load_baseline(wrong_scope)
    unknown = _yaml(tmp_path, f"{{metric: {METRIC}, method: absolute, operator: <, threshold: 3, scope: pooled, "
                              "statistic: slope}")
    with pytest.raises(UsageError, match=r"checks\[0\]\.statistic: .*slope.*mean, trend"):
        load_baseline(unknown)
