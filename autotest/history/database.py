"""The history database: where it is (URL resolution), its tables, and its versioned migrations.

One SQLAlchemy Core schema serves both back ends: a SQLite file under the results root by
default (nothing to install on a laptop) and PostgreSQL by URL (``--history URL`` or
``RL_AUTOTEST_HISTORY``) for many runners. Times are ISO 8601 UTC strings and non-finite
numbers are NULL, so both back ends store, sort and return the same values.

Migrations are numbered functions (:mod:`autotest.history.migrations`) applied in order inside one
transaction that holds a lock (PostgreSQL advisory lock; SQLite's write lock), so concurrent first
openings are safe.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import TYPE_CHECKING

from autotest.errors import UsageError
from autotest.history import HISTORY_ENV
from autotest.history.run_facts import GATE
from autotest.inputs.project import find_project

if TYPE_CHECKING:
    from sqlalchemy.engine import Connection, Engine

SQLITE_NAME = "history.sqlite"
def _require_sqlalchemy():
    try:
        import sqlalchemy
    except ImportError:
        raise UsageError("the history needs SQLAlchemy (a dependency of rl-autotest): pip install 'sqlalchemy>=2.0'"
                         ) from None
    return sqlalchemy


#: the URL forms the history accepts; anything else is refused in one line (never a file in the working directory)
URL_FORMS = "sqlite:///PATH (sqlite:////abs/path for an absolute path) or postgresql://USER@HOST[:PORT]/DB"
_SCHEMES = ("sqlite", "postgresql", "postgresql+psycopg")
_SCHEME = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*)://")


def resolve_url(url: str | None, results_root: str | Path | None) -> str:
    """``url``, else ``$RL_AUTOTEST_HISTORY``, else the project's ``history``, else SQLite at
    ``<results_root>/history.sqlite``.

    A given URL is checked strictly (:func:`check_url`): a plain path or a typo is refused, never
    turned into a new SQLite file in the working directory.
    """
    chosen, where = url, "--history"
    if not chosen and os.environ.get(HISTORY_ENV):
        chosen, where = os.environ[HISTORY_ENV], f"${HISTORY_ENV}"
    if not chosen:
        project = find_project()
        if project is not None and project.history is not None:
            chosen, where = project.history, f"{project.source}: key 'history'"
    if chosen:
        check_url(chosen, where)
        return chosen
    if results_root is None:
        raise UsageError(f"no history database: pass --history URL, set {HISTORY_ENV}, or give a results root")
    return sqlite_url(Path(results_root) / SQLITE_NAME)


def sqlite_url(path: str | Path) -> str:
    """The SQLite URL of a file (absolute)."""
    return f"sqlite:///{Path(path).expanduser().resolve()}"


def check_url(url: str, where: str = "--history"):
    """Parse a history URL strictly; returns SQLAlchemy's URL. Every bad form is one UsageError line."""
    sa = _require_sqlalchemy()
    shown = describe(url)
    scheme = _SCHEME.match(url)
    if scheme is None:
        if url.lower().startswith(("postgres", "sqlite")):
            hint = "; the back end is followed by ://"
        elif os.sep in url or url.endswith((".sqlite", ".db")):
            hint = f"; for a SQLite file give {sqlite_url(url)}"
        else:
            hint = ""
        raise UsageError(f"{where}: {shown!r} is not a history URL; expected {URL_FORMS}{hint}")
    name = scheme.group(1).lower()
    if name not in _SCHEMES:
        suggestion = "; did you mean postgresql://...?" if name.startswith("postgres") else ""
        raise UsageError(f"{where}: bad history URL {shown}: back end {name!r} is not supported; "
                         f"expected {URL_FORMS}{suggestion}")
    try:
        parsed = sa.engine.make_url(url)
    except sa.exc.ArgumentError:
        raise UsageError(f"{where}: bad history URL {shown}: cannot be parsed; expected {URL_FORMS}") from None
    except ValueError as exc:  # e.g. a port that is not a number
        detail = "the port is not a number" if "int()" in str(exc) else str(exc)
        raise UsageError(f"{where}: bad history URL {shown}: {detail}; expected {URL_FORMS}") from None
    if name == "sqlite":
        if not parsed.database or parsed.database == ":memory:" or parsed.database.startswith("file:"):
            raise UsageError(f"{where}: bad history URL {shown}: a SQLite history needs a file path "
                             "(sqlite:///PATH)")
        if parsed.host or parsed.query:
            raise UsageError(f"{where}: bad history URL {shown}: a SQLite URL has no host or options; "
                             "give sqlite:///PATH")
    elif not parsed.database:
        raise UsageError(f"{where}: bad history URL {shown}: no database name (postgresql://USER@HOST/DB)")
    return parsed


