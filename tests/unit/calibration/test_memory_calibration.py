"""Calibrating the memory gates from N runs' spread: the leak gate (scope slope) and the peak gate, and their MDE."""

from __future__ import annotations

from pathlib import Path
from types import MappingProxyType

import numpy as np
import pytest

from autotest.calibration.thresholds import CALIBRATED, calibrate, leave_one_out
from autotest.inputs.baseline_model import Baseline, CalibrationSpec, CheckSpec
from autotest.judge.checks import evaluate_check
from autotest.judge.model import FAIL, PASS
from autotest.judge.power import describe_mde, gate_power
from autotest.judge.trace import Trace
from autotest.judge.verdict import golden_trace

RSS, PEAK = "memory/rss_mb", "memory/peak_rss_mb"
STEPS = np.arange(1, 46)
SLOPE = CheckSpec(RSS, "slowdown", "<", float("nan"), scope="slope", placeholder=True)
PEAK_GATE = CheckSpec(PEAK, "relative", "<", float("nan"), scope="final", placeholder=True)
SPEC = Baseline(name="m", path=Path("m.yaml"), checks=(SLOPE, PEAK_GATE), golden_table=MappingProxyType({}),
                calibration=CalibrationSpec(runs=10))


def _run(rng: np.random.Generator, leak_mb_per_step: float = 0.0, name: str = "run") -> Trace:
    """A memory curve like tiny-grpo's: ~420 MiB, +-2 MiB per step, a small seed-to-seed drift."""
    rss = 420 + rng.normal(0, 1) + rng.normal(0, 0.03) * STEPS + rng.normal(0, 2, len(STEPS))
    rss = rss + leak_mb_per_step * (STEPS - 1)
    peak = np.maximum.accumulate(rss + 3)
    series = {RSS: dict(zip(map(int, STEPS), map(float, rss))), PEAK: dict(zip(map(int, STEPS), map(float, peak)))}
    frozen = MappingProxyType({m: MappingProxyType(v) for m, v in series.items()})
    return Trace(name, frozen, tuple(int(s) for s in STEPS))


def _calibrated(seed: int = 0):
    rng = np.random.default_rng(seed)
    return calibrate(SPEC, [_run(rng, name=f"run{i}") for i in range(10)])


def test_both_memory_gates_are_calibrated_from_the_runs_spread():
    calibration = _calibrated()
    made = {c.check.check_id: c for c in calibration.checks}
    slope, peak = made[f"{RSS}[slope]"], made[f"{PEAK}[final]"]
    assert slope.status == peak.status == CALIBRATED
    # the slope gate's measured deviation is the largest growth of one run above another's (max - min)
    assert 0 < slope.measured < 0.5 and slope.check.threshold >= slope.measured * 1.5
    assert "steps spanned" in slope.floor_source  # its floor: 1% of the level grown over the 44 steps
    assert slope.floor == pytest.approx(0.01 * max(calibration.baseline.golden_table[RSS].values()) / 44)
    assert peak.floor_source == "relative floor 0.01" and peak.check.threshold >= 0.01


def test_a_clean_run_passes_and_a_leak_fails_only_the_memory_gates():
    calibration = _calibrated()
    baseline, golden = calibration.baseline, golden_trace(calibration.baseline)
    rng = np.random.default_rng(99)
    clean = _run(rng)
    assert [evaluate_check(c, baseline, golden, clean, True).status for c in baseline.checks] == [PASS, PASS]
    leaking = _run(rng, leak_mb_per_step=4.0)
    assert [evaluate_check(c, baseline, golden, leaking, True).status for c in baseline.checks] == [FAIL, FAIL]
    assert leave_one_out(SPEC, [_run(np.random.default_rng(i), name=f"r{i}") for i in range(10)]).false_alarms <= 1


def test_the_leak_gate_catches_its_mde_most_of_the_time_and_says_it_per_step():
    calibration = _calibrated(seed=3)
    baseline, golden = calibration.baseline, golden_trace(calibration.baseline)
    check = next(c for c in baseline.checks if c.scope == "slope")
    power = gate_power(baseline, check)
    assert power is not None and power.golden_scale is None and "slope" in power.basis
    assert describe_mde(power) == f"+{power.mde(1):.2g}/step"
    rng = np.random.default_rng(5)
    caught = [evaluate_check(check, baseline, golden, _run(rng, power.mde(1)), True).status == FAIL for _ in range(40)]
    alarms = [evaluate_check(check, baseline, golden, _run(rng), True).status == FAIL for _ in range(40)]
    assert sum(caught) / 40 >= 0.6, sum(caught)
    assert sum(alarms) / 40 <= 0.1, sum(alarms)
