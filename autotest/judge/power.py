"""What a gate can see: the minimum detectable effect (MDE) of each gate, from the noise model behind its threshold.

The MDE is the smallest constant shift of a metric that the gate catches with probability ``POWER`` (80%),
at the false-alarm rate its threshold keeps. It is computed from the baseline alone:

- **pooled** gates (threshold = t quantile q(N-1 dof, 1 - budget/2m) x spread, ``autotest.calibration.
  pooled_noise``): a fresh run's statistic is normal around the effect with sd sigma_K = s1 sqrt(1/K + 1/N)
  (s1: one seed's spread, N calibration runs, K replicates judged on their mean), the threshold is q sigma_K,
  so the gate catches delta with 80% power when delta = (q + z_0.8) sigma_K = threshold x (1 + z_0.8 / q).
  In the metric's units: a constant shift delta moves the mean standardised deviation by delta x mean(1/noise_s)
  over the window; the trend statistic's MDE is the change across the window.
- **per-step** gates (threshold = max run-to-run deviation x margin, floors): one seed's sd of the statistic is
  estimated from the calibration range, sigma = measured / d2(N) (d2: expected range of N normal draws), and
  delta = threshold + z_0.8 x sigma x sqrt(1/K + 1/N). An approximation, marked as such: the threshold does not
  narrow with more calibration runs (the range of N runs grows with N), so the N column repeats it.
- **slope** gates (``scope: slope``, a leak check): the same per-step rule on the fitted growth per step, so the
  MDE is the smallest extra growth per step (e.g. MiB/step) caught; it is never shown as a share of golden.
- **bounds** (``method: value``) and gates without a measured deviation have no MDE: they catch values past
  the bound, whatever the golden.

The per-step rule is the default; a check kind with a noise model of its own brings its MDE (``Scope.power``,
``half_power_shift`` and ``measured_shift``, handed a :class:`~autotest.scopes.kind.PowerJob` with the baseline and
this module's tools). The pooled kind's is the first item above (``autotest.scopes.pooled``).

Pure Python: the t quantile is computed here (numerical integration), so a verdict never imports scipy.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping, Sequence
from typing import Any, Callable
from dataclasses import dataclass, field, replace
from statistics import NormalDist

from autotest.errors import UsageError
from autotest.inputs.baseline import Baseline, CheckSpec
from autotest.judge.model import ERROR, INFO, PASS, CheckResult, Verdict
from autotest.scopes import ask, find, plugin_of, scope_kind

POWER = 0.8
Z_POWER = NormalDist().inv_cdf(POWER)
REPLICATES = (1, 2, 4, 8)
MORE_RUNS = (10, 20)
#: expected range of N standard normal draws (d2 of control charts)
_D2 = {2: 1.128, 3: 1.693, 4: 2.059, 5: 2.326, 6: 2.534, 7: 2.704, 8: 2.847, 9: 2.970, 10: 3.078,
       11: 3.173, 12: 3.258, 13: 3.336, 14: 3.407, 15: 3.472, 16: 3.532, 17: 3.588, 18: 3.640, 19: 3.689,
       20: 3.735}


@dataclass(frozen=True)
class GatePower:
    """The MDE of one gate in the metric's units (and as a share of |golden|), by replicates and by runs."""

    check_id: str
    metric: str
    #: K replicates -> MDE in the metric's units (the calibration's N)
    by_replicates: Mapping[int, float]
    #: N calibration runs -> MDE of one run (the N used, and more)
    by_runs: Mapping[int, float]
    #: mean |golden| over the gate's steps (None: no golden to share by)
    golden_scale: float | None
    calibration_runs: int
    basis: str
    #: the unit the MDE is in: the metric's, or a share (relative methods)
    relative: bool = False
    notes: tuple[str, ...] = field(default=())
    #: the MDE is a growth per step (the kind's ``per_step_growth``: a leak gate), not a level
    per_step: bool = False
    #: the golden steps ``(first, last)`` the shift must hold over to be caught at this MDE (the kind's
    #: ``mde_steps``: a window, the whole run, one point); None: no level shift describes it (a slope)
    steps: tuple[int, int] | None = None

    def mde(self, replicates: int = 1) -> float:
        if replicates in self.by_replicates:
            return self.by_replicates[replicates]
        return _interpolate(self.by_replicates, replicates)

    def share(self, replicates: int = 1) -> float | None:
        if self.relative:
            return self.mde(replicates)
        if not self.golden_scale:
            return None
        return self.mde(replicates) / self.golden_scale


