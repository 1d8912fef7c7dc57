"""Fleet findings in the history (schema v5): ``fleet_findings``, one row per finding, and ``fleet_finding_cases``,
the mark of each case's event as caused by its fleet finding (:mod:`autotest.history.fleet` finds them)."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import datetime, timezone
from typing import Sequence

from autotest.history.database import tables, unwritable
from autotest.history.fleet import CaseCause, FleetFinding
from autotest.history.store import HistoryStore


def record_fleet_findings(store: HistoryStore, findings: Sequence[FleetFinding]) -> list[FleetFinding]:
    """Record each finding and mark its cases' events as caused by it; a finding already recorded (same key)
    keeps its id. Returns the findings with their ids. A refused write is a UsageError."""
    import sqlalchemy as sa

    t = tables()
    out = []
    now = datetime.now(timezone.utc).isoformat(timespec="seconds")
    try:
        with store.engine.begin() as conn:
            for f in findings:
                held = conn.execute(sa.select(t["fleet_findings"].c.id, t["fleet_findings"].c.found_at).where(
                    t["fleet_findings"].c.finding_key == f.key)).first()
                if held is not None:
                    out.append(replace(f, finding_id=held[0], found_at=held[1]))
                    continue
                finding_id = conn.execute(t["fleet_findings"].insert().values(
                    finding_key=f.key, kind=f.kind, window_start=f.window_start, window_end=f.window_end,
                    changes=json.dumps(list(f.changes)), good_sha=f.good_sha, bad_sha=f.bad_sha,
                    representative=f.representative, found_at=now)).inserted_primary_key[0]
                conn.execute(t["fleet_finding_cases"].insert(), [
                    dict(fleet_finding_id=finding_id, case_name=c.case, event=c.event, good_run_id=c.good_run_id,
                         bad_run_id=c.bad_run_id, good_sha=c.good_sha, bad_sha=c.bad_sha,
                         check_ids=json.dumps(list(c.check_ids)), changes=json.dumps(list(c.changes)))
                    for c in f.cases])
                out.append(replace(f, finding_id=finding_id, found_at=now))
    except (sa.exc.SQLAlchemyError, OSError) as exc:
        raise unwritable(store.url, exc) from None
    return out


def recorded_fleet_findings(store: HistoryStore, case: str | None = None) -> list[FleetFinding]:
    """Recorded fleet findings, oldest first (those naming ``case`` only); none on a schema older than v5."""
    if store.version < 5:
        return []
    import sqlalchemy as sa

    t = tables()
    with store.engine.connect() as conn:
        rows = list(conn.execute(sa.select(t["fleet_findings"]).order_by(t["fleet_findings"].c.id)).mappings())
        marks = list(conn.execute(sa.select(t["fleet_finding_cases"]).order_by(
            t["fleet_finding_cases"].c.fleet_finding_id, t["fleet_finding_cases"].c.case_name)).mappings())
    by_finding: dict[int, list[CaseCause]] = {}
    for m in marks:
        by_finding.setdefault(m["fleet_finding_id"], []).append(CaseCause(
            m["case_name"], m["event"], m["good_run_id"], m["bad_run_id"], m["good_sha"], m["bad_sha"],
            tuple(json.loads(m["check_ids"] or "[]")), tuple(json.loads(m["changes"] or "[]"))))
    found = [FleetFinding(r["kind"], r["window_start"], r["window_end"], tuple(json.loads(r["changes"] or "[]")),
                          tuple(by_finding.get(r["id"], ())), r["good_sha"], r["bad_sha"], r["representative"],
                          r["id"], r["found_at"]) for r in rows]
    return [f for f in found if case is None or any(c.case == case for c in f.cases)]
