"""Paired A/B judgement: head minus base on the same seeds, against the noise A/A pairs measured.

A head run and a base run on one seed share data order, initialisation and sampling until their trajectories
part, so their difference is free of the seed-to-seed noise and of any golden's own error or environment. Each
paired gate is one metric's mean over one step window (:class:`~autotest.inputs.baseline_model.PairedWindow`):

- **measure** (A/A pairs, the same code twice per seed, the second run nudged the way the platform's own
  non-determinism would): the paired noise of one seed is the root mean square of the pairs' differences
  (their expectation is zero, so no degree of freedom goes to a mean);
- **judge** (K seeds): the mean difference D over the seeds fails when |D| > q x noise / sqrt(K), q the t
  quantile with the pairs' degrees of freedom at the false-alarm budget split over every window (two-sided:
  a change is a change whichever way it moves). A threshold never falls below ``relative_floor`` x |level| nor
  the metric's declared floor (``calibration.floors``), so pairs that agree bitwise do not make a gate of zero
  width and a change the case calls harmless stays harmless;
- **power**: the gate catches a shift delta with 80% probability when delta = (q + z_0.8) x noise / sqrt(K);
- **next step** (:mod:`.paired_triage`): the golden triage's readings and rules on the paired differences, the base
  as the reference, the head as the run, the A/A noise (never under the golden's noise of the pair) as the per-step
  noise: logging, data, sampling, loss term, training loop or mismatch, with the evidence; one metric failed while
  every other paired metric is bitwise equal between base and head at every step on every seed
  (:mod:`.paired_causes`) is logging, never "training changed".

Pure logic: traces in, results out; the runs are :mod:`autotest.ab`'s.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from autotest.inputs.baseline_model import Baseline, PairedSpec, PairedWindow
from autotest.judge.model import ERROR, FAIL, PASS, Measured, TriageFinding
from autotest.judge.paired_causes import logged_alone
from autotest.judge.paired_triage import paired_findings
from autotest.judge.power import Z_POWER, t_quantile
from autotest.judge.trace import Trace

#: windows per metric: early, middle and late steps (a pair parts late, so the early window is the sharpest)
WINDOWS = 3
#: triage groups whose metrics measure the machine, not the training (judged by their own gates, not paired)
MACHINE_GROUPS = ("performance", "memory")
DEFAULT_BUDGET = 0.05
DEFAULT_RELATIVE_FLOOR = 0.01


@dataclass(frozen=True)
class PairedResult:
    """One paired gate's outcome over K seeds."""

    gate_id: str
    metric: str
    window: tuple[int, int]
    status: str
    #: seed -> head minus base of the window mean
    differences: Mapping[int, float]
    mean_difference: float | None
    threshold: float | None
    mde: float | None
    message: str


@dataclass(frozen=True)
class PairedVerdict:
    status: str
    results: tuple[PairedResult, ...]
    seeds: tuple[int, ...]
    warnings: tuple[str, ...] = ()
    #: why nothing could be judged (an uncalibrated baseline, a broken run)
    reason: str = ""
    #: the next step the paired differences name (the primary of ``triage``, or :mod:`.paired_causes`'s bitwise
    #: logging line); "" leaves the status's own line
    next_step: str = ""
    #: a FAIL's ranked next steps, the golden triage's rules on the paired differences (:mod:`.paired_triage`)
    triage: tuple[TriageFinding, ...] = ()
    #: the readings those rules read, taken on the paired differences
    measured: tuple[Measured, ...] = ()

    @property
    def failed(self) -> tuple[PairedResult, ...]:
        return tuple(r for r in self.results if r.status == FAIL)


@dataclass(frozen=True)
class PairedMeasurement:
    spec: PairedSpec
    warnings: tuple[str, ...] = field(default_factory=tuple)


