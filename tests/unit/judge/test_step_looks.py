"""Sequential looks over steps: the budget spent over the looks keeps the false-alarm rate (simulated clean runs from
the pooled gate's noise model), and a shifted run is decided at an early look."""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path
from types import MappingProxyType

import numpy as np

from autotest.calibration.thresholds import calibrate
from autotest.inputs.baseline import Baseline, CalibrationSpec, CheckSpec
from autotest.judge.checks import decide_early, evaluate_check
from autotest.judge.model import FAIL, PASS
from autotest.judge.step_looks import FINAL_SHARE, LOOK_FRACTIONS, with_step_looks
from autotest.scopes.pooled import pooled_statistic
from autotest.judge.structural import FailFastStop
from autotest.judge.trace import Trace
from autotest.judge.verdict import golden_trace

METRIC = "response/rewards/mean"
STEPS = np.arange(1, 31)
CURVE = 0.9 / (1 + np.exp(-(STEPS - 15) / 3))
POOLED = CheckSpec(METRIC, "absolute", "<", 1e9, scope="pooled", window=(1, 30))
BUDGET = 0.05
#: ten calibration runs, as the embedded cases have (with five the end-only gate itself strays past the budget)
RUNS = 10
SPEC = Baseline("synthetic", Path("synthetic.yaml"), (POOLED,),
                calibration=CalibrationSpec(runs=RUNS, false_alarm_budget=BUDGET))


def _run(rng: np.random.Generator, shift: float = 0.0, model: str = "offset", last: int = 30) -> Trace:
    """A clean run of the pooled gate's noise model: a seed's offset common to every step plus step noise
    (``offset``), deviations that wander from step to step (``ar``: AR(1), correlation 0.8), or a seed's offset
    shared by the first six steps only, independent steps after (``early``: a window's spread then says little of
    its prefixes')."""
    if model == "offset":
        noise = rng.normal(0, 0.01) + rng.normal(0, 0.02, len(STEPS))
    elif model == "early":
        noise = rng.normal(0, 0.02, len(STEPS))
        noise[:6] = rng.normal(0, 0.02) + rng.normal(0, 0.002, 6)
    else:
        noise = np.empty(len(STEPS))
        noise[0] = rng.normal(0, 0.02)
        for i in range(1, len(STEPS)):
            noise[i] = 0.8 * noise[i - 1] + rng.normal(0, 0.02 * math.sqrt(1 - 0.8 ** 2))
    values = CURVE + noise + shift
    kept = [(int(s), float(v)) for s, v in zip(STEPS, values) if s <= last]
    series = MappingProxyType({METRIC: MappingProxyType(dict(kept))})
    return Trace("run", series, train_steps=tuple(s for s, _ in kept))


def _alarm_rates(model: str, calibrations: int = 30, runs: int = 60) -> tuple[float, float, float]:
    """False-alarm rates on the same clean runs: with the looks, judged once at the end (no looks), and with looks
    that spend nothing (each look's prefix mean held to the end's threshold, the mistake the spending prevents)."""
    rng = np.random.default_rng({"offset": 43, "ar": 44, "early": 45}[model])
    alarms = plain_alarms = naive_alarms = total = 0
    for _ in range(calibrations):
        plain = calibrate(SPEC, [_run(rng, model=model) for _ in range(RUNS)]).baseline
        looking = with_step_looks(plain)
        golden, noise = golden_trace(plain), plain.noise_table[METRIC]
        for _ in range(runs):
            run = _run(rng, model=model)
            alarms += evaluate_check(looking.checks[0], looking, golden, run, True).status == FAIL
            end = evaluate_check(plain.checks[0], plain, golden, run, True).status == FAIL
            plain_alarms += end
            prefixes = [pooled_statistic([int(s) for s in STEPS[:math.ceil(f * len(STEPS))]], run.get(METRIC),
                                         golden.get(METRIC), noise).observed for f in LOOK_FRACTIONS]
            naive_alarms += end or any(v >= plain.checks[0].threshold for v in prefixes)
            total += 1
    return alarms / total, plain_alarms / total, naive_alarms / total


