"""Scope ``final``: the last point in the calibrated range, at the same step on both sides (did the run finish?)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Mapping

from autotest.scopes.kind import Job, Scope, breach_message, error_name, fmt, in_range

if TYPE_CHECKING:
    from autotest.inputs.baseline_model import CheckSpec


class Final(Scope):
    name = "final"
    locates = True

    def describe(self, spec: CheckSpec) -> str:
        return "final point only"

    def evaluate(self, spec: CheckSpec, job: Job) -> Any:
        display, cur, gold, calibrated = job.display, job.cur, job.gold, job.calibrated
        cur_steps = in_range(cur, calibrated)
        if not cur_steps:
            return job.error(f"{display}: no current value in the calibrated range")
        last = cur_steps[-1]
        golden_value = None
        if gold is not None:
            gold_steps = in_range(gold, calibrated)
            if not gold_steps:
                return job.error(f"{display}: no golden value in the calibrated range")
            if gold_steps[-1] != last:
                return job.error(f"{display}: final points are at different steps (current "
                                 f"{last}, baseline {gold_steps[-1]}); did the run finish?")
            golden_value = gold[last]
        points, _, broken = job.compare(spec, [last], cur, None if gold is None else {last: golden_value})
        point = points[0]
        extra = dict(points=points, observed=point.error, worst_step=last,
                     first_breach_step=last if point.breached else None)
        if broken:
            return job.error(f"{display}: golden final value is non-finite; the baseline is broken", **extra)
        if point.breached:
            return job.fail(breach_message(spec, point, display) + " (final point)", **extra)
        golden = "" if spec.method == "value" else f" vs golden {fmt(golden_value)}"
        return job.passed(f"{display} final step {last}: {fmt(point.current)}{golden}, "
                          f"{error_name(spec)} {fmt(point.error)} {spec.operator} {spec.threshold:g}", **extra)

    def mde_steps(self, spec: CheckSpec, golden: Mapping[int, float]) -> list[int]:
        return sorted(golden)[-1:]

    def signed_shift(self, spec: CheckSpec, golden: Mapping[int, float], current: Mapping[int, float]) -> float | None:
        """The run minus golden at the last step (signed), for a distance check; None: use the observed error."""
        if golden and max(golden) in current and spec.method != "relative":
            return current[max(golden)] - golden[max(golden)]
        return None
