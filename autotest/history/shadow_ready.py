"""Which shadow gates are ready to block: ``rl-autotest history promote-ready`` and ``baseline promote --shadow``.

A shadow gate (``severity: shadow``, or every gate of a case with ``shadow: true``) is judged and recorded every
run and never fails it. Over a case's last K trusted gate runs (the nights: trusted as ``history drift`` trusts
them, and of kind ``gate``, so calibration, fault and bisect runs never count), each shadow check is

- **judged** on the nights it decided (PASS or FAIL; an ERROR night is undecided),
- **would have failed** on the nights it FAILed, and
- a **false alarm** on the nights it FAILed while the run's own verdict was PASS (nothing blocking saw a problem;
  a shadow FAIL on a night the blocking gates failed too is a regression seen twice, not a false alarm).

The rule: a shadow check is **ready** when the case has K trusted gate runs, the check was judged on all K, and
its false alarms are at most ``allowed`` (default 0). Its observed false-alarm rate is false alarms / judged.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from autotest.history.run_facts import GATE

if TYPE_CHECKING:
    from autotest.history.store import HistoryStore

SHADOW = "shadow"
#: nights a shadow gate must hold when none are asked for (a week of nightlies)
DEFAULT_NIGHTS = 7


@dataclass(frozen=True)
class ShadowStanding:
    """One shadow check of one case over its last ``nights`` trusted gate runs."""

    case: str
    check_id: str
    #: K: the trusted gate runs asked for
    nights: int
    #: the trusted gate runs the history holds in that window (fewer than K in a young history)
    runs: int
    #: nights it decided (PASS or FAIL)
    judged: int
    #: nights it FAILed
    would_fail: int
    #: nights it FAILed while the run passed
    false_alarms: int
    #: nights it could not decide (ERROR)
    undecided: int
    #: false alarms a ready check may have had
    allowed: int = 0

    @property
    def false_alarm_rate(self) -> float | None:
        return self.false_alarms / self.judged if self.judged else None

    @property
    def ready(self) -> bool:
        return self.runs >= self.nights and self.judged >= self.nights and self.false_alarms <= self.allowed

    @property
    def why(self) -> str:
        """``yes``, or ``no: <the first part of the rule it misses>``."""
        if self.ready:
            return "yes"
        if self.runs < self.nights:
            return f"no: only {self.runs} trusted gate run(s) of {self.nights}"
        if self.judged < self.nights:
            return f"no: judged on {self.judged} of {self.nights} nights"
        return f"no: {self.false_alarms} false alarm(s), {self.allowed} allowed"

    def row(self) -> dict[str, object]:
        rate = self.false_alarm_rate
        return {"case": self.case, "check": self.check_id, "nights": f"{self.runs}/{self.nights}",
                "judged": self.judged, "would fail": self.would_fail, "false alarms": self.false_alarms,
                "false-alarm rate": "-" if rate is None else f"{rate:.0%}", "ready": self.why}


def shadow_standings(store: "HistoryStore", case: str, nights: int = DEFAULT_NIGHTS,
                     allowed: int = 0) -> list[ShadowStanding]:
    """Every shadow check of ``case`` seen in its last ``nights`` trusted gate runs, by check id."""
    window = [r for r in store.runs(case, trusted_only=True) if r.kind == GATE][-nights:]
    verdicts = {r.run_id: r.status for r in window}
    tally: dict[str, list[int]] = {}  # check -> [judged, would fail, false alarms, undecided]
    for point in store.check_points(case, severity=SHADOW):
        status = verdicts.get(point.run.run_id)
        if status is None:
            continue
        counts = tally.setdefault(point.check_id, [0, 0, 0, 0])
        counts[0] += point.status in ("PASS", "FAIL")
        counts[1] += point.status == "FAIL"
        counts[2] += point.status == "FAIL" and status == "PASS"
        counts[3] += point.status == "ERROR"
    return [ShadowStanding(case, check_id, nights, len(window), *counts, allowed=allowed)
            for check_id, counts in sorted(tally.items())]
