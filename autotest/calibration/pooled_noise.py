"""Calibration of pooled checks: per-step noise, and a threshold from the statistic's own spread.

For a ``scope: pooled`` check (``autotest.scopes.pooled``) calibration stores, per metric, the
seed-to-seed standard deviation at every step (``golden.noise``) and sets the threshold from how
far the pooled statistic of a *fresh* clean run strays:

1. leave-one-out: each calibration run is scored against golden and noise made from the other
   N-1 runs, so every value is out of sample (a run scored against a mean that contains it
   looks closer than a new run would);
2. its spread: s = root mean square of those N values (the statistic is 0 on average for a
   clean run), rescaled from an (N-1)-run golden to the N-run golden the baseline keeps:
   s x sqrt((1 + 1/N) / (1 + 1/(N-1)));
3. threshold = t(N-1 dof) quantile at 1 - budget / (2 m) x s, where budget is the case's declared
   ``calibration.false_alarm_budget`` (chance per clean run that any pooled gate check false-
   alarms) split over its m pooled gate checks (two-sided). Student's t, not the normal: with
   N = 5 runs the spread itself is uncertain, and the heavier tail pays for that. N-1 degrees of
   freedom, not N: each leave-one-out value is (N/(N-1)) x the run's distance from the N-run mean,
   so the N values carry N-1 independent squares (with N dof the budget was exceeded: 6.4% false
   alarms averaged over 100 synthetic calibrations at a 5% budget).

This replaces "max deviation x 1.5" for pooled checks: the false-alarm rate is declared and the
threshold follows from the measured spread of the very statistic that is gated.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from autotest.inputs.baseline import CalibrationSpec, CheckSpec
from autotest.scopes.pooled import pooled_statistic, step_noise
from autotest.judge.power import t_quantile
from autotest.judge.trace import Trace

#: leave-one-out needs at least two runs besides the held-out one to measure noise
MIN_POOLED_RUNS = 3


@dataclass(frozen=True)
class PooledCalibration:
    threshold: float
    derivation: str
    per_run: tuple[float, ...]
    measured: float
    spread: float
    quantile: float
    steps: tuple[int, ...]


def noise_table(metrics: Sequence[str], table: Mapping[str, Mapping[int, float]],
                traces: Sequence[Trace]) -> dict[str, dict[int, float]]:
    """Seed-to-seed noise per step of each pooled metric, over the steps every run logged."""
    noise = {}
    for metric in metrics:
        steps = list(table[metric])
        if steps and len(traces) >= MIN_POOLED_RUNS:  # fewer: the check stays uncalibrated (INFO)
            noise[metric] = step_noise([t.series[metric] for t in traces], steps)
    return noise


def window_steps(check: CheckSpec, golden: Mapping[int, float]) -> list[int]:
    first, last = check.window or (min(golden), max(golden))
    return [s for s in golden if first <= s <= last]


def loo_statistics(check: CheckSpec, traces: Sequence[Trace], steps: Sequence[int]) -> list[float]:
    """Each run's pooled statistic (mean or trend of z) against golden and noise made from the other runs."""
    values = []
    for i, held in enumerate(traces):
        others = [t.series[check.metric] for j, t in enumerate(traces) if j != i]
        golden = {s: math.fsum(o[s] for o in others) / len(others) for s in steps}
        noise = step_noise(others, steps)
        values.append(pooled_statistic(steps, held.series[check.metric], golden, noise, check.statistic).value)
    return values


def calibrate_pooled(check: CheckSpec, traces: Sequence[Trace], golden: Mapping[int, float],
                     settings: CalibrationSpec, num_pooled_gates: int) -> PooledCalibration | str:
    """The threshold for ``check``, or why it cannot be calibrated (too few runs)."""
    n = len(traces)
    if n < MIN_POOLED_RUNS:
        return f"a pooled check needs {MIN_POOLED_RUNS} or more calibration runs (leave-one-out noise), have {n}"
    steps = window_steps(check, golden)
    if not steps:
        return f"no calibrated step in window {check.window}"
    per_run = loo_statistics(check, traces, steps)
    rms = math.sqrt(math.fsum(v * v for v in per_run) / n)
    spread = rms * math.sqrt((1 + 1 / n) / (1 + 1 / (n - 1)))
    alpha = settings.false_alarm_budget / max(1, num_pooled_gates)
    quantile = t_quantile(1 - alpha / 2, n - 1)
    threshold = quantile * spread
    derivation = (f"calibrated pooled, N={n}: leave-one-out {check.statistic} z of the runs {_list(per_run)}, spread "
                  f"{spread:.3g} (rms, rescaled to the N-run golden); threshold = t({n - 1} dof) quantile "
                  f"{quantile:.3g} for false-alarm budget {settings.false_alarm_budget:g} over "
                  f"{num_pooled_gates} pooled gate checks x spread = {threshold:.3g}, rounded up to 2 significant "
                  f"digits; noise per step: seed-to-seed sd, pooled over +-2 steps, floored at 1/4 of its median")
    return PooledCalibration(threshold, derivation, tuple(per_run), max(abs(v) for v in per_run), spread, quantile,
                             tuple(steps))


def _list(values: Sequence[float]) -> str:
    return "[" + ", ".join(f"{v:+.2f}" for v in values) + "]"
