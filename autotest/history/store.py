"""The history store: record results folders (idempotently) and read runs and check series back.

``record_results`` is what the pipeline calls after every verdict; ``ingest`` records
existing results folders; ``passing_runs`` feeds ``calibrate --from-history``. Every write
of one run is one transaction whose insert of the run row is ``ON CONFLICT DO NOTHING`` on
the run's identity, so concurrent or repeated writers record each run exactly once.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Sequence

from autotest.errors import UsageError
from autotest.history.database import (
    create_history_engine,
    describe,
    migrate,
    resolve_url,
    tables,
)
from autotest.history.record import RunRecord, find_results_folders, read_results_folder
from autotest.inputs.tracker_layout import tracker_copy
from autotest.run.replicates import REPLICATES_FOLDER

if TYPE_CHECKING:
    from sqlalchemy.engine import Engine

PASS = "PASS"


@dataclass(frozen=True)
class RunRow:
    """One recorded run, as read back from the store."""

    run_id: int
    case: str
    results_dir: str
    started_at: str
    status: str
    framework_sha: str | None
    harness_sha: str | None
    hardware: str


@dataclass(frozen=True)
class CheckPoint:
    """One gated check's statistic in one run."""

    run: RunRow
    check_id: str
    metric: str | None
    status: str
    operator: str | None
    observed: float | None
    threshold: float | None


@dataclass(frozen=True)
class IngestOutcome:
    recorded: tuple[str, ...]
    already_recorded: tuple[str, ...]
    warnings: tuple[str, ...]
    url: str


@dataclass(frozen=True)
class PassingRun:
    """A passing run for ``calibrate --from-history``: where its evidence is and what it ran."""

    results_dir: Path
    tracker: Path
    framework_sha: str | None
    harness_sha: str | None


def _unreachable(url: str, exc: Exception) -> UsageError:
    first_line = str(getattr(exc, "orig", None) or exc).strip().splitlines()[0]
    return UsageError(f"cannot open history database {describe(url)}: {first_line}")


class HistoryStore:
    """A migrated connection to one history database."""

    def __init__(self, engine: "Engine", url: str) -> None:
        self.engine = engine
        self.url = url

    @classmethod
    def open(cls, url: str, *, must_exist: bool = False) -> "HistoryStore":
        import sqlalchemy as sa

        engine = create_history_engine(url, must_exist=must_exist)
        try:
            migrate(engine)
        except sa.exc.SQLAlchemyError as exc:
            engine.dispose()
            raise _unreachable(url, exc) from None
        return cls(engine, url)

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
        """Record one run; False when it was already recorded (by anyone)."""
        t = tables()
        now = datetime.now(timezone.utc).isoformat(timespec="seconds")
        row = dict(run_key=record.run_key, case_name=record.case, results_dir=record.results_dir,
                   started_at=record.started_at, status=record.status, framework_sha=record.framework_sha,
                   framework_branch=record.framework_branch, framework_dirty=record.framework_dirty,
                   harness_sha=record.harness_sha, hardware=record.hardware, recorded_at=now)
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
                         threshold=c.threshold) for c in record.checks])
            if record.metrics:
                conn.execute(t["metric_summaries"].insert(), [
                    dict(run_id=run_id, metric=m.metric, num_steps=m.num_steps, final=m.final, mean=m.mean,
                         last_window_mean=m.last_window_mean) for m in record.metrics])
        return True

    def cases(self) -> list[str]:
        import sqlalchemy as sa

        runs = tables()["runs"]
        with self.engine.connect() as conn:
            return list(conn.execute(sa.select(runs.c.case_name).distinct().order_by(runs.c.case_name)).scalars())

    def runs(self, case: str, *, status: str | None = None, last_n: int | None = None) -> list[RunRow]:
        """A case's runs, oldest first (by start time, then recording order)."""
        import sqlalchemy as sa

        runs = tables()["runs"]
        query = sa.select(runs).where(runs.c.case_name == case)
        if status is not None:
            query = query.where(runs.c.status == status)
        query = query.order_by(runs.c.started_at.desc(), runs.c.id.desc())
        if last_n is not None:
            query = query.limit(last_n)
        with self.engine.connect() as conn:
            rows = [_run_row(r) for r in conn.execute(query).mappings()]
        return rows[::-1]

    def check_points(self, case: str, *, gates_only: bool = True) -> list[CheckPoint]:
        """Every check statistic of a case's runs, oldest run first."""
        import sqlalchemy as sa

        runs, checks = tables()["runs"], tables()["checks"]
        query = (sa.select(runs, checks.c.check_id, checks.c.metric, checks.c.status.label("check_status"),
                           checks.c.operator, checks.c.observed, checks.c.threshold)
                 .join(checks, checks.c.run_id == runs.c.id).where(runs.c.case_name == case)
                 .order_by(runs.c.started_at, runs.c.id, checks.c.check_id))
        if gates_only:
            query = query.where(checks.c.severity == "gate")
        with self.engine.connect() as conn:
            return [CheckPoint(_run_row(r), r["check_id"], r["metric"], r["check_status"], r["operator"],
                               r["observed"], r["threshold"]) for r in conn.execute(query).mappings()]

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
        with self.engine.connect() as conn:
            return [dict(r) for r in conn.execute(query).mappings()]


def _run_row(r) -> RunRow:
    return RunRow(r["id"], r["case_name"], r["results_dir"], r["started_at"], r["status"], r["framework_sha"],
                  r["harness_sha"], r["hardware"])


def default_root_of(results_dir: Path, case: str) -> Path:
    """Results folders live at ``<root>/<case>/<run>``, a replicate's at ``<run>/replicates/<r>``; a folder
    elsewhere keeps its history beside it."""
    if results_dir.parent.name == REPLICATES_FOLDER:
        results_dir = results_dir.parent.parent
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
    """The last ``last_n`` passing runs of ``case`` whose tracker copy is still on disk, oldest first."""
    if last_n < 1:
        raise UsageError(f"--last must be at least 1, got {last_n}")
    with HistoryStore.open(resolve_url(url, results_root), must_exist=True) as store:
        rows = store.runs(case, status=PASS)
    found: list[PassingRun] = []
    for row in reversed(rows):
        tracker = tracker_copy(Path(row.results_dir))  # tracker.jsonl, trainer_state.json or tensorboard/
        if tracker is not None:
            found.append(PassingRun(Path(row.results_dir), tracker, row.framework_sha, row.harness_sha))
        if len(found) == last_n:
            break
    if not found:
        raise UsageError(f"no passing run of {case!r} with its tracker copy on disk in the history")
    return found[::-1]


def open_for_reading(url: str | None, results_root: str | Path | None) -> HistoryStore:
    return HistoryStore.open(resolve_url(url, results_root), must_exist=True)