def paired_metrics(baseline: Baseline) -> list[str]:
    """The metrics paired gates watch: every gated metric of the training (not the machine's time or memory)."""
    roles = baseline.role_map
    metrics = {c.metric for c in baseline.checks if c.severity == "gate"}
    return sorted(m for m in metrics if roles.group_of(m) not in MACHINE_GROUPS)


def metric_windows(steps: Sequence[int], parts: int = WINDOWS) -> list[tuple[int, int]]:
    """``steps`` split into ``parts`` runs of consecutive logged steps, as equal in count as they go."""
    ordered = sorted(set(steps))
    parts = max(1, min(parts, len(ordered)))
    size, extra = divmod(len(ordered), parts)
    windows, start = [], 0
    for i in range(parts):
        end = start + size + (1 if i < extra else 0)
        windows.append((ordered[start], ordered[end - 1]))
        start = end
    return windows


def window_difference(base: Trace, head: Trace, metric: str, window: tuple[int, int]) -> float | None:
    """Head minus base of the metric's mean over the steps both logged in ``window`` (None: no such step)."""
    b, h = base.get(metric) or {}, head.get(metric) or {}
    steps = [s for s in b if window[0] <= s <= window[1] and s in h
             and math.isfinite(b[s]) and math.isfinite(h[s])]
    if not steps:
        return None
    return sum(h[s] - b[s] for s in steps) / len(steps)


def window_level(traces: Sequence[Trace], metric: str, window: tuple[int, int]) -> float:
    values = [v for t in traces for s, v in (t.get(metric) or {}).items()
              if window[0] <= s <= window[1] and math.isfinite(v)]
    return sum(values) / len(values) if values else 0.0


def measure_paired(baseline: Baseline, golden: Trace, pairs: Sequence[tuple[int, Trace, Trace]], perturbation: str,
                   budget: float = DEFAULT_BUDGET, relative_floor: float = DEFAULT_RELATIVE_FLOOR) -> PairedMeasurement:
    """The paired noise of every metric window from A/A ``pairs`` of (seed, first run, second run)."""
    if len(pairs) < 2:
        raise ValueError(f"paired calibration needs at least two A/A pairs, got {len(pairs)}")
    windows, warnings = [], []
    floors = dict(baseline.calibration.floors) if baseline.calibration else {}
    low, high = baseline.calibrated_range or (-math.inf, math.inf)
    for metric in paired_metrics(baseline):
        steps = [s for s in (golden.get(metric) or {}) if low <= s <= high]
        if not steps:
            warnings.append(f"{metric}: the golden has no step in the calibrated range; no paired gate")
            continue
        for window in metric_windows(steps):
            diffs = [d for _, a, b in pairs if (d := window_difference(a, b, metric, window)) is not None]
            if len(diffs) < 2:
                warnings.append(f"{metric} steps {window[0]}-{window[1]}: {len(diffs)} A/A pair(s) logged it; "
                                "no paired gate")
                continue
            noise = math.sqrt(sum(d * d for d in diffs) / len(diffs))
            level = window_level([t for _, a, b in pairs for t in (a, b)], metric, window)
            windows.append(PairedWindow(metric, window[0], window[1], noise=noise, level=level,
                                        floor=floors.get(metric, 0.0)))
    spec = PairedSpec(pairs=len(pairs), perturbation=perturbation, windows=tuple(windows),
                      false_alarm_budget=budget, relative_floor=relative_floor, seeds=tuple(s for s, _, _ in pairs))
    return PairedMeasurement(spec, tuple(warnings))


def bitwise_pairs(baseline: Baseline, pairs: Sequence[tuple[int, Trace, Trace]]) -> list[int]:
    """The seeds whose two A/A runs logged every paired metric bitwise equal at every step: the nudge did not take
    (a metric neither run logged does not count as equal; a pair with no paired metric logged is not listed)."""
    metrics = paired_metrics(baseline)
    same = []
    for seed, first, second in pairs:
        logged = [m for m in metrics if first.get(m) or second.get(m)]
        if logged and all(dict(first.get(m) or {}) == dict(second.get(m) or {}) for m in logged):
            same.append(seed)
    return same


