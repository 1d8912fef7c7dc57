"""A check kind brings its own calibration rule and its own minimum detectable effect: calibration and power ask
the kind (``Scope.calibrate``, ``power``, ``half_power_shift``, ``measured_shift``) and fall back to the generic
rules only through ``job.default()``; the example plugin's ``median`` kind is the third-party case."""

from __future__ import annotations

import importlib
import math
import statistics
from dataclasses import replace
from pathlib import Path
from types import MappingProxyType

import numpy as np
import pytest

import autotest.scopes as scopes
from autotest.calibration.review import _threshold_rows
from autotest.calibration.thresholds import CALIBRATED, calibrate, round_up
from autotest.errors import UsageError
from autotest.inputs.baseline import Baseline, CalibrationSpec, CheckSpec
from autotest.judge.checks import evaluate_check
from autotest.judge.model import FAIL
from autotest.judge.power import describe_mde, gate_power, half_power_shift, measured_shift
from autotest.judge.trace import Trace
from autotest.judge.verdict import golden_trace
from autotest.scopes.kind import Scope, in_range, passes
from tests.helpers import ROOT

STEPS = range(1, 21)


def _run(rng: np.random.Generator, shift: float = 0.0, name: str = "run") -> Trace:
    values = {s: s / 20 + float(rng.normal(0, 0.02)) + shift for s in STEPS}
    return Trace(name, MappingProxyType({"reward": MappingProxyType(values)}), train_steps=tuple(STEPS))


class MeanError(Scope):
    """``scope: mean-error``: the mean per-step error, with a rule of its own for each stage that asks."""

    name = "mean-error"
    asked: list[str] = []

    def evaluate(self, spec, job):
        points, _, _ = job.compare(spec, in_range(job.gold, job.calibrated), job.cur, job.gold)
        value = statistics.fmean(points.error)
        return job.decide(passes(value, spec.operator, spec.threshold), f"mean error {value:g}", points=points,
                          observed=value)

    def calibrate(self, spec, job):
        self.asked.append("calibrate")
        per_run = [job.statistic(run, job.golden) for run in job.runs]
        return job.calibrated(3 * max(per_run), "mean-error rule: 3 x the largest mean error", rule="mean x 3",
                              measured_what="max |mean error|", per_run=per_run, measured=max(per_run),
                              basis="3 x max")

    def power(self, spec, job):
        self.asked.append("power")
        return job.gate_power(lambda k, runs: spec.threshold / math.sqrt(k), None, f"mean-error power, N={job.runs}")

    def half_power_shift(self, spec, job):
        return 3 * spec.threshold

    def measured_shift(self, spec, job, current, observed):
        return 42.0


@pytest.fixture
def registry(monkeypatch):
    """Register kinds for one test (as a plugin: errors name it); the registry is restored after."""
    monkeypatch.setattr(scopes, "_KINDS", dict(scopes._KINDS))
    monkeypatch.setattr(scopes, "_PLUGINS", dict(scopes._PLUGINS))
    monkeypatch.setattr(scopes, "_plugins_loaded", True)
    return lambda kind: scopes.register(kind, f"{kind.name!r} (tests)")


def _spec(*checks: CheckSpec) -> Baseline:
    return Baseline("own", Path("own.yaml"), checks, calibration=CalibrationSpec(runs=4))


def test_calibration_and_power_use_the_kinds_own_rules_and_leave_the_built_in_kinds_alone(registry) -> None:
    kind = registry(MeanError())
    kind.asked.clear()
    mine = CheckSpec("reward", "absolute", "<", 1e9, scope="mean-error")
    stepwise = CheckSpec("reward", "absolute", "<", 1e9, scope="stepwise")
    rng = np.random.default_rng(1)
    runs = [_run(rng, name=f"r{i}") for i in range(4)]
    made = calibrate(_spec(mine, stepwise), runs)
    own, generic = made.checks
    assert own.status == CALIBRATED and own.check.derivation == "mean-error rule: 3 x the largest mean error"
    assert own.check.threshold == round_up(3 * max(own.per_run)) and own.measured == max(own.per_run)
    assert own.check.measured_max_deviation == float(f"{max(own.per_run):.4g}")
    assert (own.rule, own.floor_source) == ("mean x 3", "3 x max")
    assert "| `reward[mean-error]` | mean x 3 | gate | max \\|mean error\\| " in "\n".join(_threshold_rows(made))
    # the stepwise check beside it is calibrated exactly as without the other kind
    assert generic == calibrate(_spec(stepwise), runs).checks[0] and generic.rule == ""

    baseline = replace(made.baseline, provenance=MappingProxyType({"runs": 4}))
    check = baseline.checks[0]
    power = gate_power(baseline, check)
    assert power.basis == "mean-error power, N=4" and power.calibration_runs == 4
    assert power.mde(4) == pytest.approx(check.threshold / 2) and power.by_runs[20] == check.threshold
    assert half_power_shift(baseline, check) == 3 * check.threshold
    assert measured_shift(baseline, check, dict(runs[0].get("reward")), 0.1) == 42.0
    # calibration asks for the MDE too (can the gate fire? autotest.calibration.usefulness), then power does
    assert kind.asked == ["calibrate", "power", "power"]
    # a bound has no MDE: power never asks the kind
    assert gate_power(baseline, replace(check, method="value")) is None and len(kind.asked) == 3


