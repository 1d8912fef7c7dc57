"""Scope ``percentile``: the pN of the per-step errors over the calibrated range (``percentile:`` required).

A prefix of a run can already fail it (:meth:`Percentile.decide_early`), whatever the steps still to come log.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from autotest.scopes.kind import Job, error_name, fmt, in_range, passes
from autotest.scopes.period import period_note
from autotest.scopes.stepwise import Stepwise

if TYPE_CHECKING:
    from autotest.inputs.baseline_model import CheckSpec
    from autotest.inputs.schema import Section

PERCENTILE_INTERPOLATION = "linear"


def breached_share(points, breaches) -> str:
    """``11/45 steps (24%) breach the threshold; every 2nd step (...)``: what a percentile passes over."""
    share = len(breaches) / len(points) if len(points) else 0.0
    return (f"{len(breaches)}/{len(points)} steps ({share:.0%}) breach the threshold"
            f"{period_note(points.steps, [p.step for p in breaches])}")


class Percentile(Stepwise):
    name = "percentile"
    judged_per_step = False  # its statistic is over the whole run
    exclusive_keys = ("percentile",)
    keys = ("percentile",)

    def parse(self, sec: Section) -> dict[str, Any]:
        percentile = sec.number("percentile", fix="write a percentile within 0..100, e.g. 80")
        if not 0 <= percentile <= 100:
            sec.fail("percentile", f"{percentile:g} is outside 0..100", "write a percentile within 0..100, e.g. 80")
        return {"percentile": percentile}

    def describe(self, spec: CheckSpec) -> str:
        return f"p{spec.percentile:g} of per-step errors"

    def parameters(self, spec: CheckSpec) -> dict[str, Any]:
        return {"percentile": spec.percentile, "interpolation": PERCENTILE_INTERPOLATION}

    def reduce(self, spec: CheckSpec, job: Job, points, breaches, worst, extra: dict) -> Any:
        nonfinite = [p for p in breaches if not math.isfinite(p.error)]
        if nonfinite:
            extra["observed"] = math.nan
            return job.fail(f"{job.display}: non-finite current value at step {nonfinite[0].step} "
                            f"({fmt(nonfinite[0].current)})", **extra)
        import numpy as np

        value = float(np.percentile(points.error, spec.percentile, method=PERCENTILE_INTERPOLATION))
        extra["observed"] = value
        if not passes(value, spec.operator, spec.threshold):
            return job.fail(f"{job.display}: p{spec.percentile:g} of per-step {error_name(spec)} over "
                            f"{len(points)} steps is {fmt(value)}, not {spec.operator} "
                            f"{spec.threshold:g} (worst step {worst.step}: {fmt(worst.error)}; "
                            f"{breached_share(points, breaches)})", **extra)
        return None

    def summary(self, spec: CheckSpec, worst, extra: dict) -> str:
        # a percentile reads one step's error: the share beyond the threshold says what it did not read
        points = extra["points"]
        return f"p{spec.percentile:g} = {fmt(extra['observed'])}; {breached_share(points, points.breaches())}"

    def decide_early(self, spec: CheckSpec, job: Job) -> Any:
        """A percentile gate that a prefix of the run already fails, whatever the steps still to come log; else None.

        The complete check takes the percentile over every golden step in the calibrated range. Put the errors of
        the steps not logged yet at the passing extreme (below every logged error for ``<``/``<=``, above for
        ``>``/``>=``): if the percentile still fails with both of its interpolation neighbours among the logged
        errors, no completion can pass. The check over the logged prefix alone (what the judge computes after a
        fail-fast stop) sits at a rank at least as far on the failing side, so it fails too.
        """
        gold, cur = job.gold, job.cur
        if spec.method == "value" or spec.placeholder or gold is None or cur is None:
            return None
        steps = in_range(gold, job.calibrated)
        points, missing, broken = job.compare(spec, steps, cur, gold)
        if broken or not missing or not len(points):
            return None  # broken: the judge says so; nothing missing: the ordinary check decides
        errors = sorted(points.error)
        rank = (len(steps) - 1) * spec.percentile / 100
        low, high = math.floor(rank), math.ceil(rank)
        if spec.operator in ("<", "<="):
            low, high = low - len(missing), high - len(missing)  # the unknown errors sort first
            if low < 0:
                return None
        elif high >= len(errors):
            return None
        bound = errors[low] + (rank - math.floor(rank)) * (errors[high] - errors[low])
        if passes(bound, spec.operator, spec.threshold):
            return None
        breaches = points.breaches()
        worst = job.worst(points, spec.operator)
        side = "at least" if spec.operator in ("<", "<=") else "at most"
        message = (f"{job.display}: p{spec.percentile:g} of per-step {error_name(spec)} over "
                   f"{len(steps)} steps is {side} {fmt(bound)} whatever the {len(missing)} steps not logged yet "
                   f"hold, not {spec.operator} {spec.threshold:g} ({len(breaches)} of the first {len(points)} "
                   "steps breach)")
        return job.fail(message, points=points, observed=bound, worst_step=worst.step if worst else None,
                        first_breach_step=breaches[0].step if breaches else None)

    def table_cells(self, result: Any, error: str, threshold: str, step: str) -> tuple[str, str, str]:
        breached = len(result.points.breaches())
        shown = f"; {breached}/{len(result.points)} steps breach" if len(result.points) else ""
        return f"p{result.parameters.get('percentile', 0):g} = {error}{shown}", threshold, f"worst {step}"