def describe(url: str) -> str:
    """The URL with its password hidden, for messages."""
    sa = _require_sqlalchemy()
    try:
        return sa.engine.make_url(url).render_as_string(hide_password=True)
    except Exception:  # noqa: BLE001 - an unparsable URL is shown as given, its password masked
        return re.sub(r"(://[^:/@]*:)[^@/]*@", r"\1***@", url)


def _first_line(exc: Exception) -> str:
    return (str(getattr(exc, "orig", None) or exc).strip().splitlines() or [type(exc).__name__])[0]


def unreachable(url: str, exc: Exception) -> UsageError:
    """One line for a database that cannot be opened or read."""
    return UsageError(f"cannot open history database {describe(url)}: {_first_line(exc)}")


def unwritable(url: str, exc: Exception) -> UsageError:
    """One line for a write the database refused (read-only, locked, full, gone mid-session)."""
    return UsageError(f"cannot write to history database {describe(url)}: {_first_line(exc)}")


def create_history_engine(url: str, *, read_only: bool = False) -> "Engine":
    """An engine on a SQLite or PostgreSQL URL (psycopg 3 driver); bad URLs are one-line UsageErrors.

    ``read_only`` (``show``, ``drift``, ``dashboard``, ``calibrate --from-history``): SQLite opens the file
    with ``mode=ro`` (a missing file is "no runs", never created; nothing is ever written into it) and
    PostgreSQL sessions are ``default_transaction_read_only``.
    """
    sa = _require_sqlalchemy()
    parsed = check_url(url)
    if parsed.get_backend_name() == "sqlite":
        path = Path(parsed.database).expanduser()
        if read_only and not path.exists():
            raise UsageError(f"no runs in {describe(url)} (no such file); record runs first (rl-autotest run, "
                             "or rl-autotest history ingest RESULTS_ROOT) or pass --history URL")
        if path.exists() and not path.is_file():
            raise UsageError(f"history file {path}: is not a file; give sqlite:///PATH of a file")
        if not path.parent.is_dir():
            raise UsageError(f"history file {path}: folder {path.parent} does not exist")
        if read_only:
            import sqlite3

            target = f"{path.resolve().as_uri()}?mode=ro"
            return sa.create_engine("sqlite://", creator=lambda: sqlite3.connect(target, uri=True, timeout=60))
        # a writer waits up to 60 s for another's lock instead of failing (pytest-xdist, parallel runners)
        return sa.create_engine(parsed, connect_args={"timeout": 60})
    if parsed.drivername == "postgresql":
        parsed = parsed.set(drivername="postgresql+psycopg")
    connect_args = {"options": "-c default_transaction_read_only=on"} if read_only else {}
    try:
        return sa.create_engine(parsed, pool_pre_ping=True, connect_args=connect_args)
    except ImportError:
        raise UsageError("a PostgreSQL history needs psycopg: pip install 'rl-autotest[history]'") from None


