"""The history database: where it is (URL resolution), its tables, and its versioned migrations.

One SQLAlchemy Core schema serves both back ends: a SQLite file under the results root by
default (nothing to install on a laptop) and PostgreSQL by URL (``--history URL`` or
``RL_AUTOTEST_HISTORY``) for many runners. Times are ISO 8601 UTC strings and non-finite
numbers are NULL, so both back ends store, sort and return the same values.

Migrations are numbered functions applied in order inside one transaction that holds a
lock (PostgreSQL advisory lock; SQLite's write lock), so concurrent first openings are safe.
"""

from __future__ import annotations

import os
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from autotest.errors import UsageError
from autotest.inputs.project import find_project

if TYPE_CHECKING:
    from sqlalchemy.engine import Connection, Engine

HISTORY_ENV = "RL_AUTOTEST_HISTORY"
SQLITE_NAME = "history.sqlite"
#: an arbitrary constant: the advisory-lock key this harness's migrations take on PostgreSQL
_PG_MIGRATION_LOCK = 0x726C6174


def _require_sqlalchemy():
    try:
        import sqlalchemy
    except ImportError:
        raise UsageError("the history needs SQLAlchemy: pip install 'rl-autotest[history]'") from None
    return sqlalchemy


def resolve_url(url: str | None, results_root: str | Path | None) -> str:
    """``url``, else ``$RL_AUTOTEST_HISTORY``, else the project's ``history``, else SQLite at
    ``<results_root>/history.sqlite``.

    A value without ``://`` is a SQLite file path.
    """
    chosen = url or os.environ.get(HISTORY_ENV)
    if not chosen:
        project = find_project()
        chosen = project.history if project is not None else None
    if chosen:
        return chosen if "://" in chosen else f"sqlite:///{Path(chosen).resolve()}"
    if results_root is None:
        raise UsageError(f"no history database: pass --history URL, set {HISTORY_ENV}, or give a results root")
    return f"sqlite:///{(Path(results_root) / SQLITE_NAME).resolve()}"


def describe(url: str) -> str:
    """The URL with its password hidden, for messages."""
    sa = _require_sqlalchemy()
    try:
        return sa.engine.make_url(url).render_as_string(hide_password=True)
    except Exception:  # noqa: BLE001 - an unparsable URL is shown as given, minus anything after '@'
        return url.split("@")[-1]


def create_history_engine(url: str, *, must_exist: bool = False) -> "Engine":
    """An engine on a SQLite or PostgreSQL URL (psycopg 3 driver); bad URLs are one-line UsageErrors."""
    sa = _require_sqlalchemy()
    try:
        parsed = sa.engine.make_url(url)
    except sa.exc.ArgumentError:
        raise UsageError(f"bad history URL {url!r}: expected sqlite:///PATH or postgresql://USER@HOST/DB") from None
    backend = parsed.get_backend_name()
    if backend == "sqlite":
        if not parsed.database or parsed.database == ":memory:":
            raise UsageError(f"bad history URL {describe(url)}: a SQLite history needs a file path")
        path = Path(parsed.database)
        if must_exist and not path.is_file():
            raise UsageError(f"no history at {path}; ingest results first (rl-autotest history ingest) "
                             "or pass --history URL")
        if not path.parent.is_dir():
            raise UsageError(f"history file {path}: folder {path.parent} does not exist")
        # a writer waits up to 60 s for another's lock instead of failing (pytest-xdist, parallel runners)
        return sa.create_engine(parsed, connect_args={"timeout": 60})
    if backend == "postgresql":
        if parsed.drivername == "postgresql":
            parsed = parsed.set(drivername="postgresql+psycopg")
        try:
            return sa.create_engine(parsed, pool_pre_ping=True)
        except ImportError:
            raise UsageError("a PostgreSQL history needs psycopg: pip install 'rl-autotest[history]'") from None
    raise UsageError(f"bad history URL {describe(url)}: back end {backend!r} is not supported; "
                     "use sqlite:///PATH or postgresql://...")