def test_looks_over_the_steps_keep_the_false_alarm_budget_on_clean_runs() -> None:
    """Averaged over calibrations, clean runs judged at every look false-alarm at most at the budget, and no more
    often than judged once at the end, whatever the correlation of the steps; looks that spend nothing would not."""
    for model in ("offset", "ar", "early"):
        rate, plain, naive = _alarm_rates(model)
        assert rate <= BUDGET and rate <= plain, (model, rate, plain)
        if model == "ar":  # the simulation tells a design that breaks the budget
            assert naive > BUDGET, (model, naive)


def test_a_shifted_run_is_decided_at_an_early_look_and_a_clean_prefix_is_not() -> None:
    rng = np.random.default_rng(7)
    plain = calibrate(SPEC, [_run(rng) for _ in range(RUNS)]).baseline
    looking = with_step_looks(plain)
    # the end's threshold moves to FINAL_SHARE of the budget, and the derivation says so
    assert looking.checks[0].threshold > plain.checks[0].threshold
    assert f"t quantile at {FINAL_SHARE:g} of the budget" in looking.checks[0].derivation
    assert with_step_looks(looking) == looking  # applied once
    golden = golden_trace(plain)
    prefix = _run(rng, shift=-0.2, last=7)  # 7 of 30 steps: past the first look (6 steps, 20%)
    early = decide_early(looking.checks[0], looking, golden, prefix, True)
    assert early is not None and early.status == FAIL
    assert early.parameters["look"] == 1 and early.parameters["decided_step"] == 6
    assert early.message.startswith(f"{METRIC} decided at step 6 (early look 1 of 4, 6/30 steps of 1-30)")
    # the same prefix without looks (no --fail-fast) waits for the window's end
    assert decide_early(plain.checks[0], plain, golden, prefix, True) is None
    # the full run is judged the same way at the end: its verdict is the early look's
    whole = _run(np.random.default_rng(7), shift=-0.2)
    assert evaluate_check(looking.checks[0], looking, golden, whole, True).parameters["decided_step"] == 6
    clean = _run(rng, last=7)
    assert decide_early(looking.checks[0], looking, golden, clean, True) is None


def test_a_pooled_window_that_has_ended_is_decided_without_looks() -> None:
    rng = np.random.default_rng(9)
    plain = calibrate(SPEC, [_run(rng) for _ in range(RUNS)]).baseline
    early_window = replace(plain, checks=(replace(plain.checks[0], window=(1, 10)),))
    golden = golden_trace(plain)
    decided = decide_early(early_window.checks[0], early_window, golden, _run(rng, last=12), True)
    assert decided is not None and decided.status == PASS  # final: the steps after 10 cannot change it
    assert decide_early(early_window.checks[0], early_window, golden, _run(rng, last=9), True) is None


def test_window_scope_is_decided_once_its_last_step_is_logged() -> None:
    window = CheckSpec(METRIC, "absolute", "<", 0.05, scope="window", window=(1, 5))
    baseline = Baseline("w", Path("w.yaml"), (window,),
                        golden_table={METRIC: {int(s): float(v) for s, v in zip(STEPS, CURVE)}})
    golden = golden_trace(baseline)
    rng = np.random.default_rng(3)
    assert decide_early(window, baseline, golden, _run(rng, shift=0.5, last=4), True) is None
    decided = decide_early(window, baseline, golden, _run(rng, shift=0.5, last=5), True)
    assert decided is not None and decided.status == FAIL


def test_the_stop_says_where_in_the_run_it_was_decided() -> None:
    stop = FailFastStop(9, 7, "reason", 45)
    assert stop.where() == "step 9 of 45 (20% of the run's steps)"
    assert stop.to_dict()["fraction"] == 0.2
    assert FailFastStop(9, 7, "reason").where() == "step 9"
