"""Fleet triage: several cases that changed at the same nightly are one event, not one investigation each.

A case's change is an **event**: a flip (PASS -> FAIL between two consecutive trusted gate runs, failing since) or
a drift change point (``drift_in``; its night is uncertain, so the event spans ``margin_runs`` either side). Events
whose windows overlap are grouped across cases; a group of at least ``min_cases`` cases is classified from what the
recorded environments (each run's ``preflight.json``: packages, Python, GPU models, driver, CUDA, the framework's
Python's packages; ``image`` and ``runner`` when recorded) and framework commits did between the window's ends:

- ``environment``: one environment change common to every case, or an environment change in every case while no
  framework commit moved. One finding names it; the cases' events are marked as caused by it; one batch
  recalibration is proposed (:mod:`autotest.calibration.batch`);
- ``code``: the framework commit moved and no environment change explains the fleet: one bisect for the fleet
  (``good_sha``..``bad_sha`` on a representative case), attributed to every case;
- ``unexplained``: neither moved: noise, or a change the runs do not record (data, a service).

Pure logic over the store; :mod:`autotest.history.fleet_store` records the findings and reads them back.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from dataclasses import dataclass, field, replace
from datetime import date, datetime, timedelta, timezone
from pathlib import Path
from typing import Any, Sequence

from autotest.history.changepoint import DriftParams
from autotest.history.drift import drift_in
from autotest.history.run_facts import GATE
from autotest.history.store import PASS, HistoryStore, RunRow
from autotest.run.environment_diff import environment_changes

FLIP, DRIFT, FLIP_AND_DRIFT = "flip", "drift", "flip+drift"
ENVIRONMENT, CODE, UNEXPLAINED = "environment", "code", "unexplained"
#: recorded environment keys compared beside :func:`environment_changes`' (the container image, the runner record)
EXTRA_KEYS = ("image", "runner")


@dataclass(frozen=True)
class FleetParams:
    #: a group of at least this many cases changing together is a fleet event
    min_cases: int = 2
    #: look at changes whose window ends within the latest this-many nights of the history
    nights: int = 7
    #: a drift change point's night is uncertain: its window spans this many trusted runs either side
    margin_runs: int = 1
    drift: DriftParams = DriftParams()

    def __post_init__(self) -> None:
        if self.min_cases < 2 or self.nights < 1 or self.margin_runs < 0:
            raise ValueError("fleet triage needs min_cases >= 2, nights >= 1 and margin_runs >= 0")


@dataclass(frozen=True)
class CaseEvent:
    """One case's change: between its last trusted run before the window (``good``) and its first after (``bad``)."""

    case: str
    kind: str
    good: RunRow
    bad: RunRow
    #: the trusted runs from good to bad, both included
    runs: tuple[RunRow, ...]
    #: the gated checks that changed (failed at the flip, or drifted)
    check_ids: tuple[str, ...] = ()
    #: a drift's levels per check: (check_id, mean before, mean after, threshold), the largest shift first
    levels: tuple[tuple[str, float, float, float], ...] = ()

    @property
    def start(self) -> date:
        return night_of(self.good)

    @property
    def end(self) -> date:
        return night_of(self.bad)

    @property
    def nights(self) -> int:
        """The window's width: nights from the last good run to the first bad one."""
        return (self.end - self.start).days

    def window(self) -> str:
        return window_text(self.good, self.bad)


@dataclass(frozen=True)
class CaseCause:
    """A case's event as a fleet finding names it (and marks it caused by the finding)."""

    case: str
    event: str
    good_run_id: int
    bad_run_id: int
    good_sha: str | None
    bad_sha: str | None
    check_ids: tuple[str, ...] = ()
    #: this case's recorded environment changes inside its window
    changes: tuple[str, ...] = ()


