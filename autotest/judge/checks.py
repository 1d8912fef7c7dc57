"""The one check engine: aligns series by real step, applies a method/operator/scope, decides a status.

Methods (per point): absolute |cur-base|; relative |cur-base| / max(|base|, relative_floor);
slowdown max(0, cur-base); value cur (no baseline). A check passes when
``error OPERATOR threshold``. Scope ``pooled`` standardises each step's deviation by the baseline's
calibrated noise and bounds the mean over a window (``autotest.judge.pooled``). Scope ``slope`` fits the growth per step
by least squares within segments split at resume points (``autotest.judge.slope``) and bounds its excess over the
golden's growth (a leak). Scopes choose which points are compared and how they are
reduced. Non-finite current values breach; non-finite golden values make the check ERROR
(the baseline is broken). Reference-severity checks are reported as INFO and never fail.

A check whose threshold is ``placeholder`` (``rl-autotest init``'s proposal) is ERROR "threshold is a
placeholder" until calibration writes a measured one (a reference check's is INFO, as always).

A gate with no golden value to compare with (the metric absent from the golden table, or a declared
point absent from it) is ERROR "uncalibrated gate": INFO never blocks a PASS, so an uncalibrated gate
reported as INFO would let a broken run pass. Only a ``severity: reference`` check may be uncalibrated.
"""

from __future__ import annotations

import math
import operator as op
from dataclasses import replace
from typing import Callable, Mapping

from autotest.inputs.baseline import Baseline, CheckSpec
from autotest.judge.model import ERROR, FAIL, INFO, PASS, CheckResult, Points, StepPoint
from autotest.judge.pooled import pooled_statistic
from autotest.judge.slope import split_steps, within_slope
from autotest.judge.trace import Trace

OPERATORS: dict[str, Callable[[float, float], bool]] = {"<": op.lt, "<=": op.le, ">": op.gt, ">=": op.ge}
PERCENTILE_INTERPOLATION = "linear"
CALIBRATE_HINT = "run rl-autotest calibrate for this case (or declare the check severity: reference)"
PLACEHOLDER_HINT = "run rl-autotest calibrate for this case, then rl-autotest baseline promote"


def fmt(value: float | None) -> str:
    if value is None:
        return "-"
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    return f"{value:.6g}"


def point_error(method: str, current: float, golden: float | None, relative_floor: float) -> float:
    if method == "value":
        return current
    assert golden is not None
    if method == "absolute":
        return abs(current - golden)
    if method == "relative":
        return abs(current - golden) / max(abs(golden), relative_floor)
    if method == "slowdown":
        return max(0.0, current - golden)
    raise AssertionError(f"unknown method {method}")


def passes(error: float, operator: str, threshold: float) -> bool:
    return math.isfinite(error) and OPERATORS[operator](error, threshold)


def _worst(points: Points, operator: str) -> StepPoint | None:
    """The point farthest on the failing side of the threshold (a non-finite current value first)."""
    import numpy as np

    if not len(points):
        return None
    errors = np.asarray(points.error, dtype=float)
    finite = np.isfinite(errors)
    if not finite.all():
        breached_nonfinite = np.flatnonzero(~finite & np.asarray(points.breached, dtype=bool))
        if len(breached_nonfinite):
            return points[int(breached_nonfinite[0])]
        if not finite.any():
            return None
    masked = np.where(finite, errors, -np.inf if operator in ("<", "<=") else np.inf)
    return points[int(np.argmax(masked) if operator in ("<", "<=") else np.argmin(masked))]


def _in_range(steps, calibrated: tuple[int, int] | None) -> list[int]:
    if calibrated is None:
        return sorted(steps)
    return sorted(s for s in steps if calibrated[0] <= s <= calibrated[1])


class _Context:
    """Inputs shared by every check of one comparison."""

    def __init__(self, baseline: Baseline, golden: Trace, current: Trace, golden_is_table: bool) -> None:
        self.baseline = baseline
        self.golden = golden
        self.current = current
        self.golden_is_table = golden_is_table


