"""One metric moved alone, in time (issue 44): a metric logged from the previous step (or the next) is the golden's
series shifted by whole steps. Read against the golden's per-step noise (the golden gates' triage, through the
logging/units reading) or bitwise (the resume gate and A/B, where the two runs trained the same steps): the shifted
series fits where the unshifted one does not."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from autotest.judge.per_step_noise import left_noise

#: the shifts tried, in whole logged steps (positive: the value logged at step s is the one of step s - k), nearest
#: first
SHIFTS = (1, -1, 2, -2)
#: the fewest steps a shift is read from
MIN_SHIFTED_STEPS = 5


def shift_words(k: int) -> str:
    """What a shift of ``k`` steps means for the logger, in words."""
    if k == 1:
        return "logged from the previous step"
    if k == -1:
        return "logged from the next step"
    return f"logged from {abs(k)} steps {'earlier' if k > 0 else 'later'}"


def _shifted(series: Mapping[int, float], k: int, steps: Sequence[int]) -> dict[int, float]:
    """``series`` moved ``k`` steps later, at ``steps`` (each step s takes the value of s - k)."""
    return {s: series[s - k] for s in steps}


def noise_shift(cur: Mapping[int, float], gold: Mapping[int, float],
                noise: Mapping[int, float]) -> tuple[int, int, str] | None:
    """(k, steps read, where the unshifted series left its noise) when ``cur`` left its per-step noise around
    ``gold`` while ``gold`` shifted by k steps holds it within that noise at every step; None otherwise."""
    unshifted = left_noise(cur, gold, noise)
    if unshifted is None:
        return None
    for k in SHIFTS:
        steps = [s for s in sorted(cur) if s - k in gold and noise.get(s - k, 0) > 0
                 and math.isfinite(cur[s]) and math.isfinite(gold[s - k])]
        if len(steps) < MIN_SHIFTED_STEPS:
            continue
        if left_noise({s: cur[s] for s in steps}, _shifted(gold, k, steps), _shifted(noise, k, steps), steps) is None:
            return k, len(steps), unshifted
    return None


def _same(a: float, b: float) -> bool:
    return a == b or (math.isnan(a) and math.isnan(b))


def exact_shift(now: Mapping[int, float], before: Mapping[int, float], steps: Sequence[int]) -> tuple[int, int] | None:
    """(k, steps equal) when ``now`` at ``steps`` is bitwise ``before`` k steps earlier wherever ``before`` has that
    step (one step at least), and not ``before`` itself; None otherwise. A logger that writes the previous step's
    value across a resume or beside an unchanged training does exactly this."""
    if all(s in now and s in before and _same(now[s], before[s]) for s in steps):
        return None
    for k in SHIFTS:
        pairs = [s for s in steps if s in now and s - k in before]
        if pairs and all(_same(now[s], before[s - k]) for s in pairs):
            return k, len(pairs)
    return None