@dataclass(frozen=True)
class FleetFinding:
    kind: str
    #: the earliest last-good and the latest first-bad run's start (ISO 8601)
    window_start: str
    window_end: str
    #: the environment change(s) named (environment), else what changed anywhere in the fleet
    changes: tuple[str, ...]
    cases: tuple[CaseCause, ...]
    #: the one bisect for the fleet (code): its ends and the case it runs
    good_sha: str | None = None
    bad_sha: str | None = None
    representative: str | None = None
    finding_id: int | None = None
    found_at: str = ""

    @property
    def key(self) -> str:
        """Identity: the same fleet event found again (another nightly look) is recorded once."""
        text = "\0".join([self.kind, self.window_start, self.window_end,
                          *(f"{c.case}:{c.good_run_id}:{c.bad_run_id}" for c in self.cases)])
        return hashlib.sha256(text.encode()).hexdigest()[:32]

    @property
    def nights(self) -> int:
        return (_day(self.window_end) - _day(self.window_start)).days

    def describe(self) -> str:
        """One line: what, when, which cases, what follows."""
        names = ", ".join(c.case for c in self.cases)
        where = f"between {self.window_start[:10]} and {self.window_end[:10]} ({self.nights} night(s))"
        label = f"fleet finding {self.finding_id}" if self.finding_id is not None else "fleet finding"
        if self.kind == ENVIRONMENT:
            return (f"{label}: environment changed {where}: {'; '.join(self.changes)}; explains {len(self.cases)} "
                    f"case(s): {names}; one batch recalibration proposed, no per-case investigation")
        if self.kind == CODE:
            return (f"{label}: code changed {where} ({(self.good_sha or '?')[:12]}..{(self.bad_sha or '?')[:12]}), "
                    f"no common environment change; {len(self.cases)} case(s): {names}; one bisect for the fleet "
                    f"on {self.representative}")
        return (f"{label}: {len(self.cases)} case(s) changed together {where} with no recorded environment or "
                f"framework change (noise, or a change the runs do not record: data, a service): {names}")


def night_of(run: RunRow) -> date:
    return _day(run.started_at)


def _day(started_at: str) -> date:
    moment = datetime.fromisoformat(started_at)
    return (moment if moment.tzinfo else moment.replace(tzinfo=timezone.utc)).astimezone(timezone.utc).date()


def window_text(good: RunRow, bad: RunRow) -> str:
    """``2026-01-24 .. 2026-01-27, 3 nights``: the last good run's night to the first bad run's."""
    nights = (night_of(bad) - night_of(good)).days
    return f"{night_of(good).isoformat()} .. {night_of(bad).isoformat()}, {nights} night{'s' if nights != 1 else ''}"


# ---------------------------------------------------------------- events


def _gate_runs(store: HistoryStore, case: str) -> list[RunRow]:
    return [r for r in store.runs(case, trusted_only=True) if r.kind == GATE]


def flip_event(store: HistoryStore, case: str, since: date | None = None) -> CaseEvent | None:
    """The case's latest PASS -> FAIL between consecutive trusted gate runs, still not passing since; None when
    there is none, or when it happened before ``since``."""
    gates = _gate_runs(store, case)
    for i in range(len(gates) - 1, 0, -1):
        if gates[i].status == PASS:
            return None  # passing again (or still): no standing flip
        if gates[i - 1].status == PASS:
            if since is not None and night_of(gates[i]) < since:
                return None
            failed = tuple(sorted({p.check_id for p in store.check_points(case) if p.run.run_id == gates[i].run_id
                                   and p.status != PASS}))
            return CaseEvent(case, FLIP, gates[i - 1], gates[i], (gates[i - 1], gates[i]), failed)
    return None


