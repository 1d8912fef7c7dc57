"""Scope ``slope``: how fast a metric grows per step, fitted by least squares within segments.

A leak shows as growth: memory that rises by about the same amount every step. The statistic is the
least-squares slope of the metric over the checked steps with one intercept per segment (a common slope,
"within" each segment): a resumed run starts a fresh process whose memory starts low again, and one line
through both parts would read the drop at the resume as shrinkage and hide the growth on either side.

Segments are split where a segment starts: at each step of the check's ``split_at`` (the resume points
the case knows) and at each step where the log's step counter went back (``Trace.restarts``, a resumed or
concatenated log). A segment with a single step fits nothing and adds nothing. The slope of the current
run minus the golden's, over the same steps and segments, is the slope of their per-step difference (the
fit is linear in the values), which :class:`Slope` bounds. Its method is ``slowdown`` (growth per step above the
golden's), ``absolute`` or ``value`` (the growth itself); ``window`` and ``split_at`` are optional.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from autotest.inputs.schema import show
from autotest.scopes.kind import Job, Scope, fmt, in_range, passes, point_error, steps_text
from autotest.scopes.window import step_range

if TYPE_CHECKING:
    from autotest.inputs.baseline_model import CheckSpec
    from autotest.inputs.schema import Section

#: methods a slope (growth per step) can be judged by: its excess over golden's, its distance, or itself
SLOPE_METHODS = ("slowdown", "absolute", "value")


def split_steps(steps: Sequence[int], split_at: Iterable[int]) -> list[tuple[int, ...]]:
    """``steps`` (ascending) cut into runs of consecutive checked steps, a new one starting at each split step.

    A split step need not be a checked step: the next checked step after it starts the segment.
    """
    splits = sorted(set(split_at))
    segments: list[list[int]] = []
    index = 0
    for step in steps:
        started = False
        while index < len(splits) and splits[index] <= step:
            started = True
            index += 1
        if not segments or started:
            segments.append([])
        segments[-1].append(step)
    return [tuple(s) for s in segments]


@dataclass(frozen=True)
class SlopeFit:
    """The within-segment least-squares slope of one series (units of the metric per step)."""

    #: the common slope of every segment with two steps or more (nan when none has)
    slope: float
    #: each segment's (first step, last step)
    segments: tuple[tuple[int, int], ...]
    #: each segment's own slope (nan for a single-step segment)
    per_segment: tuple[float, ...]

    @property
    def fitted(self) -> bool:
        return math.isfinite(self.slope)


def within_slope(segments: Sequence[Sequence[int]], values: Mapping[int, float]) -> SlopeFit:
    """The common least-squares slope of ``values`` over ``segments`` (one intercept each)."""
    sxx_total = sxy_total = 0.0
    per_segment = []
    for steps in segments:
        if len(steps) < 2:
            per_segment.append(math.nan)
            continue
        mean_x = math.fsum(steps) / len(steps)
        mean_y = math.fsum(values[s] for s in steps) / len(steps)
        sxx = math.fsum((s - mean_x) ** 2 for s in steps)
        sxy = math.fsum((s - mean_x) * (values[s] - mean_y) for s in steps)
        per_segment.append(sxy / sxx)
        sxx_total += sxx
        sxy_total += sxy
    slope = sxy_total / sxx_total if sxx_total > 0 else math.nan
    return SlopeFit(slope, tuple((s[0], s[-1]) for s in segments if s), tuple(per_segment))


class Slope(Scope):
    name = "slope"
    exclusive_keys = ("split_at",)
    keys = ("window", "split_at")
    per_step_growth = True
    plots_band = False  # a slope's threshold bounds a growth per step: not a band around golden

    def parse(self, sec: Section) -> dict[str, Any]:
        if sec.data.get("method") not in SLOPE_METHODS:
            sec.fail("method", f"{show(sec.data.get('method'))} cannot judge a slope",
                     "write method: slowdown (growth per step above the golden's), absolute or value")
        split_at = tuple(sorted(set(sec.int_list("split_at")))) if "split_at" in sec.data else ()
        return {"split_at": split_at, "window": step_range(sec, "window") if "window" in sec.data else None}

    def check_id(self, spec: CheckSpec) -> str:
        if spec.window:
            return f"{spec.metric}[slope {spec.window[0]}-{spec.window[1]}]"
        return f"{spec.metric}[slope]"

    def describe(self, spec: CheckSpec) -> str:
        where = f"steps {spec.window[0]}-{spec.window[1]}" if spec.window else "every calibrated step"
        split = f", split at steps {'/'.join(str(s) for s in spec.split_at)}" if spec.split_at else ""
        return f"least-squares growth per step over {where} (within segments{split})"

    def parameters(self, spec: CheckSpec) -> dict[str, Any]:
        return {"split_at": list(spec.split_at)}

    def evaluate(self, spec: CheckSpec, job: Job) -> Any:
        """Growth per step (least squares within segments) of current against golden's."""
        display, cur, gold = job.display, job.cur, job.gold
        steps = in_range(cur if gold is None else gold, job.calibrated)
        if spec.window:
            steps = [s for s in steps if spec.window[0] <= s <= spec.window[1]]
        points, missing, broken = job.compare(replace(spec, method="value" if gold is None else "absolute",
                                                      operator="<", threshold=math.inf), steps, cur, gold)
        # each point's error is the per-step difference (current itself for a bound): its slope is the statistic
        difference = (tuple(c - g for c, g in zip(points.current, points.baseline)) if gold is not None
                      else points.current)
        nonfinite = [p for p in points if not math.isfinite(p.current)]
        points = job.points(points.steps, points.current, points.baseline, difference,
                            tuple(not math.isfinite(p.current) for p in points))
        if broken:
            return job.error(f"{display}: baseline has non-finite golden values at steps "
                             f"{steps_text(broken)}; the baseline is broken, recalibrate it", points=points)
        if nonfinite:
            return job.fail(f"{display}: non-finite current value at step {nonfinite[0].step} "
                            f"({fmt(nonfinite[0].current)}); no growth can be fitted", points=points,
                            observed=math.nan, worst_step=nonfinite[0].step, first_breach_step=nonfinite[0].step)
        if missing:
            return job.error(f"{display}: current run lacks steps {steps_text(missing)} that the "
                             "baseline has; cannot decide", points=points)
        splits = sorted(set(spec.split_at) | set(job.restarts))
        segments = split_steps(list(points.steps), splits)
        current_fit = within_slope(segments, dict(zip(points.steps, points.current)))
        where = {"segments": [list(s) for s in current_fit.segments]}
        if not current_fit.fitted:
            return job.error(f"{display}: no segment has two steps or more to fit a growth per step "
                             f"(steps {steps_text(list(points.steps)) or 'none'}, split at "
                             f"{steps_text(splits) or 'none'}); cannot decide", points=points, parameters=where)
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
        steepest = max(((g, seg) for g, seg in zip(difference_fit.per_segment, current_fit.segments)
                        if math.isfinite(g)), default=(0.0, current_fit.segments[0]))[1]
        extra = dict(points=points, observed=error, worst_step=points.steps[-1],
                     first_breach_step=None if ok else steepest[0], parameters=where)
        parts = (f"{len(current_fit.segments)} segments split at steps {steps_text(splits)}"
                 if len(current_fit.segments) > 1 else "one segment")
        golden = "" if golden_slope is None else f" vs golden {golden_slope:+.3g}/step"
        name = {"slowdown": "growth above golden's", "absolute": "|growth - golden's|", "value": "growth"}[spec.method]
        message = (f"{display} over steps {points.steps[0]}-{points.steps[-1]} ({parts}): grows "
                   f"{current_fit.slope:+.3g}/step{golden} (least squares within segments), {name} {fmt(error)}/step "
                   f"{'' if ok else 'not '}{spec.operator} {spec.threshold:g}")
        if not ok and len(current_fit.segments) > 1:
            message += f" (steepest: steps {steepest[0]}-{steepest[1]})"
        return job.decide(ok, message, **extra)

    def mde_steps(self, spec: CheckSpec, golden: Mapping[int, float]) -> list[int]:
        return []  # a slope's MDE is a growth per step: no share of the metric's level describes it

    def floor(self, spec: CheckSpec, values: Sequence[float], steps: Sequence[int], relative_floor: float
              ) -> tuple[float, str] | None:
        if len(values) <= 1:
            return None
        # a growth per step: the relative floor of the level, spread over the steps the fit spans
        scale, span = max(abs(v) for v in values), max(steps) - min(steps)
        return (relative_floor * scale / span,
                f"relative floor {relative_floor:g} x max |golden| {scale:.4g} / {span} steps spanned")

    def table_cells(self, result: Any, error: str, threshold: str, step: str) -> tuple[str, str, str]:
        return f"growth: {error}/step", f"{threshold}/step", step
