"""Check kind ``median``: the median of the per-step errors over the calibrated range is within the threshold.

Robust to a few noisy steps where ``stepwise`` fails on the first one, and unlike ``percentile`` it has no
parameter. The engine aligns the two series and scores each step (``job.compare``); the kind only reduces them.

It brings its own calibration rule and minimum detectable effect (MDE), made for a median:

- **calibration** (``calibrate``): each calibration run's median error against the mean of the *other* runs
  (leave-one-out: out of sample, as a fresh run's is), and threshold = ``MULTIPLIER`` (2) x the median of those N
  values. A median over 20 steps is stable (its spread from run to run is about a quarter of its level), so the
  typical run sets the scale, not the worst pair of runs the generic rule multiplies, and one odd calibration run
  does not widen it. A clean run's median error would have to double to false-alarm. With fewer than three runs,
  or runs that agree exactly, the generic rule (``job.default()``: max deviation x margin, floors) decides.
- **MDE** (``power``): a clean run's per-step error is half-normal, so its median is 0.674 sd, and one seed's
  per-step sd is sigma = (threshold / MULTIPLIER) / (0.674 sqrt(1 + 1/(N-1))). Under a constant shift delta the
  median error sits near delta and spreads like the sample median of n normal steps, 1.2533 sigma_K / sqrt(n)
  (sigma_K = sigma sqrt(1/K + 1/N): K replicates judged on their mean, an N-run golden), so the gate catches delta
  with 80% power when delta = threshold + z_0.8 x 1.2533 sigma_K / sqrt(n). Approximate (it treats the error's
  median as delta, which holds once delta is a few sigma_K / sqrt(n) past the threshold); a threshold another
  rule made (its derivation says so) gets the per-step rule's MDE (``job.default()``).
"""

from __future__ import annotations

import math
import statistics
from typing import Any

from autotest.scopes.kind import CalibrationJob, Job, PowerJob, Scope, error_name, fmt, in_range, passes

#: the threshold is this many times a typical clean run's median error
MULTIPLIER = 2.0
#: the median of |N(0, 1)|, and the sample median's sd per unit sd and sqrt(n) (sqrt(pi / 2))
HALF_NORMAL_MEDIAN = 0.6745
MEDIAN_SD = 1.2533
#: how a threshold made by this rule starts its derivation (the MDE uses this rule's noise model only for those)
MADE_BY = "calibrated by the median rule"


class Median(Scope):
    name = "median"

    def describe(self, spec: Any) -> str:
        return "median over the calibrated steps"

    def evaluate(self, spec: Any, job: Job) -> Any:
        steps = in_range(job.cur if job.gold is None else job.gold, job.calibrated)
        points, missing, broken = job.compare(spec, steps, job.cur, job.gold)
        if broken or not len(points):
            return job.error(f"{job.display}: no comparable steps (non-finite golden or no common steps)")
        median = statistics.median(p.error for p in points)
        message = (f"{job.display}: median {error_name(spec)} over {len(points)} steps {fmt(median)} "
                   f"{'' if passes(median, spec.operator, spec.threshold) else 'not '}{spec.operator} "
                   f"{spec.threshold:g}")
        if missing:
            return job.error(message + f"; the run lacks {len(missing)} of the baseline's steps, cannot decide")
        return job.decide(passes(median, spec.operator, spec.threshold), message, points=points, observed=median)

    def calibrate(self, spec: Any, job: CalibrationJob) -> Any:
        n = len(job.runs)
        if n < 3:  # leave-one-out needs two runs besides the held-out one
            return job.default()
        per_run = []
        for i, held in enumerate(job.runs):
            others = [run for j, run in enumerate(job.runs) if j != i]
            golden = {s: math.fsum(run[s] for run in others) / len(others) for s in job.golden}
            per_run.append(job.statistic(held, golden))
        typical = statistics.median(per_run)
        if typical <= 0:  # the runs agree exactly: the generic rule's floors decide
            return job.default()
        threshold = MULTIPLIER * typical
        listed = ", ".join(f"{v:.3g}" for v in per_run)
        derivation = (f"{MADE_BY} (rl-autotest-example-plugin), N={n}: each run's median {error_name(spec)} "
                      f"against the mean of the others [{listed}]; threshold = {MULTIPLIER:g} x their median "
                      f"{typical:.3g} = {threshold:.3g}, rounded up to 2 significant digits")
        return job.calibrated(threshold, derivation, rule="median (leave-one-out)", measured_what="max loo median",
                              per_run=per_run, measured=max(per_run), steps=sorted(job.golden),
                              basis=f"{MULTIPLIER:g} x median of the runs' loo medians {typical:.3g}")

    def power(self, spec: Any, job: PowerJob) -> Any:
        steps = in_range(job.golden, job.baseline.calibrated_range)
        n = job.runs
        if not spec.derivation.startswith(MADE_BY) or n < 3 or not steps:
            return job.default()
        sigma = spec.threshold / MULTIPLIER / (HALF_NORMAL_MEDIAN * math.sqrt(1 + 1 / (n - 1)))

        def mde(k: int, runs: int) -> float:
            median_sd = MEDIAN_SD * sigma * math.sqrt(1 / k + 1 / runs) / math.sqrt(len(steps))
            return spec.threshold + job.z_power * median_sd

        scale = math.fsum(abs(job.golden[s]) for s in steps) / len(steps)
        basis = (f"median rule (approximate): threshold {spec.threshold:g} + z{job.power_level:.0%} "
                 f"{job.z_power:.2f} x {MEDIAN_SD} x seed sd {sigma:.3g} x sqrt(1/K + 1/N) / sqrt({len(steps)} steps); "
                 f"seed sd = threshold / {MULTIPLIER:g} / ({HALF_NORMAL_MEDIAN} x sqrt(1 + 1/(N-1)))")
        return job.gate_power(mde, scale or None, basis, relative=spec.method == "relative")
