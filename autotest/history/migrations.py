"""The history's schema migrations: one numbered step per schema version, append only (a released step never
changes). :func:`migrate` applies those above the version found, in order, in one locked transaction; a step that
adds a column fills it for earlier runs from their results.json when it is still on disk.
"""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from autotest.history.database import SCHEMA_VERSION, _metadata, _require_sqlalchemy, found_version, tables
from autotest.history.run_facts import GATE, cost_and_mdes_of_folder, device_seconds_of_folder, kind_of_folder

if TYPE_CHECKING:
    from sqlalchemy.engine import Connection, Engine

#: an arbitrary constant: the advisory-lock key this harness's migrations take on PostgreSQL
_PG_MIGRATION_LOCK = 0x726C6174


def _v1_create_tables(conn: "Connection") -> None:
    md = _metadata(1)
    md.create_all(conn, tables=[md.tables[n] for n in ("runs", "checks", "metric_summaries")])


def _v2_kind_and_trust(conn: "Connection") -> None:
    sa = _require_sqlalchemy()
    conn.execute(sa.text(f"ALTER TABLE runs ADD COLUMN kind VARCHAR(16) NOT NULL DEFAULT '{GATE}'"))
    _metadata(2).tables["trust_marks"].create(conn)
    # runs recorded before v2 get their kind from their results.json when it is still on disk
    for run_id, results_dir in conn.execute(sa.text("SELECT id, results_dir FROM runs")).all():
        kind = kind_of_folder(Path(str(results_dir)))
        if kind != GATE:
            conn.execute(sa.text("UPDATE runs SET kind = :kind WHERE id = :id"), {"kind": kind, "id": run_id})


def _v3_device_seconds(conn: "Connection") -> None:
    sa = _require_sqlalchemy()
    conn.execute(sa.text("ALTER TABLE runs ADD COLUMN device_seconds DOUBLE PRECISION"))
    # runs recorded before v3 get their cost from their results.json when it is still on disk
    for run_id, results_dir in conn.execute(sa.text("SELECT id, results_dir FROM runs")).all():
        cost = device_seconds_of_folder(Path(str(results_dir)))
        if cost is not None:
            conn.execute(sa.text("UPDATE runs SET device_seconds = :cost WHERE id = :id"), {"cost": cost, "id": run_id})


def _v4_bisect_findings(conn: "Connection") -> None:
    _metadata(4).tables["bisect_findings"].create(conn)


def _v5_fleet_findings(conn: "Connection") -> None:
    sa = _require_sqlalchemy()
    conn.execute(sa.text("ALTER TABLE bisect_findings ADD COLUMN near_window TEXT"))
    md = _metadata(5)
    md.tables["fleet_findings"].create(conn)
    md.tables["fleet_finding_cases"].create(conn)


def _v6_cost_beside_power(conn: "Connection") -> None:
    sa = _require_sqlalchemy()
    conn.execute(sa.text("ALTER TABLE runs ADD COLUMN cost_basis VARCHAR(64)"))
    conn.execute(sa.text("ALTER TABLE checks ADD COLUMN mde DOUBLE PRECISION"))
    # runs recorded before v6 get their cost's quantity and their gates' MDEs from their results.json when it is
    # still on disk
    for run_id, results_dir in conn.execute(sa.text("SELECT id, results_dir FROM runs")).all():
        basis, mdes = cost_and_mdes_of_folder(Path(str(results_dir)))
        if basis is not None:
            conn.execute(sa.text("UPDATE runs SET cost_basis = :basis WHERE id = :id"), {"basis": basis, "id": run_id})
        for check_id, mde in mdes.items():
            conn.execute(sa.text("UPDATE checks SET mde = :mde WHERE run_id = :id AND check_id = :check"),
                         {"mde": mde, "id": run_id, "check": check_id})


#: (version, description, apply): append only; a released migration never changes
MIGRATIONS: tuple[tuple[int, str, Callable[["Connection"], None]], ...] = (
    (1, "runs, checks and per-metric summaries", _v1_create_tables),
    (2, "run kind (gate, calibration, fault, dry-run, bisect) and trust marks", _v2_kind_and_trust),
    (3, "device-seconds per run (wall x GPUs, or wall x cores on CPU)", _v3_device_seconds),
    (4, "bisect findings: the first bad commit a bisect named for a case", _v4_bisect_findings),
    (5, "fleet findings (cases that changed together, explained once) and a bisect finding's drift window",
     _v5_fleet_findings),
    (6, "cost beside power: which quantity a run's cost is, and each gate's minimum detectable effect",
     _v6_cost_beside_power),
)
assert MIGRATIONS[-1][0] == SCHEMA_VERSION, "a new migration step raises database.SCHEMA_VERSION with it"


def _lock(conn: "Connection") -> None:
    sa = _require_sqlalchemy()
    if conn.dialect.name == "postgresql":
        conn.execute(sa.text("SELECT pg_advisory_xact_lock(:key)"), {"key": _PG_MIGRATION_LOCK})
    else:
        # pysqlite starts transactions lazily: a write now takes SQLite's one writer lock
        conn.execute(sa.text("CREATE TABLE IF NOT EXISTS _history_lock (id INTEGER)"))
        conn.execute(sa.text("DELETE FROM _history_lock"))


def migrate(engine: "Engine", url: str | None = None) -> int:
    """Bring the schema to :data:`SCHEMA_VERSION`; returns the version found before. Safe to race."""
    _require_sqlalchemy()  # a clear line where SQLAlchemy is missing, before any table is touched
    migrations = tables()["schema_migrations"]
    with engine.begin() as conn:
        found_version(conn, url or str(engine.url))  # another application's database: refused before any write
        _lock(conn)
        found = found_version(conn, url or str(engine.url))
        migrations.create(conn, checkfirst=True)
        for version, description, apply in MIGRATIONS:
            if version > found:
                apply(conn)
                conn.execute(migrations.insert().values(
                    version=version, description=description,
                    applied_at=datetime.now(timezone.utc).isoformat(timespec="seconds")))
    return found
