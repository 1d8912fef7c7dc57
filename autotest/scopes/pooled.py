"""Scope ``pooled``, and its statistic: evidence from every step of a window, in units of measured seed-to-seed noise.

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

The kind brings its own calibration rule (``Pooled.calibrate``): calibration stores, per metric, the seed-to-seed
standard deviation at every step (``golden.noise``, :func:`step_noise`) and the threshold follows from how far
the pooled statistic of a *fresh* clean run strays:

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
threshold follows from the measured spread of the very statistic that is gated. Its MDE (``Pooled.power``)
follows from the same noise model (:mod:`autotest.judge.power` explains it).

Pure numpy; the check engine (``autotest.judge.checks``) owns alignment and statuses, calibration and power hand
the kind their tools (the t quantile among them), and this module's functions score the run, the calibration
runs and the MDE alike. A pooled check's method is ``absolute`` (deviations are standardised by the calibrated
noise); ``window`` is optional (default: the calibrated range) and ``statistic`` is ``mean`` or ``trend``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from autotest.inputs.schema import show
from autotest.scopes.kind import CalibrationJob, Job, PowerJob, Scope, fmt, passes, steps_text
from autotest.scopes.window import step_range

if TYPE_CHECKING:
    from autotest.inputs.baseline_model import CheckSpec
    from autotest.inputs.schema import Section

#: what a pooled check gates: the mean of z over the window, or its fitted change across it
POOLED_STATISTICS = ("mean", "trend")
#: leave-one-out needs at least two runs besides the held-out one to measure noise
MIN_POOLED_RUNS = 3


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


def window_steps(check: CheckSpec, golden: Mapping[int, float]) -> list[int]:
    """The golden steps a pooled check's window covers (every golden step without a window)."""
    first, last = check.window or (min(golden), max(golden))
    return [s for s in golden if first <= s <= last]


def loo_statistics(check: CheckSpec, runs: Sequence[Mapping[int, float]], steps: Sequence[int]) -> list[float]:
    """Each run's pooled statistic (mean or trend of z) against golden and noise made from the other runs."""
    values = []
    for i, held in enumerate(runs):
        others = [run for j, run in enumerate(runs) if j != i]
        golden = {s: math.fsum(o[s] for o in others) / len(others) for s in steps}
        noise = step_noise(others, steps)
        values.append(pooled_statistic(steps, held, golden, noise, check.statistic).value)
    return values