def _base_result(spec: CheckSpec, status: str, message: str, **extra) -> CheckResult:
    parameters = {"relative_floor": spec.relative_floor} if spec.method == "relative" else {}
    if spec.scope == "percentile":
        parameters.update(percentile=spec.percentile, interpolation=PERCENTILE_INTERPOLATION)
    if spec.points:
        parameters["points"] = list(spec.points)
    if spec.window:
        parameters["window"] = list(spec.window)
    if spec.scope == "pooled":
        parameters["statistic"] = spec.statistic
    if spec.scope == "slope":
        parameters["split_at"] = list(spec.split_at)
    parameters.update(extra.pop("parameters", {}))
    return CheckResult(
        check_id=spec.check_id,
        status=status,
        message=message,
        metric=spec.metric,
        method=spec.method,
        operator=spec.operator,
        threshold=None if spec.placeholder else spec.threshold,
        scope=spec.scope,
        severity=spec.severity,
        parameters=parameters,
        derivation=spec.derivation,
        **extra,
    )


def _compare_points(spec: CheckSpec, steps: list[int], cur: Mapping[int, float],
                    gold: Mapping[int, float] | None) -> tuple[Points, list[int], list[int]]:
    """Score the given steps (vectorised: a check may cover thousands of steps).

    Returns the points, the steps missing from the current run, and the steps whose golden value
    is non-finite (baseline broken).
    """
    import numpy as np

    absent = set(steps).difference(cur.keys())
    missing = [s for s in steps if s in absent] if absent else []
    present = [s for s in steps if s not in absent] if absent else steps
    current = np.array(list(map(cur.__getitem__, present)), dtype=float)
    if spec.method == "value" or gold is None:
        golden = np.full(len(present), np.nan)
        golden_list: list[float | None] = [None] * len(present)
    else:
        golden_list = list(map(gold.get, present))
        golden = np.array(golden_list, dtype=float)  # None -> nan
    with np.errstate(invalid="ignore", over="ignore"):
        if spec.method == "value":
            error = current.copy()
        elif spec.method == "absolute":
            error = np.abs(current - golden)
        elif spec.method == "relative":
            error = np.abs(current - golden) / np.maximum(np.abs(golden), spec.relative_floor)
        else:
            error = np.maximum(0.0, current - golden)
        ok = OPERATORS[spec.operator](error, spec.threshold) & np.isfinite(error)
    broken_mask = np.zeros(len(present), dtype=bool) if spec.method == "value" else ~np.isfinite(golden)
    breached = ~ok & ~broken_mask
    error[broken_mask] = np.nan
    broken = [present[i] for i in np.flatnonzero(broken_mask)]
    points = Points(tuple(present), tuple(current.tolist()), tuple(golden_list), tuple(error.tolist()),
                    tuple(breached.tolist()))
    return points, missing, broken


def _error_name(spec: CheckSpec) -> str:
    return {"absolute": "absolute error", "relative": "relative error", "slowdown": "slowdown",
            "value": "value"}[spec.method]


def _breach_message(spec: CheckSpec, point: StepPoint, display: str) -> str:
    golden = "" if spec.method == "value" else f" vs golden {fmt(point.baseline)}"
    return (f"{display} at step {point.step}: current {fmt(point.current)}{golden}, "
            f"{_error_name(spec)} {fmt(point.error)} not {spec.operator} {spec.threshold:g}")


def _uncalibrated(spec: CheckSpec, what: str, **extra) -> CheckResult:
    """No golden value: a gate cannot be decided (ERROR), a reference check only informs."""
    if spec.severity == "reference":
        return _base_result(spec, INFO, f"uncalibrated: {what}; run `rl-autotest calibrate` to calibrate it",
                            **extra)
    return _base_result(spec, ERROR, f"uncalibrated gate: {what}; {CALIBRATE_HINT}", **extra)


