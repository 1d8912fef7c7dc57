"""The history as one table for a notebook: a row per gate of each recorded run, with the run's cost beside the
gate's minimum detectable effect.

``frame(store)`` returns a pandas DataFrame (pandas is imported only there: ``pip install 'rl-autotest[notebook]'``);
``export_rows`` and ``write_export`` serve ``rl-autotest history export --format csv|parquet`` (CSV needs nothing
beyond the standard library; parquet needs pyarrow, from the same extra). :data:`COLUMNS` declares every column once:
the rows, the CSV header and the table in docs/history.md follow from it.
"""

from __future__ import annotations

import csv
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from autotest.errors import UsageError, WriteFailed
from autotest.files import write_atomic
from autotest.history.database import SQLITE_NAME, sqlite_url
from autotest.judge.model import COST_UNITS

if TYPE_CHECKING:
    import pandas

    from autotest.history.store import HistoryStore

EXTRA = "pip install 'rl-autotest[notebook]'"
FORMATS = ("csv", "parquet")

#: (column, what it holds): one row per gate check of each recorded run; a run without a gate check has one row
#: whose check columns are empty
COLUMNS: tuple[tuple[str, str], ...] = (
    ("run_id", "the run's id in the history (`history show`, `history untrust` take it)"),
    ("case", "case name"),
    ("started_at", "when the run started (ISO 8601, UTC)"),
    ("night", "the UTC date it started: the nightly it belongs to"),
    ("status", "the run's verdict: PASS, FAIL or ERROR"),
    ("kind", "why it ran: gate, calibration, fault, dry-run, bisect"),
    ("trusted", "feeds calibration, drift and the dashboard's bands (a gate or calibration run not untrusted)"),
    ("framework_sha", "commit under test"),
    ("device_seconds", "what the run cost (a replicate mean: the sum of its replicates)"),
    ("cost_basis", "which quantity that is: gpu-seconds (wall x GPUs), cpu-seconds (the run's measured CPU time), "
                   "core-seconds (wall x cores held); empty before history v6"),
    ("check_id", "the gate check"),
    ("metric", "the metric it checks"),
    ("check_status", "the gate's own status"),
    ("observed", "the number compared with the threshold"),
    ("threshold", "the threshold"),
    ("mde", "the smallest constant change the gate catches with 80% power, in the metric's units (empty: a bound, "
            "or recorded before history v6)"),
)
NAMES = tuple(name for name, _ in COLUMNS)


def store_url(store_url_or_path: str | Path) -> str:
    """A history URL as given, or a path: a SQLite history file, or a results root holding history.sqlite."""
    text = str(store_url_or_path)
    if "://" in text:
        return text
    path = Path(text).expanduser()
    return sqlite_url(path / SQLITE_NAME if path.is_dir() else path)


def export_rows(store: "HistoryStore", case: str | None = None) -> list[dict[str, Any]]:
    """Every run of ``case`` (every case when None), oldest first per case, one row per gate check."""
    rows: list[dict[str, Any]] = []
    for name in [case] if case is not None else store.cases():
        checks: dict[int, list] = {}
        for point in store.check_points(name, gates_only=True):
            checks.setdefault(point.run.run_id, []).append(point)
        for run in store.runs(name):
            base = {"run_id": run.run_id, "case": run.case, "started_at": run.started_at,
                    "night": run.started_at[:10], "status": run.status, "kind": run.kind, "trusted": run.trusted,
                    "framework_sha": run.framework_sha, "device_seconds": run.device_seconds,
                    "cost_basis": run.cost_basis}
            points = checks.get(run.run_id) or [None]
            for p in points:
                rows.append({**base, "check_id": p and p.check_id, "metric": p and p.metric,
                             "check_status": p and p.status, "observed": p and p.observed,
                             "threshold": p and p.threshold, "mde": p and p.mde})
    return rows