def drift_events(store: HistoryStore, case: str, params: FleetParams = FleetParams(),
                 since: date | None = None, worse_only: bool = False) -> list[CaseEvent]:
    """The case's drift change points as windows of ``margin_runs`` trusted runs either side of the change point
    (checks whose windows overlap are one event). ``worse_only``: changes toward the threshold only."""
    runs = store.runs(case, trusted_only=True)
    index = {r.run_id: i for i, r in enumerate(runs)}
    found: list[CaseEvent] = []
    for finding in drift_in(store, case, params.drift):
        if worse_only and finding.direction != "toward the threshold":
            continue
        i = index.get(finding.since.run_id)
        if i is None or i == 0:
            continue
        good, bad = runs[max(0, i - 1 - params.margin_runs)], runs[min(len(runs) - 1, i + params.margin_runs)]
        if since is not None and night_of(bad) < since:
            continue
        event = CaseEvent(case, DRIFT, good, bad, tuple(runs[index[good.run_id]:index[bad.run_id] + 1]),
                          (finding.check_id,), ((finding.check_id, finding.before_observed, finding.after_observed,
                                                 finding.threshold),))
        for k, other in enumerate(found):
            if _overlap(other, event):
                found[k] = _merge(other, event)
                break
        else:
            found.append(event)
    return found


def _overlap(a: CaseEvent, b: CaseEvent) -> bool:
    """Windows (good night, bad night] share a night."""
    return a.start < b.end and b.start < a.end


def merge_case_events(events: Sequence[CaseEvent]) -> list[CaseEvent]:
    """A case's events that share or touch a night are one: a drift whose window ends the night a flip starts is
    the flip seen early (the flipped run itself lifts the latest regime), and both are bisected once."""
    merged: list[CaseEvent] = []
    for event in sorted(events, key=lambda e: (e.case, e.start, e.end)):
        last = merged[-1] if merged else None
        if last is not None and last.case == event.case and event.start <= last.end:
            merged[-1] = _merge(last, event)
        else:
            merged.append(event)
    return merged


def _merge(a: CaseEvent, b: CaseEvent) -> CaseEvent:
    """One case's two events in one window: a flip's exact ends win over a drift's wider ones."""
    kind = a.kind if a.kind == b.kind else FLIP_AND_DRIFT
    if FLIP in (a.kind, b.kind):
        narrow = a if a.kind == FLIP else b
    else:
        narrow = a if a.nights <= b.nights else b
    levels = sorted({*a.levels, *b.levels}, key=lambda x: -abs(x[2] - x[1]) / (x[3] or 1.0))
    return replace(narrow, kind=kind, check_ids=tuple(sorted({*a.check_ids, *b.check_ids})), levels=tuple(levels))


def case_events(store: HistoryStore, cases: Sequence[str] | None = None, params: FleetParams = FleetParams(),
                worse_only: bool = False) -> list[CaseEvent]:
    """Every case's flip and drift events whose window ends within the latest ``params.nights`` nights; a case's
    flip and drift in one window, or in touching windows, are one event (``flip+drift``)."""
    names = list(cases or store.cases())
    latest = max((night_of(r) for c in names for r in store.runs(c, last_n=1)), default=None)
    if latest is None:
        return []
    since = latest - timedelta(days=params.nights - 1)
    events: list[CaseEvent] = []
    for case in names:
        events += drift_events(store, case, params, since, worse_only)
        flip = flip_event(store, case, since)
        events += [flip] if flip is not None else []
    return merge_case_events(events)


def group_events(events: Sequence[CaseEvent], min_cases: int = 2) -> list[list[CaseEvent]]:
    """Events whose windows overlap (chained) are one group; groups of ``min_cases`` or more cases, one event a
    case (its narrowest), in window order."""
    ordered = sorted(events, key=lambda e: (e.start, e.end, e.case))
    groups: list[list[CaseEvent]] = []
    end: date | None = None
    for event in ordered:
        if groups and end is not None and event.start < end:
            groups[-1].append(event)
            end = max(end, event.end)
        else:
            groups.append([event])
            end = event.end
    kept = []
    for group in groups:
        per_case: dict[str, CaseEvent] = {}
        for event in group:
            held = per_case.get(event.case)
            per_case[event.case] = event if held is None else _merge(held, event)
        if len(per_case) >= min_cases:
            kept.append([per_case[c] for c in sorted(per_case)])
    return kept


# ---------------------------------------------------------------- environment


