"""Scope ``breaches``: a per-step value bound with a count of breaching steps allowed (``allowed_breaches:``).

The form of xtuner's own spec (``method: value``, ``< 0.001`` at every step), with the count a clean run may breach
it at made explicit. It is what a percentile of the per-step errors cannot see: a weight sync skipped on alternate
steps puts the train/inference mismatch at 1e-5..1e-2 on every second step and at the clean 1e-14 on the others, so
the median reads a clean step and passes. Here every step is judged on its own and the FAIL names the breaching
steps' period (:mod:`autotest.scopes.period`).

Calibration (:meth:`Breaches.calibrate`) sets the bound and the count from the clean runs:

- bound = max(margin x the largest value any calibration run logged at any step, the metric's declared floor
  (``calibration.floors``, capped at ``floor_headroom`` x that largest value, as for the golden checks));
- allowed breaches: no calibration value is above the bound, so the per-step chance p that a clean step breaches
  is below the one-sided upper bound ``1 - (budget/2)^(1/(N x S))`` (N runs of S steps, confidence 1 - budget/2);
  the count allowed is the smallest k with P(Binomial(S, p) > k) <= budget/2. A clean run then FAILs with
  probability at most ``calibration.false_alarm_budget`` (steps taken as independent; a clean run's spikes are).

Only ``method: value`` with ``<`` or ``<=`` (a bound on the value itself, no golden).
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any, Mapping

from autotest.scopes.kind import CalibrationJob, Job, fmt
from autotest.scopes.period import period_note
from autotest.scopes.stepwise import Stepwise

if TYPE_CHECKING:
    from autotest.inputs.baseline_model import CheckSpec
    from autotest.inputs.schema import Section

ALLOWED = "allowed_breaches"


def allowed_breaches(spec: CheckSpec) -> int:
    """The count of breaching steps the check allows (0 when the baseline does not say)."""
    return int(dict(spec.options).get(ALLOWED, 0))


def allowed_count(runs: int, steps: int, budget: float) -> tuple[int, float]:
    """(k, p): the breaches a clean run of ``steps`` steps stays within with probability >= 1 - budget/2 when
    its per-step breach chance is p, the upper (1 - budget/2) bound of a chance seen 0 times in runs x steps."""
    p = 1.0 - (budget / 2) ** (1.0 / max(runs * steps, 1))
    k, below = 0, (1 - p) ** steps  # P(X <= k) of Binomial(steps, p)
    term = below
    while 1.0 - below > budget / 2 and k < steps:
        term *= (steps - k) / (k + 1) * p / (1 - p)
        k += 1
        below += term
    return k, p


class Breaches(Stepwise):
    name = "breaches"
    judged_per_step = False  # its count of breaching steps is over the whole run
    exclusive_keys = (ALLOWED,)
    keys = (ALLOWED,)
    #: calibration sets this kind's value bound (every other ``method: value`` threshold is kept as written)
    calibrates_value = True

    def parse(self, sec: Section) -> dict[str, Any]:
        allowed = sec.integer(ALLOWED, minimum=0, default=0,
                              fix="write how many steps may breach the bound, e.g. 0 (calibrate sets it)")
        if sec.get("method", None) != "value":
            sec.fail("method", f"scope breaches bounds the value itself, not method {sec.get('method', None)!r}",
                     "write method: value (a per-step bound on the logged value)")
        return {"options": ((ALLOWED, allowed),)}

    def check_id(self, spec: CheckSpec) -> str:
        return f"{spec.metric}[breaches]"

    def describe(self, spec: CheckSpec) -> str:
        return f"at every step, at most {allowed_breaches(spec)} breaching steps"

    def parameters(self, spec: CheckSpec) -> dict[str, Any]:
        return {ALLOWED: allowed_breaches(spec)}

    def reduce(self, spec: CheckSpec, job: Job, points, breaches, worst, extra: dict) -> Any:
        extra["observed"] = worst.error if worst else None
        allowed = allowed_breaches(spec)
        if len(breaches) > allowed:
            first = breaches[0]
            return job.fail(f"{job.display}: {len(breaches)}/{len(points)} steps ({len(breaches) / len(points):.0%}) "
                            f"breach value {spec.operator} {spec.threshold:g}, {allowed} allowed"
                            f"{period_note(points.steps, [p.step for p in breaches])}; first breach at step "
                            f"{first.step}: {fmt(first.current)}; worst step {worst.step}: {fmt(worst.error)}",
                            **extra)
        return None

    def summary(self, spec: CheckSpec, worst, extra: dict) -> str:
        return (f"{len(extra['points'].breaches())} breaching steps, {allowed_breaches(spec)} allowed; "
                f"worst step {worst.step}: {fmt(worst.error)}")

    def decide_early(self, spec: CheckSpec, job: Job) -> Any:
        found = job.evaluate()  # more breaches than allowed on a prefix stay more on the whole run
        return found if getattr(found, "status", None) == "FAIL" else None

    def proposed_fields(self, series: Mapping[int, float]) -> dict[str, Any]:
        return {"options": ((ALLOWED, 0),)}

    def calibrate(self, spec: CheckSpec, job: CalibrationJob) -> Any:
        values = [v for run in job.runs for v in run.values()]
        steps = len(set().union(*(set(run) for run in job.runs))) if job.runs else 0
        if not values or not steps:
            return job.uncalibrated(f"no calibration run logged {spec.metric}")
        level = max(abs(v) for v in values)
        margin = job.settings.margin
        floor, floor_source = job.declared_floor(spec.metric, level) or (0.0, "none")
        threshold = max(level * margin, floor)
        if threshold <= 0:
            return job.uncalibrated(f"every calibration run logged {spec.metric} = 0; declare "
                                    f"calibration.floors.{spec.metric}")
        budget = job.settings.false_alarm_budget
        runs = len(job.runs)
        allowed, p = allowed_count(runs, steps, budget)
        binding = "largest value x margin" if level * margin >= floor else "the floor"
        derivation = (f"calibrated bound, N={runs} runs x {steps} steps: largest value {level:.3g} x margin "
                      f"{margin:g} = {level * margin:.3g}; floor {floor:.3g} ({floor_source}); bound = {binding}, "
                      f"rounded up to 2 significant digits; no calibration step breaches it, so a clean step's "
                      f"chance is < {p:.2g} (one-sided, confidence {1 - budget / 2:g}); {ALLOWED} {allowed} = the "
                      f"least k with P(Binomial({steps}, {p:.2g}) > k) <= {budget / 2:g} (false-alarm budget "
                      f"{budget:g}, split in two)")
        made = job.calibrated(threshold, derivation, rule="bound", measured_what="max value", measured=level,
                              basis=floor_source if binding == "the floor" else "largest value x margin")
        return replace(made, check=replace(made.check, options=((ALLOWED, allowed),)))

    def table_cells(self, result: Any, error: str, threshold: str, step: str) -> tuple[str, str, str]:
        allowed = result.parameters.get(ALLOWED, 0)
        if not len(result.points):
            return f"worst {error} ({allowed} breaches allowed)", threshold, f"worst {step}"
        breached = len(result.points.breaches())
        return (f"{breached}/{len(result.points)} steps breach ({allowed} allowed); worst {error}", threshold,
                f"worst {step}")