def _metadata(version: int):
    """The tables as of schema ``version`` (a migration builds exactly its version's definition)."""
    sa = _require_sqlalchemy()
    md = sa.MetaData()
    sa.Table("schema_migrations", md,
             sa.Column("version", sa.Integer, primary_key=True, autoincrement=False),
             sa.Column("description", sa.String(200), nullable=False),
             sa.Column("applied_at", sa.String(32), nullable=False))
    since_v2 = [sa.Column("kind", sa.String(16), nullable=False, server_default=GATE)] if version >= 2 else []
    since_v3 = [sa.Column("device_seconds", sa.Float(53))] if version >= 3 else []
    since_v6 = [sa.Column("cost_basis", sa.String(64))] if version >= 6 else []
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
             *since_v2,
             *since_v3,
             *since_v6,
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
             sa.Column("threshold", sa.Float(53)),
             *([sa.Column("mde", sa.Float(53))] if version >= 6 else []))
    sa.Table("metric_summaries", md,
             sa.Column("run_id", sa.Integer, sa.ForeignKey("runs.id", ondelete="CASCADE"), primary_key=True),
             sa.Column("metric", sa.String(300), primary_key=True),
             sa.Column("num_steps", sa.Integer, nullable=False),
             sa.Column("final", sa.Float(53)),
             sa.Column("mean", sa.Float(53)),
             sa.Column("last_window_mean", sa.Float(53)))
    if version >= 2:
        # append-only: a run's trust is its latest mark (none: trusted); each says when, who and why
        sa.Table("trust_marks", md,
                 sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
                 sa.Column("run_id", sa.Integer, sa.ForeignKey("runs.id", ondelete="CASCADE"), nullable=False),
                 sa.Column("trusted", sa.Boolean, nullable=False),
                 sa.Column("reason", sa.Text, nullable=False),
                 sa.Column("marked_at", sa.String(32), nullable=False),
                 sa.Column("marked_by", sa.String(200)),
                 sa.Index("ix_trust_marks_run", "run_id", "id"))
    if version >= 4:
        # a bisect's answer for a case: the commit it named between two recorded runs' framework commits
        sa.Table("bisect_findings", md,
                 sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
                 sa.Column("case_name", sa.String(200), nullable=False),
                 sa.Column("good_sha", sa.String(64), nullable=False),
                 sa.Column("bad_sha", sa.String(64), nullable=False),
                 sa.Column("first_bad_sha", sa.String(64), nullable=False),
                 sa.Column("subject", sa.Text, nullable=False),
                 sa.Column("author", sa.String(200), nullable=False),
                 sa.Column("confidence", sa.String(16), nullable=False),
                 sa.Column("bisect_dir", sa.Text, nullable=False),
                 sa.Column("found_at", sa.String(32), nullable=False),
                 *([sa.Column("near_window", sa.Text)] if version >= 5 else []),
                 sa.Index("ix_bisect_findings_case", "case_name", "id"))
    if version >= 5:
        # fleet triage: several cases that changed at one nightly, explained once (autotest/history/fleet.py)
        sa.Table("fleet_findings", md,
                 sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
                 sa.Column("finding_key", sa.String(64), nullable=False, unique=True),
                 sa.Column("kind", sa.String(16), nullable=False),
                 sa.Column("window_start", sa.String(32), nullable=False),
                 sa.Column("window_end", sa.String(32), nullable=False),
                 sa.Column("changes", sa.Text, nullable=False),
                 sa.Column("good_sha", sa.String(64)),
                 sa.Column("bad_sha", sa.String(64)),
                 sa.Column("representative", sa.String(200)),
                 sa.Column("found_at", sa.String(32), nullable=False))
        # each case's event marked as caused by its fleet finding
        sa.Table("fleet_finding_cases", md,
                 sa.Column("fleet_finding_id", sa.Integer, sa.ForeignKey("fleet_findings.id", ondelete="CASCADE"),
                           primary_key=True),
                 sa.Column("case_name", sa.String(200), primary_key=True),
                 sa.Column("event", sa.String(16), nullable=False),
                 sa.Column("good_run_id", sa.Integer, nullable=False),
                 sa.Column("bad_run_id", sa.Integer, nullable=False),
                 sa.Column("good_sha", sa.String(64)),
                 sa.Column("bad_sha", sa.String(64)),
                 sa.Column("check_ids", sa.Text, nullable=False),
                 sa.Column("changes", sa.Text, nullable=False),
                 sa.Index("ix_fleet_finding_cases_case", "case_name"))
    return md



_TABLES = None


def tables():
    """The current schema's tables by name (built once; SQLAlchemy is imported on first use)."""
    global _TABLES
    if _TABLES is None:
        _TABLES = _metadata(SCHEMA_VERSION)
    return _TABLES.tables


#: the newest schema; autotest.history.migrations holds one step per version up to it (a test pins the two together)
SCHEMA_VERSION = 6


_OURS = ("schema_migrations", "runs", "checks", "metric_summaries", "trust_marks", "bisect_findings",
         "fleet_findings", "fleet_finding_cases")


def found_version(conn: "Connection", url: str) -> int:
    """The schema version of the database behind ``conn``: 0 when it holds nothing of ours yet.

    Another application's database (its own ``runs`` or ``schema_migrations``, or, for SQLite, any
    tables at all) is a one-line UsageError, never written into; so is a newer schema than this one.
    """
    sa = _require_sqlalchemy()
    names = set(sa.inspect(conn).get_table_names()) - {"_history_lock"}
    migrations = {c["name"] for c in sa.inspect(conn).get_columns("schema_migrations")} \
        if "schema_migrations" in names else set()
    if {"version", "description", "applied_at"} <= migrations and "runs" in names:
        found = conn.execute(sa.text("SELECT MAX(version) FROM schema_migrations")).scalar()
        found = 0 if found is None else found  # SQLite's MAX ranks any text above every number: one text row shows
        if isinstance(found, bool) or not isinstance(found, int):
            raise UsageError(f"{describe(url)}: table schema_migrations holds version {found!r}, not a whole number "
                             "(rl-autotest writes whole numbers: another tool changed it?); restore the history from "
                             "a backup, or give another --history")
        if found > SCHEMA_VERSION:
            raise UsageError(f"history database {describe(url)} has schema version {found}, "
                             f"newer than this rl-autotest's {SCHEMA_VERSION}; upgrade rl-autotest")
        return found
    clash = sorted(names & set(_OURS))
    if clash or (names and conn.dialect.name == "sqlite"):
        shown = ", ".join(sorted(names)[:5]) + (", ..." if len(names) > 5 else "")
        raise UsageError(f"{describe(url)} is not an rl-autotest history (it holds tables {shown}); "
                         "give the history's URL, or a new file for a new history")
    return 0