class Pooled(Scope):
    name = "pooled"
    exclusive_keys = ("statistic",)
    keys = ("window", "statistic")
    uses_noise = True
    plots_band = False  # a pooled threshold bounds a mean in noise units: not a band around golden

    def parse(self, sec: Section) -> dict[str, Any]:
        if sec.data.get("method") != "absolute":
            sec.fail("method", f"{show(sec.data.get('method'))} cannot be pooled",
                     "write method: absolute (deviations are standardised by the calibrated noise)")
        return {"window": step_range(sec, "window") if "window" in sec.data else None,
                "statistic": sec.choice("statistic", POOLED_STATISTICS, default="mean")}

    def check_id(self, spec: CheckSpec) -> str:
        # one metric may be pooled over several phases, by mean and trend
        kind = "pooled" if spec.statistic == "mean" else f"pooled {spec.statistic}"
        if spec.window:
            return f"{spec.metric}[{kind} {spec.window[0]}-{spec.window[1]}]"
        return f"{spec.metric}[{kind}]"

    def describe(self, spec: CheckSpec) -> str:
        where = f"steps {spec.window[0]}-{spec.window[1]}" if spec.window else "every calibrated step"
        what = "mean" if spec.statistic == "mean" else "fitted first-to-last change"
        return f"|{what} of per-step deviations / calibrated noise| over {where}"

    def parameters(self, spec: CheckSpec) -> dict[str, Any]:
        return {"statistic": spec.statistic}

    def evaluate(self, spec: CheckSpec, job: Job) -> Any:
        display, cur, gold, noise = job.display, job.cur, job.gold, job.noise
        if noise is None:
            return job.info(f"{display} is uncalibrated: the baseline has no noise table for it; run "
                            "`rl-autotest calibrate` for this case to measure it")
        first, last = spec.window or job.calibrated or (min(noise), max(noise))
        steps = sorted(s for s in noise if first <= s <= last and s in gold)
        missing = [s for s in steps if s not in cur]
        looked = self._early_look(spec, job, steps) if steps else None
        if looked is not None:
            return looked
        if missing or not steps:
            return job.error(f"{display}: steps {first}-{last} lack current values at steps "
                             f"{steps_text(missing) or 'all'}; cannot decide")
        stat = pooled_statistic(steps, cur, gold, noise, spec.statistic)
        if spec.statistic == "trend":
            crossing = stat.drift_start()
        else:
            crossing = stat.first_crossing(spec.threshold) if math.isfinite(stat.mean_z) else steps[0]
        # a step "breaches" when it alone lies beyond the pooled bound on the mean's side (the report's rows)
        breached = tuple(not math.isfinite(z) or (abs(z) >= spec.threshold and z * stat.mean_z > 0) for z in stat.z)
        points = job.points(stat.steps, tuple(cur[s] for s in steps), tuple(gold[s] for s in steps), stat.z,
                            breached)
        ok = passes(stat.observed, spec.operator, spec.threshold)
        extra = dict(points=points, observed=stat.observed if math.isfinite(stat.value) else math.nan,
                     worst_step=_worst_abs(stat), first_breach_step=None if ok else crossing or steps[0])
        verdict = f"{'' if ok else 'not '}{spec.operator} {spec.threshold:g}"
        if spec.statistic == "trend":
            direction = "rises" if stat.trend_z > 0 else "falls"
            message = (f"{display} over steps {steps[0]}-{steps[-1]}: the deviation {direction} by "
                       f"{stat.trend_z:+.3g} x calibrated noise from first to last step (least-squares line; mean "
                       f"{stat.mean_z:+.3g}), |trend| {fmt(stat.observed)} {verdict}")
            return job.decide(ok, message, **extra)
        side = "above" if stat.mean_z > 0 else "below"
        message = (f"{display} over steps {steps[0]}-{steps[-1]}: mean deviation {stat.mean_z:+.3g} x calibrated "
                   f"noise (current {side} golden at {stat.same_side()}/{len(steps)} steps), |mean| "
                   f"{fmt(stat.observed)} {verdict}")
        return job.decide(ok, message, **extra)

    def decide_early(self, spec: CheckSpec, job: Job) -> Any:
        """A window whose last step is logged is decided (its statistic is final); before that, only an early look
        (``--fail-fast``: :mod:`autotest.judge.step_looks`) that crossed its threshold decides, a FAIL."""
        if job.noise is None or job.gold is None:
            return None
        first, last = spec.window or job.calibrated or (min(job.noise), max(job.noise))
        steps = [s for s in job.noise if first <= s <= last and s in job.gold]
        if steps and all(s in job.cur for s in steps):
            return self.evaluate(spec, job)
        return self._early_look(spec, job, sorted(steps)) if steps else None

    def _early_look(self, spec: CheckSpec, job: Job, steps: list[int]) -> Any:
        """The FAIL of the first early look whose mean of z over the window's first j steps (all logged) is beyond
        the look's bound (:func:`autotest.judge.step_looks.look_bound`), else None (the window's end decides)."""
        if not job.looks or spec.statistic != "mean":
            return None
        cur, gold, noise, n = job.cur, job.gold, job.noise, len(steps)
        logged = 0
        while logged < n and steps[logged] in cur:
            logged += 1
        for k, (fraction, alpha) in enumerate(job.looks, start=1):
            j = max(1, math.ceil(fraction * n))
            if j >= n or j > logged:
                break
            stat = pooled_statistic(steps[:j], cur, gold, noise, "mean")
            bound = job.look_bound(alpha, j)
            if math.isfinite(stat.mean_z) and passes(stat.observed, spec.operator, bound):
                continue
            crossing = stat.first_crossing(bound) if math.isfinite(stat.mean_z) else None
            side = "above" if stat.mean_z > 0 else "below"
            message = (f"{job.display} decided at step {steps[j - 1]} (early look {k} of {len(job.looks)}, "
                       f"{j}/{n} steps of {steps[0]}-{steps[-1]}): mean deviation {stat.mean_z:+.3g} x calibrated "
                       f"noise over steps {steps[0]}-{steps[j - 1]} (current {side} golden at {stat.same_side()}/{j} "
                       f"steps), |mean| {fmt(stat.observed)} not {spec.operator} {bound:.3g} (the look's bound at "
                       f"false-alarm chance {alpha:.2g}, whatever the steps' correlation)")
            points = job.points(stat.steps, tuple(cur[s] for s in stat.steps), tuple(gold[s] for s in stat.steps),
                                stat.z, tuple(not math.isfinite(z) or (abs(z) >= bound and z * stat.mean_z > 0)
                                              for z in stat.z))
            return job.fail(message, points=points, observed=stat.observed if math.isfinite(stat.mean_z) else math.nan,
                            worst_step=_worst_abs(stat), first_breach_step=crossing or steps[0],
                            parameters={"look": k, "looks": len(job.looks), "look_steps": j, "look_alpha": alpha,
                                        "look_threshold": round(bound, 6), "decided_step": steps[j - 1]})
        return None

    def table_cells(self, result: Any, error: str, threshold: str, step: str) -> tuple[str, str, str]:
        kind = "pooled" if result.parameters.get("statistic", "mean") == "mean" else "pooled trend"
        return f"{kind}: {error} x noise", f"{kind} {result.operator} {result.threshold:g} x noise", step

    def calibrate(self, spec: CheckSpec, job: CalibrationJob) -> Any:
        """Threshold = t quantile for the false-alarm budget x the leave-one-out spread of the statistic (module
        doc); uncalibrated with fewer than three runs."""
        n = len(job.runs)
        if n < MIN_POOLED_RUNS:
            return job.uncalibrated(f"a pooled check needs {MIN_POOLED_RUNS} or more calibration runs "
                                    f"(leave-one-out noise), have {n}")
        steps = window_steps(spec, job.golden)
        if not steps:
            return job.uncalibrated(f"no calibrated step in window {spec.window}")
        per_run = loo_statistics(spec, job.runs, steps)
        rms = math.sqrt(math.fsum(v * v for v in per_run) / n)
        spread = rms * math.sqrt((1 + 1 / n) / (1 + 1 / (n - 1)))
        budget = job.settings.false_alarm_budget
        quantile = job.t_quantile(1 - budget / max(1, job.noise_gates) / 2, n - 1)
        threshold = quantile * spread
        listed = "[" + ", ".join(f"{v:+.2f}" for v in per_run) + "]"
        derivation = (f"calibrated pooled, N={n}: leave-one-out {spec.statistic} z of the runs {listed}, spread "
                      f"{spread:.3g} (rms, rescaled to the N-run golden); threshold = t({n - 1} dof) quantile "
                      f"{quantile:.3g} for false-alarm budget {budget:g} over {job.noise_gates} pooled gate checks x "
                      f"spread = {threshold:.3g}, rounded up to 2 significant digits; noise per step: seed-to-seed "
                      "sd, pooled over +-2 steps, floored at 1/4 of its median")
        return job.calibrated(threshold, derivation, rule="pooled (x noise)", measured_what="max |loo mean z|",
                              per_run=per_run, measured=max(abs(v) for v in per_run), steps=steps,
                              basis=f"t quantile {quantile:.3g} x spread {spread:.3g}")

    def power(self, spec: CheckSpec, job: PowerJob) -> Any:
        """threshold = q s1 sqrt(1 + 1/N) (q: the budget's t quantile, s1: one seed's spread of the statistic), so
        MDE(K, N) = (q + z) s1 sqrt(1/K + 1/N), turned into the metric's units by the harmonic-mean noise."""
        noise, golden, n = job.noise, job.golden, job.runs
        if n < MIN_POOLED_RUNS or noise is None:
            return None
        steps = [s for s in sorted(noise) if s in golden and (spec.window is None or
                                                              spec.window[0] <= s <= spec.window[1])]
        if not steps:
            return None
        inverse = math.fsum(1 / noise[s] for s in steps if noise[s] > 0) / len(steps)
        if inverse <= 0:
            return None
        q = job.budget_quantile(n)
        one_seed = spec.threshold / q / math.sqrt(1 + 1 / n)  # s1: the statistic's sd for one seed
        units = 1 / inverse

        def mde(k: int, runs: int) -> float:
            quantile = q if runs == n else job.budget_quantile(runs)
            return (quantile + job.z_power) * one_seed * math.sqrt(1 / k + 1 / runs) * units

        scale = math.fsum(abs(golden[s]) for s in steps) / len(steps)
        what = "change across the window" if spec.statistic == "trend" else "constant shift over the window"
        basis = (f"pooled: threshold {spec.threshold:g} = t({n - 1} dof) quantile {q:.3g} x spread; MDE = (q + "
                 f"z{job.power_level:.0%} {job.z_power:.2f}) x spread x sqrt(1/K + 1/N)/sqrt(1 + 1/N), in units x "
                 f"harmonic-mean noise {units:.3g} ({what})")
        return job.gate_power(mde, scale or None, basis)

    def half_power_shift(self, spec: CheckSpec, job: PowerJob) -> float:
        """The threshold in noise units x the window's unit (1 / mean(1 / noise))."""
        return spec.threshold * _window_units(spec, job)[1]

    def measured_shift(self, spec: CheckSpec, job: PowerJob, current: Mapping[int, float],
                       observed: float | None) -> float | None:
        """The signed mean (or trend) of z over the window x the window's unit."""
        steps, unit = _window_units(spec, job, current)
        if not steps:
            return None
        return pooled_statistic(steps, current, job.golden, job.noise or {}, spec.statistic).value * unit


def _worst_abs(stat: PooledStatistic) -> int | None:
    finite = [(abs(z), s) for s, z in zip(stat.steps, stat.z) if math.isfinite(z)]
    return max(finite)[1] if finite else (stat.steps[0] if stat.steps else None)


def _window_units(spec: CheckSpec, job: PowerJob, steps_with: Mapping[int, float] | None = None
                  ) -> tuple[list[int], float]:
    """The gate's steps (those in golden, noise and ``steps_with``) and its unit: 1 / mean(1 / noise)."""
    noise = job.noise or {}
    steps = [s for s in sorted(noise) if s in job.golden and (steps_with is None or s in steps_with)
             and (spec.window is None or spec.window[0] <= s <= spec.window[1]) and noise[s] > 0]
    return steps, (len(steps) / math.fsum(1 / noise[s] for s in steps) if steps else math.nan)
