"""The noise table: per-step seed-to-seed noise of every metric a check judges in noise units.

Calibration measures it for the metrics of the kinds with ``uses_noise`` (``scope: pooled``) and stores it beside
the golden table (``golden.noise``); the pooled kind's own calibration rule (``Pooled.calibrate`` in
``autotest.scopes.pooled``) sets those checks' thresholds from it. Beside it, the calibration runs' least
step-to-step roughness (``golden.roughness``), what a log smoothed at write time is told by.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from autotest.judge.per_step_noise import roughness, z_scores
from autotest.judge.trace import Trace
from autotest.scopes.pooled import MIN_POOLED_RUNS, step_noise


def noise_table(metrics: Sequence[str], table: Mapping[str, Mapping[int, float]],
                traces: Sequence[Trace]) -> dict[str, dict[int, float]]:
    """Seed-to-seed noise per step of each pooled metric, over the steps every run logged."""
    noise = {}
    for metric in metrics:
        steps = list(table[metric])
        if steps and len(traces) >= MIN_POOLED_RUNS:  # fewer: the check stays uncalibrated (INFO)
            noise[metric] = step_noise([t.series[metric] for t in traces], steps)
    return noise


def least_roughness(noise: Mapping[str, Mapping[int, float]], golden: Trace,
                    traces: Sequence[Trace]) -> dict[str, float]:
    """Per metric with noise logged at enough steps: the least step-to-step roughness of a calibration run
    (``golden.roughness``): no run of the unchanged training was calmer (what a smoothed log is read against)."""
    least = {}
    for metric, sds in noise.items():
        found = [r for t in traces if (r := roughness(z_scores(metric, golden, t, sds))) is not None]
        if len(found) == len(traces) and found and min(found) > 0:
            least[metric] = min(found)
    return least
