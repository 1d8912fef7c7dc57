"""The history store: record results folders (idempotently) and read runs and check series back (as the rows of
:mod:`autotest.history.rows`).

``record_results`` is what the pipeline calls after every verdict; ``ingest`` records
existing results folders; ``passing_runs`` feeds ``calibrate --from-history``. Every write
of one run is one transaction whose insert of the run row is ``ON CONFLICT DO NOTHING`` on
the run's identity, so concurrent or repeated writers record each run exactly once.
"""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Sequence

from autotest.errors import UsageError
from autotest.history.database import (
    SCHEMA_VERSION,
    create_history_engine,
    describe,
    found_version,
    resolve_url,
    tables,
    unreachable,
    unwritable,
)
from autotest.history.migrations import migrate
from autotest.history.record import RunRecord, find_results_folders, read_results_folder
from autotest.history.rows import PASS, BisectFinding, CheckPoint, IngestOutcome, PassingRun, RunRow
from autotest.history.run_facts import GATE, TRUSTED_KINDS, kind_of_folder
from autotest.inputs.tracker_layout import tracker_copy
from autotest.run.replicates import run_folder_of

if TYPE_CHECKING:
    from sqlalchemy.engine import Engine

class HistoryStore:
    """A connection to one history database: migrated for writing, or read as it is (``read_only``)."""

    def __init__(self, engine: "Engine", url: str, version: int = SCHEMA_VERSION, read_only: bool = False) -> None:
        self.engine = engine
        self.url = url
        self.version = version
        self.read_only = read_only

    @classmethod
    def open(cls, url: str, *, read_only: bool = False) -> "HistoryStore":
        """Writers migrate the schema; readers never write (SQLite ``mode=ro``, a read-only PostgreSQL
        session) and read an older schema with defaults. A reader on a history without runs is told so."""
        import sqlalchemy as sa

        engine = create_history_engine(url, read_only=read_only)
        created = None if read_only else _new_sqlite_file(url)
        try:
            if read_only:
                with engine.connect() as conn:
                    version = found_version(conn, url)
                    runs = conn.execute(sa.text("SELECT COUNT(*) FROM runs")).scalar() if version else 0
                if not runs:
                    raise UsageError(f"no runs in {describe(url)}; record runs first (rl-autotest run, or "
                                     "rl-autotest history ingest RESULTS_ROOT) or pass --history URL")
            else:
                migrate(engine, url)
                version = SCHEMA_VERSION
        except sa.exc.SQLAlchemyError as exc:
            engine.dispose()
            _remove_unfinished(created)
            raise unreachable(url, exc) from None
        except BaseException:
            engine.dispose()
            _remove_unfinished(created)
            raise
        return cls(engine, url, version, read_only)

    def close(self) -> None:
        self.engine.dispose()

    def __enter__(self) -> "HistoryStore":
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def _insert(self, table):
        if self.engine.dialect.name == "postgresql":
            from sqlalchemy.dialects.postgresql import insert
        else:
            from sqlalchemy.dialects.sqlite import insert
        return insert(table)

    def add(self, record: RunRecord) -> bool:
        """Record one run; False when it was already recorded (by anyone). A refused write is a UsageError."""
        import sqlalchemy as sa

        try:
            return self._add(record)
        except (sa.exc.SQLAlchemyError, OSError) as exc:
            raise unwritable(self.url, exc) from None

    def _add(self, record: RunRecord) -> bool:
        t = tables()
        now = datetime.now(timezone.utc).isoformat(timespec="seconds")
        row = dict(run_key=record.run_key, case_name=record.case, results_dir=record.results_dir,
                   started_at=record.started_at, status=record.status, framework_sha=record.framework_sha,
                   framework_branch=record.framework_branch, framework_dirty=record.framework_dirty,
                   harness_sha=record.harness_sha, hardware=record.hardware, recorded_at=now, kind=record.kind,
                   device_seconds=record.device_seconds, cost_basis=record.cost_basis)
        stmt = self._insert(t["runs"]).values(**row).on_conflict_do_nothing(
            index_elements=["run_key"]).returning(t["runs"].c.id)
        with self.engine.begin() as conn:
            run_id = conn.execute(stmt).scalar()
            if run_id is None:
                return False
            if record.checks:
                conn.execute(t["checks"].insert(), [
                    dict(run_id=run_id, check_id=c.check_id, status=c.status, severity=c.severity, metric=c.metric,
                         method=c.method, operator=c.operator, scope=c.scope, observed=c.observed,
                         threshold=c.threshold, mde=c.mde) for c in record.checks])
            if record.metrics:
                conn.execute(t["metric_summaries"].insert(), [
                    dict(run_id=run_id, metric=m.metric, num_steps=m.num_steps, final=m.final, mean=m.mean,
                         last_window_mean=m.last_window_mean) for m in record.metrics])
        return True

    def add_finding(self, finding: BisectFinding) -> None:
        """Record what a bisect named (the dashboard marks it on the case's series). A refused write is a
        UsageError."""
        import sqlalchemy as sa

        row = {k: v for k, v in finding.__dict__.items() if k != "case"}
        row["found_at"] = finding.found_at or datetime.now(timezone.utc).isoformat(timespec="seconds")
        try:
            with self.engine.begin() as conn:
                conn.execute(tables()["bisect_findings"].insert().values(case_name=finding.case, **row))
        except (sa.exc.SQLAlchemyError, OSError) as exc:
            raise unwritable(self.url, exc) from None

    def findings(self, case: str) -> list[BisectFinding]:
        """A case's bisect findings, oldest first (none on a schema older than v4)."""
        if self.version < 4:
            return []
        import sqlalchemy as sa

        t = tables()["bisect_findings"]
        columns = [c for c in t.c if self.version >= 5 or c.name != "near_window"]  # v5 added the drift window
        rows = self._read(sa.select(*columns).where(t.c.case_name == case).order_by(t.c.id))
        return [BisectFinding(r["case_name"], r["good_sha"], r["bad_sha"], r["first_bad_sha"], r["subject"],
                              r["author"], r["confidence"], r["bisect_dir"], r["found_at"], r.get("near_window"))
                for r in rows]

    def _read(self, query) -> list:
        """Rows of a query; a database error while reading is one line."""
        import sqlalchemy as sa

        try:
            with self.engine.connect() as conn:
                return list(conn.execute(query).mappings())
        except sa.exc.SQLAlchemyError as exc:
            raise unreachable(self.url, exc) from None

    def _runs_query(self, *extra):
        """Runs with their kind and latest trust mark (defaults on a schema older than v2)."""
        import sqlalchemy as sa

        runs = tables()["runs"]
        base = [c for c in runs.c if c.name not in ("kind", "device_seconds", "cost_basis")]
        base.append(runs.c.device_seconds if self.version >= 3 else sa.null().label("device_seconds"))
        base.append(runs.c.cost_basis if self.version >= 6 else sa.null().label("cost_basis"))
        if self.version < 2:
            return sa.select(*base, sa.literal(GATE).label("kind"), sa.literal(True).label("marked_trusted"),
                             sa.null().label("trust_reason"), sa.null().label("trust_marked_at"), *extra)
        marks = tables()["trust_marks"]
        latest = sa.select(sa.func.max(marks.c.id).label("mark_id"), marks.c.run_id).group_by(
            marks.c.run_id).subquery()
        return (sa.select(*base, runs.c.kind, sa.func.coalesce(marks.c.trusted, True).label("marked_trusted"),
                          marks.c.reason.label("trust_reason"), marks.c.marked_at.label("trust_marked_at"), *extra)
                .select_from(runs.outerjoin(latest, latest.c.run_id == runs.c.id)
                             .outerjoin(marks, marks.c.id == latest.c.mark_id)))

    def cases(self) -> list[str]:
        import sqlalchemy as sa

        runs = tables()["runs"]
        return [r["case_name"] for r in self._read(sa.select(runs.c.case_name).distinct().order_by(runs.c.case_name))]

    def runs(self, case: str, *, status: str | None = None, last_n: int | None = None,
             trusted_only: bool = False) -> list[RunRow]:
        """A case's runs, oldest first (by start time, then recording order)."""
        runs = tables()["runs"]
        query = self._runs_query().where(runs.c.case_name == case)
        if status is not None:
            query = query.where(runs.c.status == status)
        query = query.order_by(runs.c.started_at.desc(), runs.c.id.desc())
        rows = [r for r in (self._run_row(m) for m in self._read(query)) if r.trusted or not trusted_only]
        return (rows if last_n is None else rows[:last_n])[::-1]

    def run(self, run_id: int) -> RunRow | None:
        rows = self._read(self._runs_query().where(tables()["runs"].c.id == run_id))
        return self._run_row(rows[0]) if rows else None

    def run_at(self, results_dir: str) -> list[RunRow]:
        return [self._run_row(m) for m in self._read(
            self._runs_query().where(tables()["runs"].c.results_dir == results_dir))]

    def check_points(self, case: str, *, gates_only: bool = True, trusted_only: bool = False,
                     severity: str = "gate") -> list[CheckPoint]:
        """Every check statistic of a case's runs, oldest run first (``gates_only``: those of ``severity``, gate
        by default; ``shadow`` for the shadow gates ``history promote-ready`` counts)."""
        runs, checks = tables()["runs"], tables()["checks"]
        import sqlalchemy as sa

        mde = checks.c.mde if self.version >= 6 else sa.null().label("mde")
        query = (self._runs_query(checks.c.check_id, checks.c.metric, checks.c.status.label("check_status"),
                                  checks.c.operator, checks.c.observed, checks.c.threshold, mde)
                 .join(checks, checks.c.run_id == runs.c.id).where(runs.c.case_name == case)
                 .order_by(runs.c.started_at, runs.c.id, checks.c.check_id))
        if gates_only:
            query = query.where(checks.c.severity == severity)
        points = []
        for r in self._read(query):
            where = f"run {r['id']} check {r['check_id']!r}"
            point = CheckPoint(self._run_row(r), r["check_id"], r["metric"], r["check_status"], r["operator"],
                               self._number(r["observed"], "checks", "observed", where),
                               self._number(r["threshold"], "checks", "threshold", where),
                               self._number(r["mde"], "checks", "mde", where))
            if point.run.trusted or not trusted_only:
                points.append(point)
        return points

    def metric_rows(self, case: str, metric: str | None = None) -> list[dict]:
        """Per-metric summaries of a case's runs (for ``history show --metric``), oldest first."""
        import sqlalchemy as sa

        runs, summaries = tables()["runs"], tables()["metric_summaries"]
        query = (sa.select(runs.c.id.label("run_id"), runs.c.started_at, runs.c.status, runs.c.framework_sha, summaries.c.metric,
                           summaries.c.final, summaries.c.mean, summaries.c.last_window_mean, summaries.c.num_steps)
                 .join(summaries, summaries.c.run_id == runs.c.id).where(runs.c.case_name == case)
                 .order_by(runs.c.started_at, runs.c.id, summaries.c.metric))
        if metric is not None:
            query = query.where(summaries.c.metric == metric)
        rows = [dict(r) for r in self._read(query)]
        for row in rows:
            for column in ("final", "mean", "last_window_mean", "num_steps"):
                self._number(row[column], "metric_summaries", column, f"run {row['run_id']} {row['metric']!r}")
        return rows

    def _number(self, value, table: str, column: str, where: str) -> float | None:
        """A numeric column's value; text there (a database written by something else) is one line."""
        if value is None or (isinstance(value, (int, float)) and not isinstance(value, bool)):
            return value
        raise UsageError(f"history {describe(self.url)}: table {table}, {where}: column {column!r} holds "
                         f"{value!r}, not a number; the database was written by something else")

    def _run_row(self, r) -> RunRow:
        return RunRow(r["id"], r["case_name"], r["results_dir"], r["started_at"], r["status"], r["framework_sha"],
                      r["harness_sha"], r["hardware"], r["kind"], bool(r["marked_trusted"]), r["trust_reason"],
                      r["trust_marked_at"],
                      self._number(r["device_seconds"], "runs", "device_seconds", f"run {r['id']}"),
                      r["cost_basis"])


