"""Scope ``slope``: how fast a metric grows per step, fitted by least squares within segments.

A leak shows as growth: memory that rises by about the same amount every step. The statistic is the
least-squares slope of the metric over the checked steps with one intercept per segment (a common slope,
"within" each segment): a resumed run starts a fresh process whose memory starts low again, and one line
through both parts would read the drop at the resume as shrinkage and hide the growth on either side.

Segments are split where a segment starts: at each step of the check's ``split_at`` (the resume points
the case knows) and at each step where the log's step counter went back (``Trace.restarts``, a resumed or
concatenated log). A segment with a single step fits nothing and adds nothing. The slope of the current
run minus the golden's, over the same steps and segments, is the slope of their per-step difference (the
fit is linear in the values), which is what the check engine (:mod:`autotest.judge.checks`) bounds.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass


def split_steps(steps: Sequence[int], split_at: Iterable[int]) -> list[tuple[int, ...]]:
    """``steps`` (ascending) cut into runs of consecutive checked steps, a new one starting at each split step.

    A split step need not be a checked step: the next checked step after it starts the segment.
    """
    splits = sorted(set(split_at))
    segments: list[list[int]] = []
    index = 0
    for step in steps:
        started = False
        while index < len(splits) and splits[index] <= step:
            started = True
            index += 1
        if not segments or started:
            segments.append([])
        segments[-1].append(step)
    return [tuple(s) for s in segments]


@dataclass(frozen=True)
class SlopeFit:
    """The within-segment least-squares slope of one series (units of the metric per step)."""

    #: the common slope of every segment with two steps or more (nan when none has)
    slope: float
    #: each segment's (first step, last step)
    segments: tuple[tuple[int, int], ...]
    #: each segment's own slope (nan for a single-step segment)
    per_segment: tuple[float, ...]

    @property
    def fitted(self) -> bool:
        return math.isfinite(self.slope)


def within_slope(segments: Sequence[Sequence[int]], values: Mapping[int, float]) -> SlopeFit:
    """The common least-squares slope of ``values`` over ``segments`` (one intercept each)."""
    sxx_total = sxy_total = 0.0
    per_segment = []
    for steps in segments:
        if len(steps) < 2:
            per_segment.append(math.nan)
            continue
        mean_x = math.fsum(steps) / len(steps)
        mean_y = math.fsum(values[s] for s in steps) / len(steps)
        sxx = math.fsum((s - mean_x) ** 2 for s in steps)
        sxy = math.fsum((s - mean_x) * (values[s] - mean_y) for s in steps)
        per_segment.append(sxy / sxx)
        sxx_total += sxx
        sxy_total += sxy
    slope = sxy_total / sxx_total if sxx_total > 0 else math.nan
    return SlopeFit(slope, tuple((s[0], s[-1]) for s in segments if s), tuple(per_segment))