@functools.lru_cache(maxsize=256)  # a handful of (p, dof) per baseline, each asked for by every pooled gate
def t_quantile(p: float, dof: int) -> float:
    """Student's t quantile (p in (0.5, 1)), by bisection on the integrated density."""
    assert 0.5 < p < 1 and dof >= 1
    lo, hi = 0.0, 1.0
    while _t_cdf(hi, dof) < p:
        hi *= 2
    for _ in range(60):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if _t_cdf(mid, dof) < p else (lo, mid)
    return (lo + hi) / 2


def _t_cdf(x: float, dof: int) -> float:
    """P(T <= x) for x >= 0: 1/2 + the density integrated over [0, x] (Simpson, after t = tan substitution)."""
    # t = sqrt(dof) tan(u) maps [0, x] onto [0, atan(x / sqrt(dof))] where the integrand is smooth:
    # the density becomes c cos(u)^(dof-1) du
    c = math.exp(math.lgamma((dof + 1) / 2) - math.lgamma(dof / 2)) / math.sqrt(math.pi)
    top = math.atan(x / math.sqrt(dof))
    h = top / _SIMPSON_N
    power, cos = dof - 1, math.cos  # the same terms summed in the same order as a plain loop, with less overhead
    total = sum([w * cos(i * h) ** power for i, w in enumerate(_SIMPSON_WEIGHTS)])
    return 0.5 + c * total * h / 3


_SIMPSON_N = 400
_SIMPSON_WEIGHTS = tuple(1 if i in (0, _SIMPSON_N) else 4 if i % 2 else 2 for i in range(_SIMPSON_N + 1))


def range_factor(runs: int) -> float:
    """d2(N): the expected range of N standard normal draws."""
    if runs in _D2:
        return _D2[runs]
    return 3.735 + 0.56 * math.log(runs / 20) if runs > 20 else 1.128


def calibration_runs(baseline: Baseline) -> int:
    """N behind the golden: the runs the provenance records, else the baseline's ``calibration.runs``."""
    recorded = baseline.provenance.get("runs")
    if isinstance(recorded, int) and not isinstance(recorded, bool) and recorded >= 1:
        return recorded
    return baseline.calibration.runs if baseline.calibration is not None else 1


def pooled_gates(baseline: Baseline) -> list[CheckSpec]:
    return [c for c in baseline.checks if scope_kind(c.scope).uses_noise and c.gating]


class _Powering:
    """One gate's calibrated baseline and power's tools, handed to its kind (:class:`autotest.scopes.kind.PowerJob`)."""

    power_level = POWER
    z_power = Z_POWER
    t_quantile = staticmethod(t_quantile)

    def __init__(self, baseline: Baseline, check: CheckSpec) -> None:
        self.baseline = baseline
        self.check = check
        self.runs = calibration_runs(baseline)
        self.golden = (baseline.golden_table or {}).get(self.check.metric) or {}
        self.noise = (baseline.noise_table or {}).get(self.check.metric)

    def default(self) -> GatePower | None:
        if self.check.measured_max_deviation is None or self.runs < 2:
            return None
        return _per_step(self.baseline, self.check, self.runs)

    def gate_power(self, mde: Callable[[int, int], float], golden_scale: float | None, basis: str,
                   relative: bool = False) -> GatePower:
        n = self.runs
        by_k = {k: mde(k, n) for k in REPLICATES}
        by_n = {n: by_k[1], **{m: mde(1, m) for m in MORE_RUNS if m != n}}
        return GatePower(self.check.check_id, self.check.metric, by_k, by_n, golden_scale, n, basis, relative)

    def budget_quantile(self, runs: int) -> float:
        return _budget_quantile(self.baseline, runs)


