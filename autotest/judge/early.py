"""What a prefix of a run already decides, for the live follower's fail-fast (:mod:`autotest.judge.live`).

Stepwise and points checks decide on a prefix through the one check engine; a percentile check needs a
bound over the steps still to come, which is this module.
"""

from __future__ import annotations

import math

from autotest.inputs.baseline import Baseline, CheckSpec
from autotest.judge.checks import _base_result, _compare_points, _error_name, _in_range, _worst, fmt, passes
from autotest.judge.model import FAIL, CheckResult
from autotest.judge.trace import Trace


def percentile_decided(spec: CheckSpec, baseline: Baseline, golden: Trace, current: Trace) -> CheckResult | None:
    """A percentile gate that a prefix of the run already fails, whatever the steps still to come log; else None.

    The complete check takes the percentile over every golden step in the calibrated range. Put the errors of
    the steps not logged yet at the passing extreme (below every logged error for ``<``/``<=``, above for
    ``>``/``>=``): if the percentile still fails with both of its interpolation neighbours among the logged
    errors, no completion can pass. The check over the logged prefix alone (what the judge computes after a
    fail-fast stop) sits at a rank at least as far on the failing side, so it fails too.
    """
    gold, cur = golden.get(spec.metric), current.get(spec.metric)
    if spec.scope != "percentile" or spec.method == "value" or spec.placeholder or gold is None or cur is None:
        return None
    steps = _in_range(gold, baseline.calibrated_range)
    points, missing, broken = _compare_points(spec, steps, cur, gold)
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
    worst = _worst(points, spec.operator)
    side = "at least" if spec.operator in ("<", "<=") else "at most"
    message = (f"{baseline.display(spec.metric)}: p{spec.percentile:g} of per-step {_error_name(spec)} over "
               f"{len(steps)} steps is {side} {fmt(bound)} whatever the {len(missing)} steps not logged yet hold, "
               f"not {spec.operator} {spec.threshold:g} ({len(breaches)} of the first {len(points)} steps breach)")
    return _base_result(spec, FAIL, message, points=points, observed=bound, worst_step=worst.step if worst else None,
                        first_breach_step=breaches[0].step if breaches else None)