def _evaluate(spec: CheckSpec, ctx: _Context) -> CheckResult:
    display = ctx.baseline.display(spec.metric)
    if spec.placeholder:  # rl-autotest init's proposal: a number nobody measured must never pass
        return _base_result(spec, ERROR, f"{display}: threshold is a placeholder (written by rl-autotest init, "
                                         f"not measured); {PLACEHOLDER_HINT}")
    cur = ctx.current.get(spec.metric)
    logged_as = ctx.current.non_numeric.get(spec.metric)
    if logged_as is not None:
        kind, line = logged_as
        return _base_result(spec, ERROR, f"{display} is logged as {kind}, not a number ({ctx.current.source}, "
                                         f"line {line}); log it as a number")
    if cur is None:
        return _base_result(spec, ERROR, f"{display} is missing from the current run ({ctx.current.source}); "
                                        "a checked metric never passes silently")
    gold = None
    if spec.method != "value":
        gold = ctx.golden.get(spec.metric)
        if gold is None:
            if ctx.golden_is_table:
                return _uncalibrated(spec, f"{display} has no golden value in the baseline's golden table")
            return _base_result(spec, ERROR, f"{display} is missing from the baseline tracker "
                                             f"({ctx.golden.source}); the baseline is incomplete")
    calibrated = ctx.baseline.calibrated_range
    if spec.scope in ("stepwise", "percentile"):
        steps = _in_range(cur if gold is None else gold, calibrated)
        return _reduce_steps(spec, ctx, display, steps, cur, gold)
    if spec.scope == "points":
        return _points(spec, display, cur, gold)
    if spec.scope == "final":
        return _final(spec, display, cur, gold, calibrated)
    if spec.scope == "pooled":
        return _pooled(spec, ctx, display, cur, gold)
    if spec.scope == "slope":
        return _slope(spec, ctx, display, cur, gold)
    return _window(spec, display, cur, gold)


def _reduce_steps(spec, ctx, display, steps, cur, gold) -> CheckResult:
    points, missing, broken = _compare_points(spec, steps, cur, gold)
    breaches = points.breaches()
    worst = _worst(points, spec.operator)
    extra = dict(points=points, worst_step=worst.step if worst else None,
                 first_breach_step=breaches[0].step if breaches else None)
    if broken:
        return _base_result(spec, ERROR, f"{display}: baseline has non-finite golden values at steps "
                                         f"{_steps(broken)}; the baseline is broken, recalibrate it", **extra)
    if not len(points):
        return _base_result(spec, ERROR, f"{display}: no common steps between current and baseline", **extra)
    if spec.scope == "stepwise":
        extra["observed"] = worst.error if worst else None
        if breaches:
            return _base_result(spec, FAIL, _breach_message(spec, breaches[0], display)
                                + f" (first breach; worst step {worst.step}: {fmt(worst.error)}; "
                                  f"{len(breaches)}/{len(points)} steps breach)", **extra)
    else:
        nonfinite = [p for p in breaches if not math.isfinite(p.error)]
        if nonfinite:
            extra["observed"] = math.nan
            return _base_result(spec, FAIL, f"{display}: non-finite current value at step {nonfinite[0].step} "
                                            f"({fmt(nonfinite[0].current)})", **extra)
        import numpy as np

        value = float(np.percentile(points.error, spec.percentile, method=PERCENTILE_INTERPOLATION))
        extra["observed"] = value
        if not passes(value, spec.operator, spec.threshold):
            return _base_result(spec, FAIL, f"{display}: p{spec.percentile:g} of per-step {_error_name(spec)} over "
                                            f"{len(points)} steps is {fmt(value)}, not {spec.operator} "
                                            f"{spec.threshold:g} (worst step {worst.step}: {fmt(worst.error)})",
                                **extra)
    if missing:
        return _base_result(spec, ERROR, f"{display}: current run lacks steps {_steps(missing)} that the "
                                         "baseline has; cannot decide", **extra)
    summary = (f"worst step {worst.step}: {fmt(worst.error)}" if spec.scope == "stepwise"
               else f"p{spec.percentile:g} = {fmt(extra['observed'])}")
    return _base_result(spec, PASS, f"{display}: {len(points)} steps within {_error_name(spec)} "
                                    f"{spec.operator} {spec.threshold:g} ({summary})", **extra)