def gate_power(baseline: Baseline, check: CheckSpec) -> GatePower | None:
    """The MDE of ``check`` (a gate) from ``baseline``: its kind's (``Scope.power``; by default the per-step rule);
    None for a bound or an uncalibrated gate."""
    if not check.gating or check.method == "value" or not math.isfinite(check.threshold):
        return None
    kind = scope_kind(check.scope)
    found = ask(kind, "power", check, _Powering(baseline, check))
    if found is not None and not isinstance(found, GatePower):
        raise UsageError(f"check kind plugin {plugin_of(kind)}: power returned {found!r} for {check.check_id}; "
                         "return job.gate_power(...), job.default() or None")
    if found is None:
        return None
    spanned = kind.mde_steps(check, (baseline.golden_table or {}).get(check.metric) or {})
    return replace(found, per_step=kind.per_step_growth, steps=(min(spanned), max(spanned)) if spanned else None)


def span_words(steps: tuple[int, int] | None) -> str:
    """Where a shift must act to be caught at a gate's MDE: ``over steps 21-30``, ``at step 1``, '' (no span)."""
    if steps is None:
        return ""
    return f"at step {steps[0]}" if steps[0] == steps[1] else f"over steps {steps[0]}-{steps[1]}"


def baseline_power(baseline: Baseline) -> list[GatePower]:
    return [p for p in (gate_power(baseline, c) for c in baseline.checks) if p is not None]


def _budget_quantile(baseline: Baseline, runs: int) -> float:
    budget = baseline.calibration.false_alarm_budget if baseline.calibration is not None else 0.05
    alpha = budget / max(1, len(pooled_gates(baseline)))
    return t_quantile(1 - alpha / 2, max(1, runs - 1))


def _per_step(baseline: Baseline, check: CheckSpec, n: int) -> GatePower:
    sigma = (check.measured_max_deviation or 0.0) / range_factor(n)
    by_k = {k: check.threshold + Z_POWER * sigma * math.sqrt(1 / k + 1 / n) for k in REPLICATES}
    golden = (baseline.golden_table or {}).get(check.metric, {})
    steps = scope_kind(check.scope).mde_steps(check, golden)
    # a growth per step (a slope) has no steps to share by: no share of the metric's level describes it
    scale = math.fsum(abs(golden[s]) for s in steps) / len(steps) if steps else None
    kind = ("slope (approximate, in the metric's units per step)" if scope_kind(check.scope).per_step_growth
            else "per-step (approximate)")
    basis = (f"{kind}: threshold {check.threshold:g} + z{POWER:.0%} {Z_POWER:.2f} x seed sd "
             f"{sigma:.3g} (max deviation {check.measured_max_deviation:.3g} / d2({n}) {range_factor(n):.3f}) x "
             "sqrt(1/K + 1/N); a max-deviation threshold does not narrow with more runs")
    return GatePower(check.check_id, check.metric, by_k, {n: by_k[1], **{m: by_k[1] for m in MORE_RUNS}},
                     scale, n, basis, relative=check.method == "relative")


def half_power_shift(baseline: Baseline, check: CheckSpec) -> float:
    """The constant shift that puts the gate's statistic at its threshold (caught about half the time), in
    the MDE's units (``Scope.half_power_shift``): a pooled gate's threshold x its unit, a per-step gate's
    threshold."""
    return ask(scope_kind(check.scope), "half_power_shift", check, _Powering(baseline, check))