def _metadata():
    sa = _require_sqlalchemy()
    md = sa.MetaData()
    sa.Table("schema_migrations", md,
             sa.Column("version", sa.Integer, primary_key=True, autoincrement=False),
             sa.Column("description", sa.String(200), nullable=False),
             sa.Column("applied_at", sa.String(32), nullable=False))
    sa.Table("runs", md,
             sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
             sa.Column("run_key", sa.String(64), nullable=False, unique=True),
             sa.Column("case_name", sa.String(200), nullable=False),
             sa.Column("results_dir", sa.Text, nullable=False),
             sa.Column("started_at", sa.String(32), nullable=False),
             sa.Column("status", sa.String(16), nullable=False),
             sa.Column("framework_sha", sa.String(64)),
             sa.Column("framework_branch", sa.String(200)),
             sa.Column("framework_dirty", sa.Boolean),
             sa.Column("harness_sha", sa.String(64)),
             sa.Column("hardware", sa.Text, nullable=False),
             sa.Column("recorded_at", sa.String(32), nullable=False),
             sa.Index("ix_runs_case_started", "case_name", "started_at"))
    sa.Table("checks", md,
             sa.Column("run_id", sa.Integer, sa.ForeignKey("runs.id", ondelete="CASCADE"), primary_key=True),
             sa.Column("check_id", sa.String(300), primary_key=True),
             sa.Column("status", sa.String(16), nullable=False),
             sa.Column("severity", sa.String(16), nullable=False),
             sa.Column("metric", sa.String(300)),
             sa.Column("method", sa.String(32)),
             sa.Column("operator", sa.String(4)),
             sa.Column("scope", sa.String(32)),
             sa.Column("observed", sa.Float(53)),
             sa.Column("threshold", sa.Float(53)))
    sa.Table("metric_summaries", md,
             sa.Column("run_id", sa.Integer, sa.ForeignKey("runs.id", ondelete="CASCADE"), primary_key=True),
             sa.Column("metric", sa.String(300), primary_key=True),
             sa.Column("num_steps", sa.Integer, nullable=False),
             sa.Column("final", sa.Float(53)),
             sa.Column("mean", sa.Float(53)),
             sa.Column("last_window_mean", sa.Float(53)))
    return md


_TABLES = None


def tables():
    """The current schema's tables by name (built once; SQLAlchemy is imported on first use)."""
    global _TABLES
    if _TABLES is None:
        _TABLES = _metadata()
    return _TABLES.tables


def _v1_create_tables(conn: "Connection") -> None:
    # v1 is the schema as defined above; the first migration that changes a table freezes v1's
    # definition here and alters the table in its own function
    md = tables()["runs"].metadata
    md.create_all(conn, tables=[md.tables[n] for n in ("runs", "checks", "metric_summaries")])


#: (version, description, apply): append only; a released migration never changes
MIGRATIONS: tuple[tuple[int, str, Callable[["Connection"], None]], ...] = (
    (1, "runs, checks and per-metric summaries", _v1_create_tables),
)
SCHEMA_VERSION = MIGRATIONS[-1][0]


def _lock(conn: "Connection") -> None:
    sa = _require_sqlalchemy()
    if conn.dialect.name == "postgresql":
        conn.execute(sa.text("SELECT pg_advisory_xact_lock(:key)"), {"key": _PG_MIGRATION_LOCK})
    else:
        # pysqlite starts transactions lazily: a write now takes SQLite's one writer lock
        conn.execute(sa.text("CREATE TABLE IF NOT EXISTS _history_lock (id INTEGER)"))
        conn.execute(sa.text("DELETE FROM _history_lock"))


def migrate(engine: "Engine") -> int:
    """Bring the schema to :data:`SCHEMA_VERSION`; returns the version found before. Safe to race."""
    sa = _require_sqlalchemy()
    migrations = tables()["schema_migrations"]
    with engine.begin() as conn:
        _lock(conn)
        migrations.create(conn, checkfirst=True)
        found = conn.execute(sa.select(sa.func.max(migrations.c.version))).scalar() or 0
        if found > SCHEMA_VERSION:
            raise UsageError(f"history database {describe(str(engine.url))} has schema version {found}, "
                             f"newer than this rl-autotest's {SCHEMA_VERSION}; upgrade rl-autotest")
        for version, description, apply in MIGRATIONS:
            if version > found:
                apply(conn)
                conn.execute(migrations.insert().values(
                    version=version, description=description,
                    applied_at=datetime.now(timezone.utc).isoformat(timespec="seconds")))
    return found