def _points(spec, display, cur, gold) -> CheckResult:
    calibrated_points = [p for p in spec.points if gold is None or p in gold]
    uncalibrated = [p for p in spec.points if p not in calibrated_points]
    points, missing, broken = _compare_points(spec, calibrated_points, cur, gold)
    breaches = points.breaches()
    worst = _worst(points, spec.operator)
    extra = dict(points=points, worst_step=worst.step if worst else None,
                 first_breach_step=breaches[0].step if breaches else None,
                 observed=worst.error if worst else None)
    note = f"; no golden value at steps {_steps(uncalibrated)} (uncalibrated)" if uncalibrated else ""
    if broken:
        return _base_result(spec, ERROR, f"{display}: non-finite golden values at steps {_steps(broken)}; "
                                         "the baseline is broken", **extra)
    if breaches:
        return _base_result(spec, FAIL, _breach_message(spec, breaches[0], display)
                            + f" ({len(breaches)}/{len(points)} eval points breach){note}", **extra)
    if missing:
        return _base_result(spec, ERROR, f"{display}: current run has no value at steps {_steps(missing)}; "
                                         f"cannot decide{note}", **extra)
    if uncalibrated and (spec.severity == "gate" or not len(points)):
        # a declared point with no golden value is a gate that checks less than it says
        return _uncalibrated(spec, f"{display} has no golden value at steps {_steps(uncalibrated)}", **extra)
    return _base_result(spec, PASS, f"{display}: all {len(points)} points within {_error_name(spec)} "
                                    f"{spec.operator} {spec.threshold:g} (worst step {worst.step}: "
                                    f"{fmt(worst.error)}){note}", **extra)


def _final(spec, display, cur, gold, calibrated) -> CheckResult:
    cur_steps = _in_range(cur, calibrated)
    if not cur_steps:
        return _base_result(spec, ERROR, f"{display}: no current value in the calibrated range")
    last = cur_steps[-1]
    golden_value = None
    if gold is not None:
        gold_steps = _in_range(gold, calibrated)
        if not gold_steps:
            return _base_result(spec, ERROR, f"{display}: no golden value in the calibrated range")
        if gold_steps[-1] != last:
            return _base_result(spec, ERROR, f"{display}: final points are at different steps (current "
                                             f"{last}, baseline {gold_steps[-1]}); did the run finish?")
        golden_value = gold[last]
    points, _, broken = _compare_points(spec, [last], cur, None if gold is None else {last: golden_value})
    point = points[0]
    extra = dict(points=points, observed=point.error, worst_step=last,
                 first_breach_step=last if point.breached else None)
    if broken:
        return _base_result(spec, ERROR, f"{display}: golden final value is non-finite; the baseline is broken",
                            **extra)
    if point.breached:
        return _base_result(spec, FAIL, _breach_message(spec, point, display) + " (final point)", **extra)
    golden = "" if spec.method == "value" else f" vs golden {fmt(golden_value)}"
    return _base_result(spec, PASS, f"{display} final step {last}: {fmt(point.current)}{golden}, "
                                    f"{_error_name(spec)} {fmt(point.error)} {spec.operator} {spec.threshold:g}",
                        **extra)


