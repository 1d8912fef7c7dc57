"""Scope ``stepwise`` (the default): every common step in the calibrated range; the first and the worst breach
by real step. The per-step reduction here is shared with ``percentile`` (:mod:`autotest.scopes.percentile`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from autotest.scopes.kind import Job, Scope, breach_message, error_name, fmt, in_range, steps_text
from autotest.scopes.period import period_note

if TYPE_CHECKING:
    from autotest.inputs.baseline_model import CheckSpec


class Stepwise(Scope):
    name = "stepwise"
    locates = True
    judged_per_step = True

    def evaluate(self, spec: CheckSpec, job: Job) -> Any:
        steps = in_range(job.cur if job.gold is None else job.gold, job.calibrated)
        points, missing, broken = job.compare(spec, steps, job.cur, job.gold)
        breaches = points.breaches()
        worst = job.worst(points, spec.operator)
        extra = dict(points=points, worst_step=worst.step if worst else None,
                     first_breach_step=breaches[0].step if breaches else None)
        display = job.display
        if broken:
            return job.error(f"{display}: baseline has non-finite golden values at steps "
                             f"{steps_text(broken)}; the baseline is broken, recalibrate it", **extra)
        if not len(points):
            return job.error(f"{display}: no common steps between current and baseline", **extra)
        failed = self.reduce(spec, job, points, breaches, worst, extra)
        if failed is not None:
            return failed
        if missing:
            return job.error(f"{display}: current run lacks steps {steps_text(missing)} that the "
                             "baseline has; cannot decide", **extra)
        return job.passed(f"{display}: {len(points)} steps within {error_name(spec)} "
                          f"{spec.operator} {spec.threshold:g} ({self.summary(spec, worst, extra)})", **extra)

    def reduce(self, spec: CheckSpec, job: Job, points, breaches, worst, extra: dict) -> Any:
        """The FAIL of the scored points (None: they pass); sets ``extra['observed']``."""
        extra["observed"] = worst.error if worst else None
        if breaches:
            return job.fail(breach_message(spec, breaches[0], job.display)
                            + f" (first breach; worst step {worst.step}: {fmt(worst.error)}; "
                              f"{len(breaches)}/{len(points)} steps breach"
                              f"{period_note(points.steps, [p.step for p in breaches])})", **extra)
        return None

    def summary(self, spec: CheckSpec, worst, extra: dict) -> str:
        return f"worst step {worst.step}: {fmt(worst.error)}"

    def decide_early(self, spec: CheckSpec, job: Job) -> Any:
        return job.evaluate()  # a breach on a prefix is a breach of the whole run