def measured_shift(baseline: Baseline, check: CheckSpec, current: Mapping[int, float],
                   observed: float | None) -> float | None:
    """A run's effect on a gate as the constant shift that gives the same statistic, in the MDE's units
    (``Scope.measured_shift``).

    Pooled: the signed mean z over the window x the unit; final: the run minus golden at the last step
    (signed); other per-step gates: ``observed``, the statistic they bound (|error|; a share for relative).
    """
    return ask(scope_kind(check.scope), "measured_shift", check, _Powering(baseline, check), current, observed)


def _interpolate(table: Mapping[int, float], k: int) -> float:
    """Between the tabulated K, the MDE follows sqrt(1/K + 1/N)-shaped decay: take the nearest below."""
    below = [x for x in table if x <= k]
    return table[max(below)] if below else table[min(table)]


def describe_mde(power: GatePower, replicates: int = 1) -> str:
    """``±0.12 (13% of golden)`` or ``±0.3 of golden`` (relative)."""
    value = power.mde(replicates)
    if power.relative:
        return f"±{value:.2g} of golden"
    if power.per_step:
        return f"+{value:.2g}/step"  # a leak gate: extra growth per step
    share = power.share(replicates)
    shown = share is not None and share < 10  # against a near-zero golden (k3 ~ 1e-14) a share says nothing
    return f"±{value:.2g}" + (f" ({share:.0%} of golden)" if shown else "")


def change_spans(steps: Sequence[tuple[int, int]]) -> list[tuple[int, int]]:
    """The spans a change is judged over: each gate's span of more than one step (a window) and the whole run they
    cover, narrowest first."""
    spans = {s for s in steps if s[1] > s[0]}
    if spans:
        spans.add((min(s[0] for s in spans), max(s[1] for s in spans)))
    return sorted(spans, key=lambda s: (s[1] - s[0], s[0]))


def inside(inner: tuple[int, int], outer: tuple[int, int]) -> bool:
    return outer[0] <= inner[0] and inner[1] <= outer[1]


def target_misses(powers: Sequence[GatePower], targets: Mapping[str, float], replicates: int = 1) -> list[str]:
    """One line per declared target (``detect: {metric: effect}``) the gates on that metric cannot reach wherever
    the change acts: over each window of its gates (and the whole run) the best gate inside it must reach it, and
    the line names the span where the best gate is furthest off (a whole-run gate never answers for a window)."""
    lines = []
    for metric, effect in targets.items():
        mine = [p for p in powers if p.metric == metric]
        if not mine:
            lines.append(f"detect.{metric}: no gate on {metric} has a minimum detectable effect to compare")
            continue
        spans = change_spans([p.steps for p in mine if p.steps is not None])
        groups = [[p for p in mine if p.steps is not None and inside(p.steps, span)] for span in spans] or [mine]
        best = max((min(group, key=lambda p: p.mde(replicates)) for group in groups if group),
                   key=lambda p: p.mde(replicates))
        if best.mde(replicates) > effect:
            where = f" {span_words(best.steps)}" if best.steps else ""
            lines.append(f"detect.{metric}: the gates can catch {describe_mde(best, replicates)}{where} "
                         f"({best.check_id}), not the {effect:g} the case must detect; "
                         f"{_what_would(best, effect)}")
    return lines


def _what_would(power: GatePower, effect: float) -> str:
    k = next((k for k in REPLICATES if power.mde(k) <= effect), None)
    runs = next((m for m in sorted(power.by_runs) if power.by_runs[m] <= effect), None)
    options = []
    if k is not None and k > 1:
        options.append(f"{k} replicates per verdict")
    if runs is not None and runs > power.calibration_runs:
        options.append(f"{runs} calibration runs")
    return ("it would take " + " or ".join(options)) if options else "neither 8 replicates nor 20 calibration runs reach it"