def _pooled(spec, ctx, display, cur, gold) -> CheckResult:
    noise = (ctx.baseline.noise_table or {}).get(spec.metric)
    if noise is None:
        return _base_result(spec, INFO, f"{display} is uncalibrated: the baseline has no noise table for it; run "
                                        "`rl-autotest calibrate` for this case to measure it")
    first, last = spec.window or ctx.baseline.calibrated_range or (min(noise), max(noise))
    steps = sorted(s for s in noise if first <= s <= last and s in gold)
    missing = [s for s in steps if s not in cur]
    if missing or not steps:
        return _base_result(spec, ERROR, f"{display}: steps {first}-{last} lack current values at steps "
                                         f"{_steps(missing) or 'all'}; cannot decide")
    stat = pooled_statistic(steps, cur, gold, noise, spec.statistic)
    if spec.statistic == "trend":
        crossing = stat.drift_start()
    else:
        crossing = stat.first_crossing(spec.threshold) if math.isfinite(stat.mean_z) else steps[0]
    # a step "breaches" when it alone lies beyond the pooled bound on the mean's side (the report's rows)
    breached = tuple(not math.isfinite(z) or (abs(z) >= spec.threshold and z * stat.mean_z > 0) for z in stat.z)
    points = Points(stat.steps, tuple(cur[s] for s in steps), tuple(gold[s] for s in steps), stat.z, breached)
    ok = passes(stat.observed, spec.operator, spec.threshold)
    extra = dict(points=points, observed=stat.observed if math.isfinite(stat.value) else math.nan,
                 worst_step=_worst_abs(stat), first_breach_step=None if ok else crossing or steps[0])
    verdict = f"{'' if ok else 'not '}{spec.operator} {spec.threshold:g}"
    if spec.statistic == "trend":
        direction = "rises" if stat.trend_z > 0 else "falls"
        message = (f"{display} over steps {steps[0]}-{steps[-1]}: the deviation {direction} by {stat.trend_z:+.3g} x "
                   f"calibrated noise from first to last step (least-squares line; mean {stat.mean_z:+.3g}), "
                   f"|trend| {fmt(stat.observed)} {verdict}")
        return _base_result(spec, PASS if ok else FAIL, message, **extra)
    side = "above" if stat.mean_z > 0 else "below"
    message = (f"{display} over steps {steps[0]}-{steps[-1]}: mean deviation {stat.mean_z:+.3g} x calibrated noise "
               f"(current {side} golden at {stat.same_side()}/{len(steps)} steps), |mean| {fmt(stat.observed)} "
               f"{verdict}")
    return _base_result(spec, PASS if ok else FAIL, message, **extra)


def _worst_abs(stat) -> int | None:
    finite = [(abs(z), s) for s, z in zip(stat.steps, stat.z) if math.isfinite(z)]
    return max(finite)[1] if finite else (stat.steps[0] if stat.steps else None)


def _slope(spec, ctx, display, cur, gold) -> CheckResult:
    """Growth per step (least squares within segments) of current against golden's; see autotest.judge.slope."""
    steps = _in_range(cur if gold is None else gold, ctx.baseline.calibrated_range)
    if spec.window:
        steps = [s for s in steps if spec.window[0] <= s <= spec.window[1]]
    points, missing, broken = _compare_points(replace(spec, method="value" if gold is None else "absolute",
                                                      operator="<", threshold=math.inf), steps, cur, gold)
    # each point's error is the per-step difference (current itself for a bound): its slope is the statistic
    difference = tuple(c - g for c, g in zip(points.current, points.baseline)) if gold is not None else points.current
    nonfinite = [p for p in points if not math.isfinite(p.current)]
    points = Points(points.steps, points.current, points.baseline, difference,
                    tuple(not math.isfinite(p.current) for p in points))
    if broken:
        return _base_result(spec, ERROR, f"{display}: baseline has non-finite golden values at steps "
                                         f"{_steps(broken)}; the baseline is broken, recalibrate it", points=points)
    if nonfinite:
        return _base_result(spec, FAIL, f"{display}: non-finite current value at step {nonfinite[0].step} "
                                        f"({fmt(nonfinite[0].current)}); no growth can be fitted", points=points,
                            observed=math.nan, worst_step=nonfinite[0].step, first_breach_step=nonfinite[0].step)
    if missing:
        return _base_result(spec, ERROR, f"{display}: current run lacks steps {_steps(missing)} that the "
                                         "baseline has; cannot decide", points=points)
    splits = sorted(set(spec.split_at) | set(ctx.current.restarts))
    segments = split_steps(list(points.steps), splits)
    current_fit = within_slope(segments, dict(zip(points.steps, points.current)))
    where = {"segments": [list(s) for s in current_fit.segments]}
    if not current_fit.fitted:
        return _base_result(spec, ERROR, f"{display}: no segment has two steps or more to fit a growth per step "
                                         f"(steps {_steps(list(points.steps)) or 'none'}, split at "
                                         f"{_steps(splits) or 'none'}); cannot decide", points=points,
                            parameters=where)
    golden_slope = None
    # the growth of the per-step difference: the same steps and segments, so it is current's minus golden's
    difference_fit = within_slope(segments, dict(zip(points.steps, points.error)))
    if gold is None:
        error = current_fit.slope
    else:
        golden_slope = current_fit.slope - difference_fit.slope
        error = point_error(spec.method, current_fit.slope, golden_slope, spec.relative_floor)
    ok = passes(error, spec.operator, spec.threshold)
    # where the growth above golden's is steepest: the first breach is the start of that segment
    steepest = max(((g, seg) for g, seg in zip(difference_fit.per_segment, current_fit.segments) if math.isfinite(g)),
                   default=(0.0, current_fit.segments[0]))[1]
    extra = dict(points=points, observed=error, worst_step=points.steps[-1],
                 first_breach_step=None if ok else steepest[0], parameters=where)
    parts = (f"{len(current_fit.segments)} segments split at steps {_steps(splits)}" if len(current_fit.segments) > 1
             else "one segment")
    golden = "" if golden_slope is None else f" vs golden {golden_slope:+.3g}/step"
    name = {"slowdown": "growth above golden's", "absolute": "|growth - golden's|", "value": "growth"}[spec.method]
    message = (f"{display} over steps {points.steps[0]}-{points.steps[-1]} ({parts}): grows "
               f"{current_fit.slope:+.3g}/step{golden} (least squares within segments), {name} {fmt(error)}/step "
               f"{'' if ok else 'not '}{spec.operator} {spec.threshold:g}")
    if not ok and len(current_fit.segments) > 1:
        message += f" (steepest: steps {steepest[0]}-{steepest[1]})"
    return _base_result(spec, PASS if ok else FAIL, message, **extra)