def default_root_of(results_dir: Path, case: str) -> Path:
    """Results folders live at ``<root>/<case>/<run>``, a replicate's at ``<run>/replicates/<r>``; a folder
    elsewhere keeps its history beside it."""
    results_dir = run_folder_of(results_dir)
    return results_dir.parent.parent if results_dir.parent.name == case else results_dir.parent


def record_results(results_dir: str | Path, url: str | None = None) -> bool:
    """Record one results folder (call after every verdict). True if new, False if already recorded.

    Without ``url`` (or ``$RL_AUTOTEST_HISTORY``) the history is ``<results root>/history.sqlite``.
    """
    record = read_results_folder(results_dir)
    chosen = resolve_url(url, default_root_of(Path(record.results_dir), record.case))
    with HistoryStore.open(chosen) as store:
        return store.add(record)


def ingest(paths: Sequence[str | Path], url: str | None = None) -> IngestOutcome:
    """Record results folders (or every folder under a results root). All are read before any is written."""
    if not paths:
        raise UsageError("nothing to ingest: pass results folders or a results root")
    folders: list[Path] = []
    for path in paths:
        folders.extend(find_results_folders(path))
    records = [read_results_folder(f) for f in dict.fromkeys(folders)]
    first = Path(paths[0])
    root = first if not (first / "results.json").is_file() else default_root_of(first.resolve(), records[0].case)
    chosen = resolve_url(url, root)
    recorded, already = [], []
    with HistoryStore.open(chosen) as store:
        for record in records:
            (recorded if store.add(record) else already).append(record.results_dir)
    warnings = tuple(w for r in records for w in r.warnings)
    return IngestOutcome(tuple(recorded), tuple(already), warnings, chosen)


