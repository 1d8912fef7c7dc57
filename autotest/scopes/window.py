"""Scope ``window``: the mean over ``window: [first, last]`` of current against the golden's mean."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from autotest.inputs.schema import show
from autotest.scopes.kind import Job, Scope, error_name, fmt, passes, point_error, steps_text

if TYPE_CHECKING:
    from autotest.inputs.baseline_model import CheckSpec
    from autotest.inputs.schema import Section


def step_range(sec: Section, name: str) -> tuple[int, int]:
    """``[first, last]`` (whole steps, first <= last): a window, or the baseline's calibrated range."""
    steps = sec.int_list(name)
    if len(steps) != 2 or steps[0] > steps[1]:
        sec.fail(name, f"{show(list(steps))} is not [first_step, last_step]", "write e.g. [0, 25] (first <= last)")
    return steps[0], steps[1]


class Window(Scope):
    name = "window"
    keys = ("window",)

    def parse(self, sec: Section) -> dict[str, Any]:
        return {"window": step_range(sec, "window")}

    def describe(self, spec: CheckSpec) -> str:
        return f"mean over steps {spec.window[0]}-{spec.window[1]}" if spec.window else spec.scope

    def evaluate(self, spec: CheckSpec, job: Job) -> Any:
        display, cur, gold = job.display, job.cur, job.gold
        first, last = spec.window
        steps = sorted(s for s in (cur if gold is None else gold) if first <= s <= last)
        points, missing, broken = job.compare(spec, steps, cur, gold)
        extra: dict[str, Any] = dict(points=points)
        if broken:
            return job.error(f"{display}: non-finite golden values at steps {steps_text(broken)}", **extra)
        if missing or not len(points):
            return job.error(f"{display}: window {first}-{last} lacks current values at steps "
                             f"{steps_text(missing) or 'all'}; cannot decide", **extra)
        cur_mean = sum(points.current) / len(points)
        gold_mean = None if gold is None else sum(points.baseline) / len(points)
        error = (point_error(spec.method, cur_mean, gold_mean, spec.relative_floor) if math.isfinite(cur_mean)
                 else math.nan)
        extra["observed"] = error
        ok = passes(error, spec.operator, spec.threshold)
        golden = "" if gold_mean is None else f" vs golden mean {fmt(gold_mean)}"
        message = (f"{display} mean over steps {first}-{last}: {fmt(cur_mean)}{golden}, {error_name(spec)} "
                   f"{fmt(error)} {'' if ok else 'not '}{spec.operator} {spec.threshold:g}")
        return job.decide(ok, message, **extra)

    def decide_early(self, spec: CheckSpec, job: Job) -> Any:
        """Decided once the window's last golden step is logged (its mean is then final); a bound without golden
        waits for the end (the run's own steps say where the window ends only then)."""
        if job.gold is None:
            return None
        steps = [s for s in job.gold if spec.window[0] <= s <= spec.window[1]]
        return self.evaluate(spec, job) if steps and all(s in job.cur for s in steps) else None

    def table_cells(self, result: Any, error: str, threshold: str, step: str) -> tuple[str, str, str]:
        return f"window mean: {error}", threshold, step
