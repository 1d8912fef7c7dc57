"""Scope ``points``: the named steps (``points: [5, 10]``, e.g. eval points); a named step with no golden value
is a gate that checks less than it says (uncalibrated)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Mapping

from autotest.scopes.kind import Job, Scope, breach_message, error_name, fmt, steps_text

if TYPE_CHECKING:
    from autotest.inputs.baseline_model import CheckSpec
    from autotest.inputs.schema import Section


class Points(Scope):
    name = "points"
    keys = ("points",)
    locates = True

    def parse(self, sec: Section) -> dict[str, Any]:
        points = tuple(sorted(set(sec.int_list("points"))))
        if not points:
            sec.fail("points", "the list is empty", "name the steps to check, e.g. [5, 10]")
        return {"points": points}

    def describe(self, spec: CheckSpec) -> str:
        return "at steps " + "/".join(str(p) for p in spec.points)

    def parameters(self, spec: CheckSpec) -> dict[str, Any]:
        return {"points": list(spec.points)}

    def evaluate(self, spec: CheckSpec, job: Job) -> Any:
        display, cur, gold = job.display, job.cur, job.gold
        calibrated_points = [p for p in spec.points if gold is None or p in gold]
        uncalibrated = [p for p in spec.points if p not in calibrated_points]
        points, missing, broken = job.compare(spec, calibrated_points, cur, gold)
        breaches = points.breaches()
        worst = job.worst(points, spec.operator)
        extra = dict(points=points, worst_step=worst.step if worst else None,
                     first_breach_step=breaches[0].step if breaches else None,
                     observed=worst.error if worst else None)
        note = f"; no golden value at steps {steps_text(uncalibrated)} (uncalibrated)" if uncalibrated else ""
        if broken:
            return job.error(f"{display}: non-finite golden values at steps {steps_text(broken)}; "
                             "the baseline is broken", **extra)
        if breaches:
            return job.fail(breach_message(spec, breaches[0], display)
                            + f" ({len(breaches)}/{len(points)} points breach){note}", **extra)
        if missing:
            return job.error(f"{display}: current run has no value at steps {steps_text(missing)}; "
                             f"cannot decide{note}", **extra)
        if uncalibrated and (spec.gating or not len(points)):
            # a declared point with no golden value is a gate that checks less than it says
            return job.uncalibrated(f"{display} has no golden value at steps {steps_text(uncalibrated)}", **extra)
        return job.passed(f"{display}: all {len(points)} points within {error_name(spec)} "
                          f"{spec.operator} {spec.threshold:g} (worst step {worst.step}: "
                          f"{fmt(worst.error)}){note}", **extra)

    def decide_early(self, spec: CheckSpec, job: Job) -> Any:
        return job.evaluate()  # a breach at a logged point stays one

    def mde_steps(self, spec: CheckSpec, golden: Mapping[int, float]) -> list[int]:
        return [s for s in spec.points if s in golden]

    def proposed_fields(self, series: Mapping[int, float]) -> dict[str, Any]:
        return {"points": (min(series or {0: 0.0}),)}

    def measured_points(self, spec: CheckSpec, logged: Mapping[int, float]) -> tuple[int, ...]:
        """The declared points calibration can measure: those the calibration runs all logged."""
        return tuple(p for p in spec.points if p in logged)
