"""The next step of a failed A/B where the paired differences say more than "training changed" (issue 44): one metric
moved while every other paired metric is bitwise equal between base and head at every step on every seed is how
that metric is computed or logged, never a change to training (the head trained exactly what the base trained)."""

from __future__ import annotations

import math
from collections.abc import Sequence

from autotest.judge.shift_evidence import exact_shift, shift_words
from autotest.judge.trace import Trace

#: the fewest other paired metrics whose bitwise equality says the training did not change
MIN_EQUAL_OTHERS = 2


def _bitwise_equal(base: Trace, head: Trace, metric: str) -> bool:
    """Both sides logged ``metric`` at the same steps with the same values (NaN equal to NaN)."""
    b, h = base.get(metric) or {}, head.get(metric) or {}
    return set(b) == set(h) and all(b[s] == h[s] or (math.isnan(b[s]) and math.isnan(h[s])) for s in b)


def logged_alone(failed_metrics: Sequence[str], paired: Sequence[str],
                 pairs: Sequence[tuple[int, Trace, Trace]]) -> str:
    """The logging next step when one metric failed and every other paired metric is bitwise equal on every seed;
    "" otherwise (the changed-training line stands)."""
    moved = sorted(set(failed_metrics))
    others = [m for m in paired if m not in moved]
    if len(moved) != 1 or len(others) < MIN_EQUAL_OTHERS or not pairs:
        return ""
    if not all(_bitwise_equal(base, head, m) for _, base, head in pairs for m in others):
        return ""
    metric = moved[0]
    shifts = set()
    for _, base, head in pairs:
        b, h = base.get(metric) or {}, head.get(metric) or {}
        differing = sorted(s for s in set(b) & set(h) if b[s] != h[s])
        found = exact_shift(h, b, differing) if differing else None
        shifts.add(found[0] if found else None)
    shift = ""
    if len(shifts) == 1 and (k := next(iter(shifts))) is not None:
        shift = (f"; on every seed the head's value is the base's {abs(k)} step{'s' * (abs(k) > 1)} "
                 f"{'earlier' if k > 0 else 'later'} (the head {shift_words(k)})")
    return (f"logging, not training: {metric} moved while the {len(others)} other paired metrics "
            f"({', '.join(others)}) are bitwise equal between base and head at every step on all {len(pairs)} "
            f"seed{'s' * (len(pairs) > 1)}, so the head trained what the base trained{shift}; check how {metric} is "
            "computed or logged in the head's change")