@dataclass(frozen=True)
class PowerAsk:
    """What a verdict needs to state its power: the replicates judged and the case's targets."""

    replicates: int = 1
    #: metric -> the effect (metric units) the case must detect (``detect:`` in the case)
    targets: Mapping[str, float] = field(default_factory=dict)
    #: a PASS that cannot reach a target is an ERROR (``--strict-power``), not a warning
    strict: bool = False
    #: the baseline as calibrated, when the judged one has pooled thresholds scaled for a replicate mean
    calibrated: Baseline | None = None


def with_power(results: Sequence[CheckResult], baseline: Baseline, ask: PowerAsk) -> list[CheckResult]:
    """Each gate's result with its MDE, and ``power[targets]`` when the case declares what it must detect."""
    powers = {p.check_id: p for p in baseline_power(ask.calibrated or baseline)}
    out = []
    for result in results:
        found = powers.get(result.check_id) if result.kind == "metric" else None
        if found is not None:
            result = replace(result, mde=_round(found.mde(ask.replicates)),
                             mde_share=_round(found.share(ask.replicates)), mde_steps=found.steps)
        out.append(result)
    if ask.targets:
        misses = target_misses(list(powers.values()), ask.targets, ask.replicates)
        status = (ERROR if ask.strict else INFO) if misses else PASS
        message = ("; ".join(misses) if misses else
                   "every declared target is within the gates' minimum detectable effect: "
                   + ", ".join(f"{m} {e:g}" for m, e in ask.targets.items()))
        out.append(CheckResult("power[targets]", status, message, kind="structural",
                               severity="gate" if ask.strict else "reference",
                               parameters={"targets": dict(ask.targets), "replicates": ask.replicates,
                                           "strict": ask.strict}))
    return out


def _round(value: float | None) -> float | None:
    return None if value is None else float(f"{value:.3g}")


def caught_phrase(results: Sequence[CheckResult], display: Mapping[str, str] | None = None) -> str:
    """``could have caught: rewards ±0.21 over steps 1-15 [pooled], ±0.12 over steps 31-45 [pooled]; eval/accuracy
    ±0.06 at step 45 [final]`` over the gates with an MDE, grouped by metric, each MDE with the steps its shift must
    hold over and its gate's scope.

    The span is part of the claim: a whole-run gate's MDE holds for a shift at every step, and a change acting on a
    third of them moves its statistic a third as much, so its MDE is never stated bare (a window gate's is what
    the run could catch of a change there). A per-step-growth (slope) MDE has no span. Within a metric the gates
    keep their order."""
    shown = display or {}
    by_metric: dict[str, list[str]] = {}
    for r in results:
        if r.is_gate and r.mde is not None and r.metric:
            kind = find(r.scope)
            unit = " of golden" if r.method == "relative" else "/step" if kind and kind.per_step_growth else ""
            where = span_words(r.mde_steps)
            by_metric.setdefault(r.metric, []).append(f"±{r.mde:.2g}{unit}" + (f" {where}" if where else "")
                                                      + (f" [{r.scope}]" if r.scope else ""))
    parts = [f"{shown.get(metric, metric)} " + ", ".join(items) for metric, items in by_metric.items()]
    return ("could have caught: " + "; ".join(parts)) if parts else ""


def cost_and_power_phrase(verdict: Verdict, display: Mapping[str, str] | None = None) -> str:
    """What the verdict could have caught beside what it cost: ``could have caught: rewards ±0.12 over steps 31-45
    [pooled] for 90.1 CPU-s``; a FAIL or ERROR (no MDE to claim) states its cost alone: ``cost 90.1 CPU-s``."""
    caught = caught_phrase(verdict.results, display) if verdict.status == PASS else ""
    cost = verdict.cost
    if cost is None:
        return caught
    return f"{caught} for {cost.short()}" if caught else f"cost {cost.short()}"


def power_warnings(verdict_or_results: Any) -> list[str]:
    """The warning lines of a verdict whose gates cannot catch the case's targets (not under --strict-power)."""
    results = getattr(verdict_or_results, "results", verdict_or_results)
    return [f"power: {r.message}" for r in results
            if r.check_id == "power[targets]" and r.status == INFO]
