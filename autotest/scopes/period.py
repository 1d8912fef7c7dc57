"""The period of a check's breaching steps: a fault on every other step, every fifth step, named as such.

Pure logic over step numbers. A weight sync skipped on alternate steps breaches a mismatch bound at every even step
and at none of the odd ones; a percentile of the per-step errors reads the clean half and passes, and a count of
breaches alone does not say why they come. :func:`breach_period` finds the step period P and phase that the
breaches follow, so the verdict can say "every 2nd step (steps 2, 4, 6, ...)" and the reader looks at what runs
every P steps (a sync, a schedule, a rank's turn).

Rule: for each period P from 2 to a third of the compared steps (the pattern repeats at least three times) and
each phase, the steps s with s = phase (mod P) are the period's class. Its precision is the share of the breaches
in the class, its recall the share of the class that breaches. A period is named when the best class (highest F1,
the smaller P on a tie) has precision >= :data:`MIN_PRECISION` (a stray breach or two off the period is noise),
recall >= :data:`MIN_RECALL` (a fault at the edge of the bound breaches on only some of its steps) and at least
:data:`MIN_IN_CLASS` breaches, and breaches on its own more than every step would (breaches on nearly every step
have no period: that is a sustained fault).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

#: at most this share of the breaches may fall off the period's steps
MIN_PRECISION = 0.8
#: at least this share of the period's steps must breach
MIN_RECALL = 0.5
#: a period needs this many breaching steps on it
MIN_IN_CLASS = 3
#: the pattern must repeat this many times over the compared steps
MIN_REPEATS = 3


@dataclass(frozen=True)
class Period:
    """Breaches every ``period`` steps at steps = ``phase`` (mod ``period``)."""

    period: int
    phase: int
    #: breaching steps on the period / steps of the period
    on_period: int
    period_steps: int
    #: breaching steps off the period
    off_period: int
    #: the period's first compared steps (what the message shows)
    first_steps: tuple[int, ...] = ()

    def describe(self) -> str:
        """``every 2nd step (steps = 0 mod 2: 2, 4, 6, ...; 22/22 of them breach, 0 off them)``."""
        return (f"every {ordinal(self.period)} step (steps = {self.phase} mod {self.period}: "
                f"{', '.join(str(s) for s in self.first_steps)}, ...; "
                f"{self.on_period}/{self.period_steps} of them breach, {self.off_period} off them)")


def ordinal(n: int) -> str:
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def _f1(precision: float, recall: float) -> float:
    return 0.0 if precision + recall == 0 else 2 * precision * recall / (precision + recall)


def breach_period(steps: Iterable[int], breached: Iterable[int]) -> Period | None:
    """The period the ``breached`` steps follow among the compared ``steps`` (module doc), or None."""
    compared = sorted(set(steps))
    hits = set(breached) & set(compared)
    if len(hits) < MIN_IN_CLASS or len(compared) < 2 * MIN_REPEATS:
        return None
    every_step = _f1(1.0, len(hits) / len(compared))  # the F1 of "every step": what a sustained fault scores
    best: tuple[float, Period] | None = None
    for period in range(2, len(compared) // MIN_REPEATS + 1):
        for phase in range(period):
            members = [s for s in compared if s % period == phase]
            on = sum(s in hits for s in members)
            if not members or on < MIN_IN_CLASS:
                continue
            precision, recall = on / len(hits), on / len(members)
            if precision < MIN_PRECISION or recall < MIN_RECALL:
                continue
            score = _f1(precision, recall)
            if best is None or score > best[0] + 1e-12:
                best = (score, Period(period, phase, on, len(members), len(hits) - on,
                                          tuple(members[:3])))
    if best is None or best[0] <= every_step:
        return None
    return best[1]


def period_note(steps: Iterable[int], breached: Iterable[int]) -> str:
    """``; every 2nd step (...)`` when the ``breached`` steps follow a period, else ''."""
    found = breach_period(steps, breached)
    return f"; {found.describe()}" if found else ""
