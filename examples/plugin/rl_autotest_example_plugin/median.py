"""Check kind ``median``: the median of the per-step errors over the calibrated range is within the threshold.

Robust to a few noisy steps where ``stepwise`` fails on the first one, and unlike ``percentile`` it has no
parameter. The engine aligns the two series and scores each step (``job.compare``); the kind only reduces them.
"""

from __future__ import annotations

import statistics
from typing import Any

from autotest.scopes.kind import Job, Scope, error_name, fmt, in_range, passes


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
