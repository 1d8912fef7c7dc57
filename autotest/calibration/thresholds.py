"""Calibration: N runs of a case -> golden values and thresholds measured from run-to-run noise.

Pure logic over :class:`~autotest.judge.trace.Trace` objects; launching the runs and writing files is
``calibration_run``. The spec (which metrics, methods, scopes, severities; the ``calibration:``
settings) is the current baseline; calibration fills its golden table and thresholds:

- golden = mean over the N runs, per step (eval metrics per eval point); a step that not every
  run logged is left out, so the check engine reports it as uncalibrated;
- measured max run-to-run deviation = the largest, over every ordered pair of runs (one as
  current, the other as golden), of the check's own statistic (stepwise worst step, p80 of
  per-step errors, per point, final, window mean, slope excess), computed by the check engine itself. A pair
  differs by more than a fresh run differs from the N-run mean (sd sqrt(2) against
  sqrt(1 + 1/N)), which with the margin is what keeps small-N thresholds from being tight;
- threshold = max(measured x margin, floors), rounded up to two significant digits. Floors: the
  spec's per-metric ``floors`` (capped at ``floor_headroom`` x the case's own level, max |golden| or the
  measured deviation, so a bf16-sized floor never hides an fp32 case's healthy 1e-14), the relative floor (of max |golden| for absolute checks; for a
  slope, that share of the level grown over the steps it fits) and, for
  eval metrics with a known eval-set size n, the binomial noise z * sqrt(p(1-p)/n).

That is the generic rule. A check kind may bring its own (``Scope.calibrate``: it gets a
:class:`~autotest.scopes.kind.CalibrationJob` with the check's runs and this module's tools, and answers
``job.calibrated(...)``, ``job.uncalibrated(why)`` or ``job.default()``, the generic rule). Pooled checks
(``scope: pooled``) bring theirs: from the spread of their own statistic and a declared false-alarm budget, with
per-step noise stored beside the golden table (``autotest.calibration.pooled_noise``, ``autotest.scopes.pooled``).

A gate whose minimum detectable effect exceeds its metric's whole range cannot fire: it is kept as
``severity: reference`` and listed as useless (``autotest.calibration.usefulness``).

``leave_one_out`` re-calibrates from N-1 runs and checks the held-out run: an estimate of the
false-alarm rate of the margin.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from types import MappingProxyType
from typing import Mapping, Sequence

from autotest.calibration.pooled_noise import least_roughness, noise_table
from autotest.calibration.usefulness import UselessCheck, demote, restored, useless_checks
from autotest.errors import UsageError
from autotest.inputs.baseline import Baseline, CalibrationSpec, CheckSpec
from autotest.judge.checks import evaluate_check
from autotest.judge.model import ERROR, FAIL
from autotest.judge.power import t_quantile
from autotest.judge.trace import Trace
from autotest.judge.verdict import compare, golden_trace
from autotest.scopes import ask, plugin_of, scope_kind

SIGNIFICANT_DIGITS = 2
#: below this N the max deviation is one or two differences: the margin multiplies luck
MIN_USEFUL_RUNS = 3
CALIBRATED, UNCALIBRATED, KEPT = "calibrated", "uncalibrated", "kept"


class CalibrationError(RuntimeError):
    """The runs cannot be calibrated from (a checked metric missing, a non-finite value, ...)."""


@dataclass(frozen=True)
class CalibratedCheck:
    """One check of the spec and what calibration made of it."""

    check: CheckSpec
    previous: CheckSpec
    status: str  # calibrated / uncalibrated / kept
    note: str = ""
    per_run: tuple[float, ...] = ()
    measured: float | None = None
    proposed: float | None = None  # measured x margin
    floor: float | None = None
    floor_source: str = ""
    compared_steps: tuple[int, ...] = ()
    #: the kind's own rule, as the review report's method column names it ("": the generic rule)
    rule: str = ""
    #: what ``measured`` is under the kind's own rule (``max |loo mean z|``)
    measured_what: str = ""


@dataclass(frozen=True)
class Calibration:
    """The candidate baseline (in memory) and how each threshold was made."""

    baseline: Baseline
    checks: tuple[CalibratedCheck, ...]
    uncovered: Mapping[str, tuple[int, ...]]
    settings: CalibrationSpec
    sources: tuple[str, ...]
    #: gates whose MDE exceeds their metric's range, kept as reference only (``autotest.calibration.usefulness``)
    useless: tuple[UselessCheck, ...] = ()

    @property
    def num_runs(self) -> int:
        return len(self.sources)


@dataclass(frozen=True)
class HeldOut:
    """One leave-one-out round: run ``label`` checked against a baseline calibrated from the others."""

    label: str
    status: str
    failing: tuple[str, ...]


@dataclass(frozen=True)
class SelfCheck:
    held_out: tuple[HeldOut, ...]

    @property
    def false_alarms(self) -> int:
        return sum(h.status == FAIL for h in self.held_out)

    @property
    def false_alarm_rate(self) -> float | None:
        return self.false_alarms / len(self.held_out) if self.held_out else None


def round_up(value: float, digits: int = SIGNIFICANT_DIGITS) -> float:
    """``value`` rounded up to ``digits`` significant digits (a threshold is never lowered by rounding)."""
    if value <= 0 or not math.isfinite(value):
        return value
    quantum = 10.0 ** (math.floor(math.log10(value)) - digits + 1)
    # the small slack keeps 0.03 at 0.03 despite 0.03 / 0.001 == 30.000000000000004
    return float(f"{math.ceil(value / quantum - 1e-9) * quantum:.{digits}g}")


def _mean_table(metrics: Sequence[str], traces: Sequence[Trace]) -> tuple[dict[str, dict[int, float]],
                                                                           dict[str, tuple[int, ...]]]:
    golden: dict[str, dict[int, float]] = {}
    uncovered: dict[str, tuple[int, ...]] = {}
    for metric in metrics:
        series = []
        for trace in traces:
            values = trace.get(metric)
            if values is None:
                raise CalibrationError(f"{metric} is missing from calibration run {trace.source}; "
                                       "every checked metric must be logged by every run")
            bad = [s for s, v in values.items() if not math.isfinite(v)]
            if bad:
                raise CalibrationError(f"{metric} is non-finite at step {bad[0]} in calibration run "
                                       f"{trace.source}; a broken run cannot be a baseline")
            series.append(values)
        common = set(series[0]).intersection(*series[1:])
        partial = set().union(*series) - common
        if partial:
            uncovered[metric] = tuple(sorted(partial))
        golden[metric] = {s: math.fsum(v[s] for v in series) / len(series) for s in sorted(common)}
    return golden, uncovered


def _floors(check: CheckSpec, golden: Mapping[int, float], steps: Sequence[int], settings: CalibrationSpec,
            eval_set_size: Mapping[str, int], measured: float = 0.0) -> list[tuple[float, str]]:
    values = [golden[s] for s in steps if s in golden]
    floors: list[tuple[float, str]] = []
    declared = _declared_floor(check.metric, max([abs(v) for v in values] + [measured]), settings)
    if declared is not None:
        floors.append(declared)
    level = scope_kind(check.scope).floor(check, values, steps, settings.relative_floor)
    if check.method == "relative":
        floors.append((settings.relative_floor, f"relative floor {settings.relative_floor:g}"))
    elif level is not None:
        floors.append(level)
    elif values:
        scale = max(abs(v) for v in values)
        floors.append((settings.relative_floor * scale,
                       f"relative floor {settings.relative_floor:g} x max |golden| {scale:.4g}"))
    n = eval_set_size.get(check.metric)
    if n and check.method == "absolute" and values:
        # the noisiest point decides; one flipped item (1/n) is always possible, even at p = 0 or 1
        p = max(values, key=lambda v: v * (1 - v))
        variance = max(p * (1 - p), (1 / n) * (1 - 1 / n))
        floors.append((settings.binomial_z * math.sqrt(variance / n),
                       f"binomial {settings.binomial_z:g} x sqrt(p(1-p)/n), n={n}, p={p:.3g}"))
    return floors


def _declared_floor(metric: str, level: float, settings: CalibrationSpec) -> tuple[float, str] | None:
    """``calibration.floors[metric]`` capped at ``floor_headroom`` x ``level``: the case's own runs say what healthy
    is, so a floor sized for another precision must not hide it."""
    if metric not in settings.floors:
        return None
    declared, cap = settings.floors[metric], settings.floor_headroom * level
    if 0 < cap < declared:
        return cap, (f"calibration.floors {declared:g} capped at floor_headroom {settings.floor_headroom:g} x the "
                     f"case's own level {level:.3g}")
    return declared, f"calibration.floors {declared:g}"


def _measure(check: CheckSpec, baseline: Baseline, runs: Sequence[Trace]):
    """Run-to-run deviation: the check's own statistic (the check engine's) for every ordered pair of
    runs, one as current and the other as golden. Returns each run's largest, and the compared steps.
    """
    probe = replace(check, placeholder=False, threshold=math.inf, operator="<", severity="gate")
    # a point not every run logged has no golden mean: measure the others, the engine reports the rest
    covered = scope_kind(check.scope).measured_points(check, (baseline.golden_table or {}).get(check.metric) or {})
    if covered is not None:
        if not covered:
            return None, (), f"no calibration run logged {check.metric} at steps {list(check.points)}"
        probe = replace(probe, points=covered)
    per_run, steps = [], ()
    for i, current in enumerate(runs):
        worst = 0.0
        # a single run is its own golden (deviation 0): thresholds are then the floors
        for j, golden in enumerate(runs):
            if i == j and len(runs) > 1:
                continue
            result = evaluate_check(probe, baseline, golden, current, True)
            if result.status == ERROR or result.observed is None or not math.isfinite(result.observed):
                raise CalibrationError(f"{check.check_id}: cannot measure calibration run {current.source} "
                                       f"against {golden.source}: {result.message}")
            worst = max(worst, float(result.observed))
            steps = result.points.steps
        per_run.append(worst)
    return tuple(per_run), tuple(steps), ""


def _covered(trace: Trace, table: Mapping[str, Mapping[int, float]]) -> Trace:
    """``trace`` cut to the steps every run logged (the golden table's), so pairs compare like with like."""
    series = {m: MappingProxyType({s: trace.series[m][s] for s in steps}) for m, steps in table.items()}
    return replace(trace, series=MappingProxyType(series))


class _Calibrating:
    """One check's runs and calibration's tools, handed to its kind (:class:`autotest.scopes.kind.CalibrationJob`)."""

    t_quantile = staticmethod(t_quantile)

    def __init__(self, check: CheckSpec, baseline: Baseline, golden: Trace, runs: Sequence[Trace],
                 settings: CalibrationSpec, eval_set_size: Mapping[str, int], noise_gates: int) -> None:
        self.check = check
        self.runs = tuple(t.get(check.metric) or {} for t in runs)
        self.golden = golden.get(check.metric) or {}
        self.settings = settings
        self.noise_gates = noise_gates
        self._inputs = (baseline, golden, runs, settings, eval_set_size)

    def default(self) -> CalibratedCheck:
        return _max_deviation_rule(self.check, *self._inputs)

    def statistic(self, current: Mapping[int, float], golden: Mapping[int, float]) -> float:
        check, baseline = self.check, self._inputs[0]
        probe = replace(check, placeholder=False, threshold=math.inf, operator="<", severity="gate")
        result = evaluate_check(probe, baseline, Trace("golden", {check.metric: golden}),
                                Trace("current", {check.metric: current}), True)
        if result.status == ERROR or result.observed is None or not math.isfinite(result.observed):
            raise CalibrationError(f"{check.check_id}: cannot measure a calibration run: {result.message}")
        return float(result.observed)

    def calibrated(self, threshold: float, derivation: str, *, rule: str, measured_what: str = "",
                   per_run: Sequence[float] = (), measured: float | None = None, basis: str = "",
                   steps: Sequence[int] = ()) -> CalibratedCheck:
        check = self.check
        new = replace(check, placeholder=False, threshold=round_up(threshold), derivation=derivation,
                      measured_max_deviation=None if measured is None else float(f"{measured:.4g}"))
        return CalibratedCheck(new, check, CALIBRATED, derivation, tuple(per_run), measured, threshold, None, basis,
                               tuple(steps), rule, measured_what)

    def uncalibrated(self, why: str) -> CalibratedCheck:
        return _uncalibrated(self.check, why)

    def declared_floor(self, metric: str, level: float) -> tuple[float, str] | None:
        return _declared_floor(metric, level, self.settings)


def _uncalibrated(check: CheckSpec, why: str) -> CalibratedCheck:
    return CalibratedCheck(replace(check, derivation=f"uncalibrated: {why}", measured_max_deviation=None), check,
                           UNCALIBRATED, why)


def _calibrate_check(check: CheckSpec, baseline: Baseline, golden: Trace, runs: Sequence[Trace],
                     settings: CalibrationSpec, eval_set_size: Mapping[str, int],
                     noise_gates: int = 1) -> CalibratedCheck:
    kind = scope_kind(check.scope)
    value = check.method == "value" and not kind.calibrates_value  # a bound written by hand is kept
    if value or check.operator not in ("<", "<="):
        why = "method 'value' is a bound, not a distance to golden" if value else \
            f"operator {check.operator!r}: only error < / <= threshold is calibrated from noise"
        return CalibratedCheck(check, check, KEPT, f"threshold kept: {why}")
    job = _Calibrating(check, baseline, golden, runs, settings, eval_set_size, noise_gates)
    made = ask(kind, "calibrate", check, job, passing=(CalibrationError,))
    if not isinstance(made, CalibratedCheck):
        raise UsageError(f"check kind plugin {plugin_of(kind)}: calibrate returned {made!r} for {check.check_id}; "
                         "return job.calibrated(...), job.uncalibrated(why) or job.default()")
    return made


def _max_deviation_rule(check: CheckSpec, baseline: Baseline, golden: Trace, runs: Sequence[Trace],
                        settings: CalibrationSpec, eval_set_size: Mapping[str, int]) -> CalibratedCheck:
    """The generic rule: max run-to-run deviation x margin, at least the floors (module doc)."""
    per_run, steps, why = _measure(check, baseline, runs)
    if per_run is None:
        return _uncalibrated(check, why)
    measured = max(per_run)
    proposed = measured * settings.margin
    floors = _floors(check, golden.get(check.metric) or {}, steps, settings, eval_set_size, measured)
    floor, floor_source = max(floors, default=(0.0, "none"))
    if max(proposed, floor) <= 0:
        raise UsageError(f"{baseline.path}: calibration.floors.{check.metric}: the runs agree exactly and the "
                         "golden values are 0, so the threshold would be 0; declare a floor")
    threshold = round_up(max(proposed, floor))
    binding = "measured x margin" if proposed >= floor else "the floor"
    n = len(runs)
    derivation = (f"calibrated, N={n}: max run-to-run deviation {measured:.3g} x margin {settings.margin:g} = "
                  f"{proposed:.3g}; floor {floor:.3g} ({floor_source}); threshold = {binding}, "
                  f"rounded up to {SIGNIFICANT_DIGITS} significant digits")
    new = replace(check, placeholder=False, threshold=threshold, derivation=derivation,
                  measured_max_deviation=float(f"{measured:.4g}"))
    return CalibratedCheck(new, check, CALIBRATED, derivation, per_run, measured, proposed, floor, floor_source,
                           steps)


def calibrate(spec: Baseline, traces: Sequence[Trace], *, settings: CalibrationSpec | None = None,
              eval_set_size: Mapping[str, int] | None = None) -> Calibration:
    """Golden means and thresholds for ``spec``'s checks from the runs' ``traces`` (at least one).

    ``eval_set_size`` (eval metric -> items, e.g. read from the runs' saved config) is used where
    the spec's ``calibration.eval_set_size`` does not say.
    """
    if not traces:
        raise CalibrationError("no calibration runs to calibrate from")
    settings = settings or spec.calibration or CalibrationSpec()
    sizes = {**dict(eval_set_size or {}), **dict(settings.eval_set_size)}
    if spec.metric_aliases:
        traces = [t.with_aliases(dict(spec.metric_aliases)) for t in traces]
    metrics = sorted({c.metric for c in spec.checks if c.method != "value" or scope_kind(c.scope).calibrates_value})
    table, uncovered = _mean_table(metrics, traces)
    steps = [s for series in table.values() for s in series]
    frozen = MappingProxyType({m: MappingProxyType(v) for m, v in table.items()})
    runs = [_covered(t, table) for t in traces]
    judged = restored(spec.checks)  # a check demoted as useless last time is a gate again until re-judged
    noisy = [c for c in judged if scope_kind(c.scope).uses_noise]  # judged in noise units: their noise measured
    noise = noise_table(sorted({c.metric for c in noisy}), table, runs)
    draft = replace(spec, golden_table=frozen, golden_tracker=None, golden_format="auto",
                    calibrated_range=(min(steps), max(steps)) if steps else None, calibration=settings,
                    noise_table=MappingProxyType({m: MappingProxyType(v) for m, v in noise.items()}) if noise
                    else None)
    golden = golden_trace(draft)
    if noise:
        draft = replace(draft, roughness=MappingProxyType(least_roughness(noise, golden, runs)) or None)
    gates = sum(c.gating for c in noisy)  # a shadow gate is a gate-in-waiting: its share of the budget too
    checks = tuple(_calibrate_check(c, draft, golden, runs, settings, sizes, gates) for c in judged)
    useless = {u.check_id: u for u in useless_checks(replace(draft, checks=tuple(c.check for c in checks)),
                                                     runs, sizes)}
    checks = tuple(replace(c, check=demote(c.check, useless[c.check.check_id])) if c.check.check_id in useless
                   else c for c in checks)
    baseline = replace(draft, checks=tuple(c.check for c in checks))
    return Calibration(baseline, checks, MappingProxyType(uncovered), settings, tuple(t.source for t in traces),
                       tuple(useless.values()))


def leave_one_out(spec: Baseline, traces: Sequence[Trace], labels: Sequence[str] | None = None, *,
                  settings: CalibrationSpec | None = None,
                  eval_set_size: Mapping[str, int] | None = None) -> SelfCheck:
    """Check each run against a baseline calibrated from the other N-1: how often would it false-alarm?"""
    labels = list(labels or [t.source for t in traces])
    rounds = []
    for i, held in enumerate(traces):
        others = [t for j, t in enumerate(traces) if j != i]
        try:
            candidate = calibrate(spec, others, settings=settings, eval_set_size=eval_set_size).baseline
        except (CalibrationError, UsageError) as exc:
            rounds.append(HeldOut(labels[i], ERROR, (f"could not calibrate from the others: {exc}",)))
            continue
        verdict = compare(candidate, held).verdict
        failing = tuple(f"{r.check_id}: {r.message}" for r in verdict.results
                        if r.is_gate and r.status in (FAIL, ERROR))
        rounds.append(HeldOut(labels[i], verdict.status, failing))
    return SelfCheck(tuple(rounds))


def sample_size_warnings(num_runs: int, margin: float, self_check: SelfCheck | None) -> list[str]:
    """Warnings that the measured noise is too thin a basis (shown in the report and printed)."""
    warnings = []
    if num_runs < MIN_USEFUL_RUNS:
        pairs = num_runs * (num_runs - 1) // 2
        warnings.append(f"N={num_runs} runs: the max deviation rests on {pairs or 'no'} pair(s) of runs, so "
                        f"margin {margin:g} multiplies luck; calibrate with --runs {MIN_USEFUL_RUNS} or more")
    if self_check is not None and self_check.false_alarms:
        warnings.append(f"leave-one-out: {self_check.false_alarms} of {len(self_check.held_out)} held-out runs "
                        "FAIL against a baseline calibrated from the others; a fresh healthy run may false-alarm: "
                        "add runs or raise calibration.margin before promoting")
    return warnings


def exceed_chance(num_runs: int) -> float:
    """Chance that a fresh run's deviation exceeds the largest of N exchangeable ones, before the margin."""
    return 1.0 / (num_runs + 1)
