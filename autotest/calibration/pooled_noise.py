"""The noise table: per-step seed-to-seed noise of every metric a check judges in noise units.

Calibration measures it for the metrics of the kinds with ``uses_noise`` (``scope: pooled``) and stores it beside
the golden table (``golden.noise``); the pooled kind's own calibration rule (``Pooled.calibrate`` in
``autotest.scopes.pooled``) sets those checks' thresholds from it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

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