def recorded_environment(run: RunRow) -> dict[str, Any] | None:
    """The environment a run recorded (its results folder's ``preflight.json``); None when gone or unreadable."""
    try:
        data = json.loads((Path(run.results_dir) / "preflight.json").read_bytes())
    except (OSError, ValueError):
        return None
    env = data.get("environment") if isinstance(data, dict) else None
    return env if isinstance(env, dict) else None


def environment_changes_between(runs: Sequence[RunRow]) -> list[str]:
    """What changed in the recorded environment from each run to the next (in order, each change once); the
    hardware fingerprint stands in where a run's environment is not on disk."""
    changes: list[str] = []
    for before, after in zip(runs, runs[1:]):
        old, new = recorded_environment(before), recorded_environment(after)
        if old is None or new is None:
            found = [] if before.hardware == after.hardware else [f"hardware {before.hardware} -> {after.hardware}"]
        else:
            found = environment_changes(old, new)
            found += [f"{key} {old.get(key)} -> {new.get(key)}" for key in EXTRA_KEYS
                      if (old.get(key) or new.get(key)) and old.get(key) != new.get(key)]
        changes.extend(c for c in found if c not in changes)
    return changes


def classify(group: Sequence[CaseEvent]) -> FleetFinding:
    """One group's finding: environment, code or unexplained (module docstring)."""
    causes = tuple(CaseCause(e.case, e.kind, e.good.run_id, e.bad.run_id, e.good.framework_sha, e.bad.framework_sha,
                             e.check_ids, tuple(environment_changes_between(e.runs))) for e in group)
    start = min(e.good.started_at for e in group)
    end = max(e.bad.started_at for e in group)
    common = [c for c in causes[0].changes if all(c in other.changes for other in causes[1:])]
    code_moved = [c for c in causes if c.good_sha != c.bad_sha]
    if common:
        return FleetFinding(ENVIRONMENT, start, end, tuple(common), causes)
    if all(c.changes for c in causes) and not code_moved:
        every = tuple(dict.fromkeys(change for c in causes for change in c.changes))
        return FleetFinding(ENVIRONMENT, start, end, every, causes)
    if code_moved:
        # the narrowest window on the most common pair of ends; a flip (exact night) before a drift
        pairs = Counter((c.good_sha, c.bad_sha) for c in code_moved)
        ends = pairs.most_common(1)[0][0]
        rank = {FLIP: 0, FLIP_AND_DRIFT: 0, DRIFT: 1}
        pick = min((e for e in group if (e.good.framework_sha, e.bad.framework_sha) == ends),
                   key=lambda e: (rank[e.kind], e.nights, e.case))
        anywhere = tuple(dict.fromkeys(change for c in causes for change in c.changes))
        return FleetFinding(CODE, start, end, anywhere, causes, ends[0], ends[1], pick.case)
    return FleetFinding(UNEXPLAINED, start, end, (), causes)


def triage(store: HistoryStore, cases: Sequence[str] | None = None, params: FleetParams = FleetParams(),
           events: Sequence[CaseEvent] | None = None) -> list[FleetFinding]:
    """Fleet findings among the cases' recent events (or the ``events`` given), oldest window first."""
    found = case_events(store, cases, params) if events is None else events
    return [classify(group) for group in group_events(found, params.min_cases)]


@dataclass
class FleetTriage:
    """What one look found: the fleet findings, and the events of cases that changed alone."""

    findings: list[FleetFinding] = field(default_factory=list)
    alone: list[CaseEvent] = field(default_factory=list)


def split_fleet(events: Sequence[CaseEvent], params: FleetParams = FleetParams()) -> FleetTriage:
    """Fleet findings for the groups, and every event outside a group (a case that changed alone)."""
    groups = group_events(events, params.min_cases)
    grouped = {(e.case, e.good.run_id) for group in groups for e in group}
    in_window = [(g[0].start, max(e.end for e in g), {e.case for e in g}) for g in groups]
    alone = [e for e in events if (e.case, e.good.run_id) not in grouped
             and not any(e.case in names and e.start < end and start < e.end for start, end, names in in_window)]
    return FleetTriage([classify(g) for g in groups], alone)