class Growth(MeanError):
    """A leak gate of its own: its MDE reads as extra growth per step, whatever its check id says."""

    name = "growth"
    per_step_growth = True


def test_a_per_step_kind_reads_its_mde_per_step_by_its_kind_not_its_name(registry) -> None:
    registry(Growth())
    check = CheckSpec("reward", "absolute", "<", 1e9, scope="growth")
    made = calibrate(_spec(check), [_run(np.random.default_rng(2), name=f"r{i}") for i in range(4)])
    baseline = replace(made.baseline, provenance=MappingProxyType({"runs": 4}))
    power = gate_power(baseline, baseline.checks[0])
    assert power.per_step and describe_mde(power).endswith("/step") and "[slope" not in power.check_id
    assert not gate_power(baseline, replace(baseline.checks[0], scope="stepwise")).per_step


class Raising(MeanError):
    def calibrate(self, spec, job):
        raise ZeroDivisionError("division by zero")

    def power(self, spec, job):
        raise KeyError("noise")


class WrongAnswer(MeanError):
    def calibrate(self, spec, job):
        return 0.5

    def power(self, spec, job):
        return 0.5


@pytest.mark.parametrize("kind, calibrating, powering", [
    (Raising(), "check kind plugin 'mean-error' (tests) failed in calibrate: ZeroDivisionError: division by zero; "
                "fix or uninstall the package that provides it",
     "check kind plugin 'mean-error' (tests) failed in power: KeyError: 'noise'; fix or uninstall the package"),
    (WrongAnswer(), "check kind plugin 'mean-error' (tests): calibrate returned 0.5 for reward[mean-error]; return "
                    "job.calibrated(...), job.uncalibrated(why) or job.default()",
     "check kind plugin 'mean-error' (tests): power returned 0.5 for reward[mean-error]; return job.gate_power"),
])
def test_a_plugins_broken_rule_is_one_line_naming_it(registry, kind, calibrating, powering) -> None:
    registry(kind)
    check = CheckSpec("reward", "absolute", "<", 0.1, scope="mean-error", measured_max_deviation=0.05)
    rng = np.random.default_rng(2)
    with pytest.raises(UsageError) as info:
        calibrate(_spec(check), [_run(rng) for _ in range(3)])
    assert str(info.value) == calibrating
    with pytest.raises(UsageError) as info:
        gate_power(replace(_spec(check), golden_table={"reward": {1: 0.0}}), check)
    assert str(info.value).startswith(powering)


@pytest.fixture
def example_median(registry, monkeypatch):
    """The example plugin's ``median`` kind (examples/plugin), registered as its entry point would."""
    monkeypatch.syspath_prepend(str(ROOT / "examples" / "plugin"))
    module = importlib.import_module("rl_autotest_example_plugin.median")
    registry(module.Median)
    return module


def test_the_example_plugins_median_rule_sets_its_threshold_from_the_runs_loo_medians(example_median) -> None:
    check = CheckSpec("reward", "absolute", "<", 1e9, scope="median")
    rng = np.random.default_rng(3)
    made = calibrate(_spec(check), [_run(rng, name=f"r{i}") for i in range(10)])
    c = made.checks[0]
    assert c.check.derivation.startswith("calibrated by the median rule (rl-autotest-example-plugin), N=10: each "
                                         "run's median absolute error against the mean of the others [")
    assert c.check.threshold == round_up(2 * statistics.median(c.per_run))
    # a clean run's median |error| is 0.674 sd x sqrt(1 + 1/9) for a seed sd of 0.02: about 0.014, doubled
    assert 0.022 < c.check.threshold < 0.036
    assert "| `reward[median]` | median (leave-one-out) | gate | max loo median " in "\n".join(_threshold_rows(made))
    # too few runs for leave-one-out: the generic rule
    few = calibrate(_spec(check), [_run(rng) for _ in range(2)]).checks[0]
    assert few.check.derivation.startswith("calibrated, N=2: max run-to-run deviation")


def test_the_example_plugins_median_mde_is_caught_about_four_times_in_five(example_median) -> None:
    check = CheckSpec("reward", "absolute", "<", 1e9, scope="median")
    rng = np.random.default_rng(4)
    made = calibrate(_spec(check), [_run(rng, name=f"r{i}") for i in range(10)])
    baseline = replace(made.baseline, provenance=MappingProxyType({"runs": 10}))
    spec = baseline.checks[0]
    power = gate_power(baseline, spec)
    assert power.basis.startswith("median rule (approximate): threshold ")
    assert spec.threshold < power.mde(1) and power.mde(4) < power.mde(1)
    golden = golden_trace(baseline)
    judged = [[evaluate_check(spec, baseline, golden, _run(rng, shift), True).status == FAIL for _ in range(300)]
              for shift in (0.0, power.mde(1))]
    assert sum(judged[0]) / 300 < 0.02  # a clean run's median error must double to false-alarm
    assert 0.65 < sum(judged[1]) / 300 < 0.95
    # a threshold the generic rule made (here: written by hand) gets the per-step rule's MDE
    by_hand = replace(spec, derivation="by hand", measured_max_deviation=0.05)
    assert gate_power(baseline, by_hand).basis.startswith("per-step (approximate)")
