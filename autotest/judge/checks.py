"""The one check engine: aligns series by real step, applies a method/operator, decides a status.

Methods (per point): absolute |cur-base|; relative |cur-base| / max(|base|, relative_floor);
slowdown max(0, cur-base); value cur (no baseline). A check passes when
``error OPERATOR threshold``. What a ``scope`` compares and how it reduces the points is its check kind's
(:mod:`autotest.scopes`, one module per kind): the engine hands the kind a :class:`_Job` with the check's
series and the tools it owns (alignment, statuses, results). Non-finite current values breach; non-finite
golden values make the check ERROR (the baseline is broken). Reference-severity checks are reported as INFO
and never fail.

A check whose threshold is ``placeholder`` (``rl-autotest init``'s proposal) is ERROR "threshold is a
placeholder" until calibration writes a measured one (a reference check's is INFO, as always).

A gate with no golden value to compare with (the metric absent from the golden table, or a declared
point absent from it) is ERROR "uncalibrated gate": INFO never blocks a PASS, so an uncalibrated gate
reported as INFO would let a broken run pass. Only a ``severity: reference`` check may be uncalibrated.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Mapping

from autotest.inputs.baseline import Baseline, CheckSpec
from autotest.judge.model import ERROR, FAIL, INFO, PASS, CheckResult, Points, StepPoint
from autotest.judge.power import calibration_runs
from autotest.judge.step_looks import look_bound
from autotest.judge.trace import Trace
from autotest.scopes import plugin_of, scope_kind
from autotest.scopes.kind import OPERATORS, Scope, fmt, point_error, passes

__all__ = ["decide_early", "evaluate_check", "fmt", "passes", "point_error", "run_checks"]

CALIBRATE_HINT = "run rl-autotest calibrate for this case (or declare the check severity: reference)"
PLACEHOLDER_HINT = "run rl-autotest calibrate for this case, then rl-autotest baseline promote"


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


def _base_result(spec: CheckSpec, status: str, message: str, **extra) -> CheckResult:
    parameters = {"relative_floor": spec.relative_floor} if spec.method == "relative" else {}
    if spec.points:
        parameters["points"] = list(spec.points)
    if spec.window:
        parameters["window"] = list(spec.window)
    parameters.update(scope_kind(spec.scope).parameters(spec))
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


def _uncalibrated(spec: CheckSpec, what: str, **extra) -> CheckResult:
    """No golden value: a gate cannot be decided (ERROR), a reference check only informs."""
    if spec.severity == "reference":
        return _base_result(spec, INFO, f"uncalibrated: {what}; run `rl-autotest calibrate` to calibrate it",
                            **extra)
    return _base_result(spec, ERROR, f"uncalibrated gate: {what}; {CALIBRATE_HINT}", **extra)


class _Job:
    """One check's series and the engine's tools, handed to its kind (:class:`autotest.scopes.kind.Job`)."""

    def __init__(self, spec: CheckSpec, baseline: Baseline, golden: Trace, current: Trace, golden_is_table: bool,
                 cur: Mapping[int, float] | None, gold: Mapping[int, float] | None) -> None:
        self.spec = spec
        self.display = baseline.display(spec.metric)
        self.cur = cur
        self.gold = gold
        self.calibrated = baseline.calibrated_range
        self.noise = (baseline.noise_table or {}).get(spec.metric)
        self.restarts = current.restarts
        self.looks = baseline.step_looks
        self._runs = calibration_runs(baseline)
        self._inputs = (baseline, golden, current, golden_is_table)

    compare = staticmethod(_compare_points)
    worst = staticmethod(_worst)
    points = Points

    def passed(self, message: str, **extra) -> CheckResult:
        return _base_result(self.spec, PASS, message, **extra)

    def fail(self, message: str, **extra) -> CheckResult:
        return _base_result(self.spec, FAIL, message, **extra)

    def error(self, message: str, **extra) -> CheckResult:
        return _base_result(self.spec, ERROR, message, **extra)

    def info(self, message: str, **extra) -> CheckResult:
        return _base_result(self.spec, INFO, message, **extra)

    def decide(self, ok: bool, message: str, **extra) -> CheckResult:
        return _base_result(self.spec, PASS if ok else FAIL, message, **extra)

    def uncalibrated(self, what: str, **extra) -> CheckResult:
        return _uncalibrated(self.spec, what, **extra)

    def evaluate(self) -> CheckResult:
        return evaluate_check(self.spec, *self._inputs)

    def look_bound(self, alpha: float, steps: int) -> float:
        return look_bound(alpha, steps, self._runs)


def _evaluate(spec: CheckSpec, baseline: Baseline, golden: Trace, current: Trace,
              golden_is_table: bool) -> CheckResult:
    display = baseline.display(spec.metric)
    if spec.placeholder:  # rl-autotest init's proposal: a number nobody measured must never pass
        return _base_result(spec, ERROR, f"{display}: threshold is a placeholder (written by rl-autotest init, "
                                         f"not measured); {PLACEHOLDER_HINT}")
    cur = current.get(spec.metric)
    logged_as = current.non_numeric.get(spec.metric)
    if logged_as is not None:
        kind, where = logged_as
        return _base_result(spec, ERROR, f"{display} is logged as {kind}, not a number ({current.source}, "
                                         f"{where}); log it as a number")
    if cur is None:
        return _base_result(spec, ERROR, f"{display} is missing from the current run ({current.source}); "
                                        "a checked metric never passes silently")
    gold = None
    if spec.method != "value":
        gold = golden.get(spec.metric)
        if gold is None:
            if golden_is_table:
                return _uncalibrated(spec, f"{display} has no golden value in the baseline's golden table")
            return _base_result(spec, ERROR, f"{display} is missing from the baseline tracker "
                                             f"({golden.source}); the baseline is incomplete")
    job = _Job(spec, baseline, golden, current, golden_is_table, cur, gold)
    return _ask(scope_kind(spec.scope), "evaluate", spec, job)


def _ask(kind: Scope, method: str, spec: CheckSpec, job: _Job) -> CheckResult | None:
    """``kind.<method>(spec, job)``; a third-party kind that raises is an ERROR naming its plugin, not a traceback."""
    plugin = plugin_of(kind)
    if plugin is None:
        return getattr(kind, method)(spec, job)
    try:
        return getattr(kind, method)(spec, job)
    except Exception as exc:
        return _base_result(spec, ERROR, f"{job.display}: check kind plugin {plugin} failed in {method}: "
                                         f"{type(exc).__name__}: {exc}; fix or uninstall the package that provides it")


def evaluate_check(spec: CheckSpec, baseline: Baseline, golden: Trace, current: Trace,
                   golden_is_table: bool) -> CheckResult:
    result = _evaluate(spec, baseline, golden, current, golden_is_table)
    if spec.severity == "reference" and result.status != INFO:
        # reference checks inform (e.g. machine-dependent step time) and never decide the run
        outcome = {PASS: "within threshold", FAIL: "outside threshold", ERROR: "undecided"}[result.status]
        result = replace(result, status=INFO, message=f"reference only, {outcome}: {result.message}")
    return result


def run_checks(baseline: Baseline, golden: Trace, current: Trace, golden_is_table: bool) -> list[CheckResult]:
    """Every declared check of ``baseline`` on ``current`` (structural results come from judge.structural)."""
    return [evaluate_check(spec, baseline, golden, current, golden_is_table) for spec in baseline.checks]


def decide_early(spec: CheckSpec, baseline: Baseline, golden: Trace, current: Trace,
                 golden_is_table: bool) -> CheckResult | None:
    """What a prefix of a run (``current`` so far) already decides for ``spec``, or None: its kind waits for the
    end (the live follower's fail-fast, :mod:`autotest.judge.live`)."""
    job = _Job(spec, baseline, golden, current, golden_is_table, current.get(spec.metric), golden.get(spec.metric))
    return _ask(scope_kind(spec.scope), "decide_early", spec, job)
