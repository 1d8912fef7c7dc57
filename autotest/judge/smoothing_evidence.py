"""The smoothed-log reading: did the logger smooth what it wrote, the training unchanged?

A logger that writes an exponential moving average of each scalar (``logged = A x previous logged + (1 - A) x
value``, a dashboard's smoothing applied at write time) makes every curve lag; a metric logged at a few points (eval)
lags most and breaches alone, which looks like the eval path. Two readings tell it apart from a training change:

- every metric logged at each step is smoother than any calibration run was: its roughness (:func:`.per_step_noise.
  roughness`, the step-to-step change of its deviation from the golden in noise sds) under the least of the
  calibration runs' (``golden.roughness``). No change to the training takes a run's own step-to-step noise away;
  smoothing does, on every metric at once;
- undoing the average (``value = (logged - A x previous logged) / (1 - A)``) on every metric, for some weight A,
  gives back a run like the calibration runs: no longer calmer than all of them on every per-step metric, and every
  gate passing.

Both must hold. The first alone is a run that happens to be calm; the second alone fits a low eval whose trend
extrapolates back up (undoing an average moves each point along the trend). A baseline calibrated before
``golden.roughness`` existed gives no reading.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import replace
from types import MappingProxyType

from autotest.inputs.baseline import Baseline
from autotest.inputs.roles import RoleMap
from autotest.judge.evidence import recheck
from autotest.judge.model import PASS, CheckResult, Measured
from autotest.judge.per_step_noise import left_noise, roughness, z_scores
from autotest.judge.trace import Trace

SMOOTHED = "smoothed log"
#: weights on the previous logged value tried when undoing the average
EMA_WEIGHTS = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9)
#: metrics with a roughness to read, at least: one calm metric is not every metric
MIN_METRICS = 2


def unsmoothed(series: Mapping[int, float], weight: float) -> dict[int, float]:
    """What an exponential moving average of ``weight`` on the previous logged value was fed, from what it wrote."""
    out, previous = {}, None
    for step in sorted(series):
        value = series[step]
        out[step] = value if previous is None else (value - weight * previous) / (1 - weight)
        previous = value
    return out


def smoothing_evidence(baseline: Baseline, golden: Trace, current: Trace, results: Sequence[CheckResult],
                       roles: RoleMap, noise_scale: float = 1.0) -> Measured | None:
    """The smoothed-log reading where the baseline records its calibration runs' roughness; else None.
    ``noise_scale``: the current trace's noise as a share of one run's (a mean of replicates is calmer)."""
    least = baseline.roughness or {}
    noise_table = baseline.noise_table or {}
    noise = {m: {s: v * noise_scale for s, v in (noise_table.get(m) or {}).items()} for m in least}

    def ratios_of(trace: Trace) -> dict[str, float]:
        found = {m: roughness(z_scores(m, golden, trace, noise[m])) for m, floor in least.items() if floor > 0}
        return {m: r / least[m] for m, r in found.items() if r is not None}

    ratios = ratios_of(current)
    if len(ratios) < MIN_METRICS:
        return None
    measured = ("each per-step metric's roughness against the least of the calibration runs', and every gate and "
                "every metric's per-step noise at every step with an exponential moving average undone on every metric")
    shown = ", ".join(f"{m} {r:.2f}x" for m, r in sorted(ratios.items()))
    rough = sorted(m for m, r in ratios.items() if r >= 1)
    if rough:
        return Measured(SMOOTHED, measured, False, f"roughness against the calmest calibration run: {shown}; "
                        f"{', '.join(rough)} as rough as a calibration run: not smoothed", {})
    gates = {r.check_id for r in results if r.kind == "metric" and r.is_gate}
    fits, moved = [], []
    for weight in EMA_WEIGHTS:
        series = {m: MappingProxyType(unsmoothed(v, weight)) for m, v in current.series.items()}
        undone = replace(current, series=MappingProxyType(series))
        rechecked = recheck(baseline, golden, undone, gates)
        # what the average was fed is a run like the calibration runs (no longer calmer than all of them on every
        # metric: a clean run is calmer than the calmest of N on one metric now and then) and passes every gate
        if (max(ratios_of(undone).values(), default=0.0) >= 1 and rechecked
                and all(r.status == PASS for r in rechecked)):
            # "the training unchanged" is what the row claims: what the average was fed is within every metric's
            # per-step noise against the golden at every step, not only through the gates
            left = _left(undone, golden, {m: v for m, v in noise_table.items() if v}, noise_scale)
            if left:
                moved.append(f"weight {weight:g}: {left}")
                continue
            fits.append((_misfit(undone, golden, noise, ratios), weight, len(rechecked)))
    if not fits and moved:
        return Measured(SMOOTHED, measured, False, f"every per-step metric smoother than the calmest calibration run "
                        f"({shown}), and with an average undone every gate passes, but the training moved: "
                        f"{moved[0]} (what the average was fed left its per-step noise against the golden)", {})
    if not fits:
        return Measured(SMOOTHED, measured, False, f"every per-step metric smoother than the calmest calibration run "
                        f"({shown}), but undoing an exponential moving average of no weight "
                        f"({EMA_WEIGHTS[0]:g}-{EMA_WEIGHTS[-1]:g}) gives a run as rough as a calibration run that "
                        "passes every gate", {})
    _, weight, count = min(fits)
    weights = sorted(w for _, w, _ in fits)
    return Measured(SMOOTHED, measured, True,
                    f"every per-step metric smoother than the calmest calibration run ({shown}), and with an exponential "
                    f"moving average undone on every metric (weight {weight:g} on the previous logged value; "
                    f"{', '.join(f'{w:g}' for w in weights)} pass) all {count} gate checks pass and every metric with "
                    "a per-step noise is within it against the golden at every step",
                    {"metrics": ", ".join(sorted(ratios)), "weight": f"{weight:g}"})


def _misfit(trace: Trace, golden: Trace, noise_table: Mapping[str, Mapping[int, float]],
            metrics: Mapping[str, float]) -> float:
    """Mean squared z of ``trace`` against the golden over ``metrics``: the weight that undoes the lag best."""
    zs = [z for m in metrics for z in z_scores(m, golden, trace, noise_table.get(m) or {}).values()]
    return math.fsum(z * z for z in zs) / len(zs) if zs else math.inf


def _left(trace: Trace, golden: Trace, noise_table: Mapping[str, Mapping[int, float]], noise_scale: float) -> str:
    """The first metric of ``noise_table`` that left its per-step noise against the golden, and where; "" if none."""
    for metric in sorted(noise_table):
        noise = {s: v * noise_scale for s, v in noise_table[metric].items()}
        where = left_noise(trace.get(metric) or {}, golden.get(metric) or {}, noise)
        if where is not None:
            return f"{metric} {where}"
    return ""
