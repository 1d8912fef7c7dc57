"""Adaptive replicates: the sequential design keeps the false-alarm budget (simulation) and spends fewer runs."""

from __future__ import annotations

from pathlib import Path
from types import MappingProxyType

import numpy as np

from autotest.calibration.thresholds import calibrate
from autotest.inputs.baseline import Baseline, CalibrationSpec, CheckSpec
from autotest.judge.checks import evaluate_check
from autotest.judge.model import FAIL, PASS, CheckResult
from autotest.judge.replicate_mean import for_the_mean, mean_trace
from autotest.judge.sequential import ALPHA_SHARE, MORE, STOP, decide_first_look, requantile
from autotest.judge.trace import Trace
from autotest.judge.verdict import golden_trace

METRIC = "response/rewards/mean"
STEPS = np.arange(1, 31)
CURVE = 0.9 / (1 + np.exp(-(STEPS - 15) / 3))
POOLED = CheckSpec(METRIC, "absolute", "<", 1e9, scope="pooled", window=(1, 30))
SPEC = Baseline("synthetic", Path("synthetic.yaml"), (POOLED,),
                calibration=CalibrationSpec(runs=5, false_alarm_budget=0.05))
K_MAX = 4


def _run(rng: np.random.Generator, shift: float = 0.0) -> Trace:
    values = CURVE + rng.normal(0, 0.01) + rng.normal(0, 0.02, len(STEPS)) + shift
    series = MappingProxyType({METRIC: MappingProxyType({int(s): float(v) for s, v in zip(STEPS, values)})})
    return Trace("run", series, train_steps=tuple(int(s) for s in STEPS))


def _adaptive(baseline: Baseline, rng: np.random.Generator, shift: float) -> tuple[str, int]:
    """(status, runs) of one adaptive verdict."""
    golden = golden_trace(baseline)
    first_look = requantile(baseline, ALPHA_SHARE[0])
    first = _run(rng, shift)
    result = evaluate_check(first_look.checks[0], first_look, golden, first, True)
    if decide_first_look([result]) == STOP:
        return result.status, 1
    runs = [first, *(_run(rng, shift) for _ in range(K_MAX - 1))]
    second, _ = for_the_mean(requantile(baseline, ALPHA_SHARE[1]), K_MAX)
    mean = mean_trace(runs, [f"r{i}" for i in range(K_MAX)])
    return evaluate_check(second.checks[0], second, golden, mean, True).status, K_MAX


def _fixed(baseline: Baseline, rng: np.random.Generator, shift: float, k: int) -> str:
    judged, _ = for_the_mean(baseline, k)
    runs = [_run(rng, shift) for _ in range(k)]
    current = runs[0] if k == 1 else mean_trace(runs, [f"r{i}" for i in range(k)])
    return evaluate_check(judged.checks[0], judged, golden_trace(baseline), current, True).status


def test_the_first_look_stops_on_a_failure_or_well_inside_and_continues_in_the_grey_zone() -> None:
    def result(status: str, observed: float) -> CheckResult:
        return CheckResult("x[pooled]", status, "", scope="pooled", observed=observed, threshold=4.0)
    assert decide_first_look([result(FAIL, 5.0)]) == STOP
    assert decide_first_look([result(PASS, 1.0)]) == STOP
    assert decide_first_look([result(PASS, 3.0)]) == MORE
    assert decide_first_look([result(PASS, -2.5)]) == MORE


def test_alpha_spending_keeps_the_false_alarm_budget_and_clean_verdicts_cost_little() -> None:
    """Averaged over calibrations, clean runs false-alarm at most at the budget; most stop after one run."""
    rng = np.random.default_rng(21)
    alarms, runs, verdicts = 0, 0, 0
    for _ in range(15):
        baseline = calibrate(SPEC, [_run(rng) for _ in range(5)]).baseline
        for _ in range(40):
            status, used = _adaptive(baseline, rng, 0.0)
            alarms += status == FAIL
            runs += used
            verdicts += 1
    assert alarms / verdicts <= 0.05
    assert runs / verdicts < 2.0  # cheaper on clean runs than a fixed K = 2


def test_adaptive_catches_more_than_one_run_on_a_shift() -> None:
    """On a shift the grey zone sends runs to the second look: more power than one run (benchmarks/
    bench_adaptive.py has the full table against fixed K = 1, 2, 4)."""
    rng = np.random.default_rng(5)
    caught_adaptive = caught_single = total = 0
    for _ in range(6):
        baseline = calibrate(SPEC, [_run(rng) for _ in range(5)]).baseline
        for _ in range(20):
            caught_adaptive += _adaptive(baseline, rng, -0.03)[0] == FAIL
            caught_single += _fixed(baseline, rng, -0.03, 1) == FAIL
            total += 1
    assert caught_adaptive > caught_single, (caught_adaptive, caught_single, total)