def passing_runs(case: str, last_n: int, url: str | None = None,
                 results_root: str | Path | None = None) -> list[PassingRun]:
    """The last ``last_n`` trusted passing runs of ``case`` whose tracker copy is still on disk, oldest first.

    A run made with a fault, a dry run, a bisect probe or a run marked untrusted never counts; its
    results.json is read again, so a history recorded before runs had a kind cannot slip one in.
    """
    if last_n < 1:
        raise UsageError(f"--last must be at least 1, got {last_n}")
    with open_for_reading(url, results_root) as store:
        rows = store.runs(case, status=PASS)
    found: list[PassingRun] = []
    left_out = 0
    for row in reversed(rows):
        if not row.trusted or kind_of_folder(Path(row.results_dir)) not in TRUSTED_KINDS:
            left_out += 1
            continue
        tracker = tracker_copy(Path(row.results_dir))  # tracker.jsonl, trainer_state.json or tensorboard/
        if tracker is not None:
            found.append(PassingRun(Path(row.results_dir), tracker, row.framework_sha, row.harness_sha))
        if len(found) == last_n:
            break
    if not found:
        untrusted = f" ({left_out} passing run(s) left out: made with a fault, or marked untrusted)" if left_out else ""
        raise UsageError(f"no trusted passing run of {case!r} with its tracker copy on disk in the history{untrusted}")
    return found[::-1]


def _new_sqlite_file(url: str) -> Path | None:
    """The SQLite file a writer is about to create (None: it exists, or the history is not SQLite)."""
    import sqlalchemy as sa

    parsed = sa.engine.make_url(url)
    if parsed.get_backend_name() != "sqlite" or not parsed.database:
        return None
    path = Path(parsed.database).expanduser()
    return None if path.exists() else path


def _remove_unfinished(created: Path | None) -> None:
    """A history file this open created but could not finish (a full disk): removed, never left as 0 bytes
    that the next run takes for a corrupt database."""
    if created is None:
        return
    for leftover in (created, created.with_name(created.name + "-journal")):
        try:
            leftover.unlink()
        except FileNotFoundError:
            pass


def open_for_reading(url: str | None, results_root: str | Path | None) -> HistoryStore:
    """The history opened read-only (``show``, ``drift``, ``dashboard``, ``--from-history``): nothing is
    created or written; an empty or missing history is "no runs in <url>"."""
    return HistoryStore.open(resolve_url(url, results_root), read_only=True)