@dataclass(frozen=True)
class NightCost:
    """What one case's runs of one night (UTC date) cost, and the MDEs its latest run reached."""

    case: str
    night: str
    runs: int
    #: the sum over the runs that recorded a cost (None: none did)
    device_seconds: float | None
    #: the runs' cost bases joined (``gpu-seconds``); empty when none was recorded
    basis: str
    #: check_id -> MDE of the night's latest run
    mdes: dict[str, float]

    @property
    def unit(self) -> str:
        return COST_UNITS.get(self.basis, "device-s")


def nightly_costs(rows: Iterable[dict[str, Any]]) -> list[NightCost]:
    """Per case and night: the runs, their summed cost and the latest run's MDEs (from :func:`export_rows`)."""
    nights: dict[tuple[str, str], dict[int, list[dict[str, Any]]]] = {}
    for row in rows:
        nights.setdefault((row["case"], row["night"]), {}).setdefault(row["run_id"], []).append(row)
    out = []
    for (case, night), runs in sorted(nights.items()):
        firsts = [checks[0] for checks in runs.values()]
        costs = [r["device_seconds"] for r in firsts if r["device_seconds"] is not None]
        bases = sorted({r["cost_basis"] for r in firsts if r["cost_basis"]})
        latest = runs[max(runs, key=lambda i: (runs[i][0]["started_at"], i))]
        out.append(NightCost(case, night, len(runs), round(sum(costs), 1) if costs else None, " + ".join(bases),
                             {r["check_id"]: r["mde"] for r in latest if r["mde"] is not None}))
    return out


def frame(store_url_or_path: str | Path, case: str | None = None) -> "pandas.DataFrame":
    """The history as a DataFrame (columns: :data:`COLUMNS`), opened read-only: a URL, a history.sqlite file or a
    results root holding one."""
    try:
        import pandas
    except ImportError:
        raise UsageError(f"autotest.history.frame needs pandas: {EXTRA}") from None
    from autotest.history.store import HistoryStore

    with HistoryStore.open(store_url(store_url_or_path), read_only=True) as store:
        rows = export_rows(store, case)
    table = pandas.DataFrame(rows, columns=list(NAMES))
    table["started_at"] = pandas.to_datetime(table["started_at"], utc=True)
    return table


def write_export(rows: Iterable[dict[str, Any]], fmt: str, out: Path) -> Path:
    """Write the rows as CSV (empty cells for None) or parquet (typed columns); a missing pyarrow is one line."""
    if fmt not in FORMATS:
        raise UsageError(f"--format: {fmt!r} is not one of {', '.join(FORMATS)}")
    rows = list(rows)
    if out.is_dir():
        raise UsageError(f"--out {out}: is a folder; give a file path, e.g. {out / ('history.' + fmt)}")
    if not out.parent.is_dir():
        raise UsageError(f"--out {out}: folder {out.parent} does not exist")
    if fmt == "parquet":
        try:
            import pyarrow
            import pyarrow.parquet
        except ImportError:
            raise UsageError(f"--format parquet needs pyarrow: {EXTRA} (or use --format csv)") from None
        table = pyarrow.Table.from_pylist(rows, schema=_arrow_schema(pyarrow))
        try:
            pyarrow.parquet.write_table(table, str(out))
        except OSError as exc:
            raise UsageError(f"--out {out}: cannot write ({exc})") from None
        return out
    import io

    text = io.StringIO()
    writer = csv.DictWriter(text, fieldnames=list(NAMES), lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    try:
        write_atomic(out, text.getvalue())
    except WriteFailed as exc:
        raise UsageError(f"--out {out}: cannot write ({exc})") from None
    return out


def _arrow_schema(pyarrow: Any) -> Any:
    """Typed parquet columns, so an all-empty column (an old history's mde) keeps its type."""
    numbers = {"device_seconds", "observed", "threshold", "mde"}
    types = {"run_id": pyarrow.int64(), "trusted": pyarrow.bool_()}
    return pyarrow.schema([(n, types.get(n, pyarrow.float64() if n in numbers else pyarrow.string()))
                           for n in NAMES])