def _quantile(spec: PairedSpec) -> float:
    alpha = spec.false_alarm_budget / max(1, len(spec.windows))
    return t_quantile(1 - alpha / 2, spec.pairs)


def _floor(spec: PairedSpec, window: PairedWindow) -> float:
    return max(spec.relative_floor * abs(window.level), window.floor)


def paired_threshold(spec: PairedSpec, window: PairedWindow, seeds: int) -> float:
    """|mean difference| above this over ``seeds`` seeds is a change (its false-alarm share of the budget)."""
    return max(_quantile(spec) * window.noise / math.sqrt(seeds), _floor(spec, window))


def paired_mde(spec: PairedSpec, window: PairedWindow, seeds: int) -> float:
    """The shift of the window mean caught with 80% probability over ``seeds`` seeds."""
    return paired_threshold(spec, window, seeds) + Z_POWER * window.noise / math.sqrt(seeds)


def judge_paired(spec: PairedSpec | None, pairs: Sequence[tuple[int, Trace, Trace]], how_to_calibrate: str,
                 baseline: Baseline | None = None) -> PairedVerdict:
    """Every paired gate over ``pairs`` of (seed, base trace, head trace); a FAIL's next step from the golden triage's
    readings and rules on the paired differences (:mod:`.paired_triage`) when ``baseline`` (its checks' roles) is
    given, else from the bitwise logging reading alone (:mod:`.paired_causes`)."""
    seeds = tuple(seed for seed, _, _ in pairs)
    if spec is None or not spec.windows:
        return PairedVerdict(ERROR, (), seeds, reason=f"the baseline has no paired noise; {how_to_calibrate}")
    if not pairs:
        return PairedVerdict(ERROR, (), seeds, reason="no seed has both a base and a head run to pair")
    results = [_judge_window(spec, window, pairs) for window in spec.windows]
    status = (FAIL if any(r.status == FAIL for r in results) else
              ERROR if any(r.status == ERROR for r in results) else PASS)
    if status != FAIL:
        return PairedVerdict(status, tuple(results), seeds)
    failed = [r.metric for r in results if r.status == FAIL]
    if baseline is None:
        return PairedVerdict(status, tuple(results), seeds,
                             next_step=logged_alone(failed, sorted({w.metric for w in spec.windows}), pairs))
    findings, measured = paired_findings(baseline, pairs, spec.windows, lambda w, k: paired_threshold(spec, w, k),
                                         _quantile(spec), failed)
    primary = next((f for f in findings if f.primary), None)
    return PairedVerdict(status, tuple(results), seeds, next_step=primary.next_step if primary else "",
                         triage=findings, measured=measured)


def _judge_window(spec: PairedSpec, window: PairedWindow, pairs: Sequence[tuple[int, Trace, Trace]]) -> PairedResult:
    span = (window.start, window.end)
    diffs = {seed: d for seed, base, head in pairs if (d := window_difference(base, head, window.metric, span)) is not None}
    if not diffs:
        return PairedResult(window.gate_id, window.metric, span, ERROR, {}, None, None, None,
                            f"{window.gate_id}: no seed's base and head both logged it in steps {span[0]}-{span[1]}")
    k = len(diffs)
    mean = sum(diffs.values()) / k
    threshold, mde = paired_threshold(spec, window, k), paired_mde(spec, window, k)
    changed = abs(mean) > threshold
    agree = sum(1 for d in diffs.values() if d * mean > 0)
    message = (f"{window.gate_id}: head - base {mean:+.4g} over {k} seed(s) ({agree} of {k} the same sign), "
               f"|D| {'>' if changed else '<='} {threshold:.3g} (A/A noise {window.noise:.3g} per seed, "
               f"MDE {mde:.3g})")
    return PairedResult(window.gate_id, window.metric, span, FAIL if changed else PASS, diffs, mean, threshold, mde,
                        message)
