"""The pooled statistic: evidence from every step of a window, in units of measured seed-to-seed noise.

A per-step check asks whether one step's error is larger than the worst the calibration runs
showed; a 25-45 step curve says much more than its worst step. Here each step's deviation from
golden is divided by that step's calibrated noise (the seed-to-seed standard deviation stored in
the baseline's ``golden.noise`` table), and the standardised deviations are averaged over the
window:

    z_s = (current_s - golden_s) / noise_s          mean_z = mean over the window of z_s

A regression that moves the curve the same way at many steps moves ``mean_z`` by about the
per-step effect, while the noise of ``mean_z`` shrinks with the number of steps (less where
seeds' curves are correlated; calibration measures the statistic's own spread, so the threshold
accounts for that). Standardising by the per-step noise is also the relative scale early steps
need: rewards of 0.006 with a seed spread of 0.003 weigh as much as 0.9 with a spread of 0.02.

A second statistic, ``trend``, gates the *shape* of the deviation: the least-squares line of z over
the window's steps, read as its fitted change from the first step to the last. A change that
slows learning early and lets it catch up later (a lost warmup, a schedule bug) leaves the mean
near 0 but tilts the line; a constant offset does not move it.

Pure numpy; the check engine (``autotest.judge.checks``) owns alignment, statuses and messages,
and calibration (``autotest.calibration.pooled_noise``) uses the same function for the threshold.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class PooledStatistic:
    """The window's standardised deviations, their mean and their fitted trend."""

    steps: tuple[int, ...]
    z: tuple[float, ...]
    mean_z: float
    #: least-squares line of z over the steps: fitted z at the last step minus at the first
    trend_z: float = math.nan
    #: which of the two the check gates
    statistic: str = "mean"

    @property
    def value(self) -> float:
        """The gated statistic, signed."""
        return self.trend_z if self.statistic == "trend" else self.mean_z

    @property
    def observed(self) -> float:
        """What the threshold bounds: |value| (two-sided: a regression may push either way)."""
        return abs(self.value)

    def same_side(self) -> int:
        """How many steps deviate to the same side as the mean (the report's "at 14/15 steps")."""
        sign = math.copysign(1.0, self.mean_z)
        return sum(1 for v in self.z if v * sign > 0)

    def drift_start(self) -> int | None:
        """For a trend: the first step from which z stays on the trend's side of its start to the end."""
        if not self.z or not math.isfinite(self.trend_z):
            return None
        sign, start, begin = math.copysign(1.0, self.trend_z), self.z[0], None
        for step, value in zip(self.steps, self.z):
            if (value - start) * sign > 0:
                begin = step if begin is None else begin
            else:
                begin = None
        return begin

    def first_crossing(self, threshold: float) -> int | None:
        """The first step at which the running mean of z is beyond ``threshold`` and stays on that side
        to the end: when the evidence became conclusive (what triage reads as the first breach)."""
        running, crossing = 0.0, None
        for i, (step, value) in enumerate(zip(self.steps, self.z)):
            running += value
            if abs(running / (i + 1)) >= threshold:
                crossing = step if crossing is None else crossing
            else:
                crossing = None
        return crossing


def pooled_statistic(steps: Sequence[int], current: Mapping[int, float], golden: Mapping[int, float],
                     noise: Mapping[int, float], statistic: str = "mean") -> PooledStatistic:
    """z per step, their mean and trend over ``steps`` (every step must be in all three mappings)."""
    import numpy as np

    cur = np.array([current[s] for s in steps], dtype=float)
    gold = np.array([golden[s] for s in steps], dtype=float)
    sigma = np.array([noise[s] for s in steps], dtype=float)
    x = np.array(steps, dtype=float)
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        z = (cur - gold) / sigma
        mean_z = float(z.mean()) if len(z) else math.nan
        centred = x - x.mean() if len(x) else x
        spread = float((centred * centred).sum())
        # slope x window length: in z units, comparable across windows of any length
        trend = float((centred * z).sum() / spread * (x[-1] - x[0])) if spread > 0 else math.nan
    return PooledStatistic(tuple(int(s) for s in steps), tuple(z.tolist()), mean_z, trend, statistic)


def step_noise(series_by_run: Sequence[Mapping[int, float]], steps: Sequence[int], smooth: int = 2,
               floor_fraction: float = 0.25) -> dict[int, float]:
    """Seed-to-seed standard deviation per step from the calibration runs (at least two).

    With a handful of runs a single step's standard deviation is itself noisy (and 0 where the
    runs happen to agree), so it is pooled over ``smooth`` neighbouring steps on each side (the
    root mean square of their variances) and floored at ``floor_fraction`` of the median over the
    steps: one quiet step must not weigh a hundred times more than its neighbours.
    """
    import numpy as np

    values = np.array([[run[s] for s in steps] for run in series_by_run], dtype=float)
    variance = values.var(axis=0, ddof=1)
    pooled = np.array([variance[max(0, i - smooth): i + smooth + 1].mean() for i in range(len(steps))])
    sigma = np.sqrt(pooled)
    positive = sigma[sigma > 0]
    floor = floor_fraction * float(np.median(positive)) if len(positive) else 0.0
    if floor <= 0:
        floor = 1e-12  # every run identical at every step: any change is a deviation
    return {int(s): float(max(v, floor)) for s, v in zip(steps, sigma)}