def _window(spec, display, cur, gold) -> CheckResult:
    first, last = spec.window
    steps = sorted(s for s in (cur if gold is None else gold) if first <= s <= last)
    points, missing, broken = _compare_points(spec, steps, cur, gold)
    extra = dict(points=points)
    if broken:
        return _base_result(spec, ERROR, f"{display}: non-finite golden values at steps {_steps(broken)}", **extra)
    if missing or not len(points):
        return _base_result(spec, ERROR, f"{display}: window {first}-{last} lacks current values at steps "
                                         f"{_steps(missing) or 'all'}; cannot decide", **extra)
    cur_mean = sum(points.current) / len(points)
    gold_mean = None if gold is None else sum(points.baseline) / len(points)
    error = point_error(spec.method, cur_mean, gold_mean, spec.relative_floor) if math.isfinite(cur_mean) else math.nan
    extra["observed"] = error
    ok = passes(error, spec.operator, spec.threshold)
    golden = "" if gold_mean is None else f" vs golden mean {fmt(gold_mean)}"
    message = (f"{display} mean over steps {first}-{last}: {fmt(cur_mean)}{golden}, {_error_name(spec)} "
               f"{fmt(error)} {'' if ok else 'not '}{spec.operator} {spec.threshold:g}")
    return _base_result(spec, PASS if ok else FAIL, message, **extra)


def _steps(steps: list[int]) -> str:
    shown = ", ".join(str(s) for s in steps[:8])
    return shown + (f", ... ({len(steps)} in all)" if len(steps) > 8 else "")


def evaluate_check(spec: CheckSpec, baseline: Baseline, golden: Trace, current: Trace,
                   golden_is_table: bool) -> CheckResult:
    result = _evaluate(spec, _Context(baseline, golden, current, golden_is_table))
    if spec.severity == "reference" and result.status != INFO:
        # reference checks inform (e.g. machine-dependent step time) and never decide the run
        outcome = {PASS: "within threshold", FAIL: "outside threshold", ERROR: "undecided"}[result.status]
        result = replace(result, status=INFO, message=f"reference only, {outcome}: {result.message}")
    return result


def run_checks(baseline: Baseline, golden: Trace, current: Trace, golden_is_table: bool) -> list[CheckResult]:
    """Every declared check of ``baseline`` on ``current`` (structural results come from judge.structural)."""
    return [evaluate_check(spec, baseline, golden, current, golden_is_table) for spec in baseline.checks]
