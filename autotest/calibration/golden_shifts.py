"""How a candidate baseline's golden values moved against the current baseline's: what the review of a
recalibration (``review.md``) and ``baseline promote`` show beside the thresholds."""

from __future__ import annotations

import math
from dataclasses import dataclass

from autotest.inputs.baseline import Baseline
from autotest.judge.trace import Trace


@dataclass(frozen=True)
class GoldenShift:
    """How one metric's golden values moved between the current baseline and the candidate."""

    metric: str
    common_steps: int
    added_steps: int
    removed_steps: int
    max_shift: float | None
    max_shift_step: int | None
    mean_shift: float | None


def golden_shifts(old: Trace | None, new: Baseline) -> list[GoldenShift]:
    """Per metric: largest |new - old| (and where), mean signed shift, steps gained and lost."""
    shifts = []
    for metric, series in (new.golden_table or {}).items():
        before = (old.get(metric) if old is not None else None) or {}
        common = [s for s in series if s in before and math.isfinite(before[s])]
        deltas = [(abs(series[s] - before[s]), s) for s in common]
        worst = max(deltas, key=lambda d: d[0], default=(None, None))  # the first step on a tie
        mean = math.fsum(series[s] - before[s] for s in common) / len(common) if common else None
        shifts.append(GoldenShift(metric, len(common), len(set(series) - set(before)), len(set(before) - set(series)),
                                  worst[0], worst[1], mean))
    return shifts
