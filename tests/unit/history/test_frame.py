"""The history as a table: one row per gate of each run with its cost and MDE; CSV, parquet and the DataFrame."""

from __future__ import annotations

import csv
import sys

import pytest

from autotest.errors import UsageError
from autotest.history.database import sqlite_url
from autotest.history.frame import COLUMNS, NAMES, export_rows, frame, store_url, write_export
from autotest.history.store import HistoryStore, ingest
from tests.helpers import ROOT
from tests.unit.history.builders import REWARDS, write_results_folder

GPU_COST = {"device_seconds": 812.5, "basis": "gpu-seconds", "quantity": "GPU-seconds: wall 101.6 s x 8 GPUs"}


@pytest.fixture
def root(tmp_path):
    root = tmp_path / "results"
    write_results_folder(root, "a", 1, {REWARDS: 0.1}, cost=GPU_COST, mde={REWARDS: 0.042})
    write_results_folder(root, "a", 2, {REWARDS: 0.3}, cost={"device_seconds": 700.0})  # before bases and MDEs
    write_results_folder(root, "b", 1, {}, kind="calibration")  # no cost, one structural gate
    ingest([root])
    return root


def test_each_gate_of_each_run_is_a_row_with_the_run_s_cost_beside_its_mde(root) -> None:
    with HistoryStore.open(sqlite_url(root / "history.sqlite"), read_only=True) as store:
        rows = export_rows(store)
        assert [r["case"] for r in export_rows(store, "b")] == ["b"]
    assert all(list(r) == list(NAMES) for r in rows)
    by = {(r["case"], r["night"], r["check_id"]): r for r in rows}
    first = by[("a", "2026-01-02", REWARDS)]
    assert (first["device_seconds"], first["cost_basis"], first["mde"], first["observed"]) == (
        812.5, "gpu-seconds", 0.042, 0.1)
    second = by[("a", "2026-01-03", REWARDS)]
    assert (second["device_seconds"], second["cost_basis"], second["mde"], second["check_status"]) == (
        700.0, None, None, "FAIL")
    calibration = by[("b", "2026-01-02", "steps[count]")]
    assert calibration["kind"] == "calibration" and calibration["device_seconds"] is None
    assert len(rows) == 5  # a: 2 runs x 2 gates, b: 1 run x 1 gate


def test_the_dataframe_reads_a_url_a_file_or_a_results_root(root) -> None:
    pandas = pytest.importorskip("pandas")
    for where in (root, root / "history.sqlite", sqlite_url(root / "history.sqlite")):
        table = frame(where)
        assert list(table.columns) == list(NAMES) and len(table) == 5
    assert str(table["started_at"].dtype).startswith("datetime64") and table["mde"].dtype == "float64"
    costs = table.drop_duplicates("run_id").groupby("case")["device_seconds"].sum(min_count=1)
    assert costs["a"] == 1512.5 and pandas.isna(costs["b"])
    assert store_url("postgresql://u@h/db") == "postgresql://u@h/db"


def test_csv_and_parquet_round_trip(root, tmp_path) -> None:
    pandas = pytest.importorskip("pandas")
    pytest.importorskip("pyarrow")
    with HistoryStore.open(sqlite_url(root / "history.sqlite"), read_only=True) as store:
        rows = export_rows(store)
    with write_export(rows, "csv", tmp_path / "h.csv").open(newline="") as f:
        read = list(csv.DictReader(f))
    assert [r["mde"] for r in read if r["check_id"] == REWARDS] == ["0.042", ""]
    parquet = pandas.read_parquet(write_export(rows, "parquet", tmp_path / "h.parquet"))
    assert parquet["mde"].dtype == "float64" and parquet["device_seconds"].tolist()[:2] == [812.5, 812.5]


def test_bad_outputs_and_a_missing_extra_are_one_line(root, tmp_path, monkeypatch) -> None:
    with pytest.raises(UsageError, match=r"--out .*: is a folder; give a file path"):
        write_export([], "csv", tmp_path)
    with pytest.raises(UsageError, match=r"--out .*: folder .*nowhere does not exist"):
        write_export([], "csv", tmp_path / "nowhere" / "h.csv")
    with pytest.raises(UsageError, match=r"--format: 'xlsx' is not one of csv, parquet"):
        write_export([], "xlsx", tmp_path / "h.xlsx")
    monkeypatch.setitem(sys.modules, "pyarrow", None)  # an install without the notebook extra
    with pytest.raises(UsageError, match=r"^--format parquet needs pyarrow: pip install 'rl-autotest\[notebook\]' "
                                         r"\(or use --format csv\)$"):
        write_export([], "parquet", tmp_path / "h.parquet")
    monkeypatch.setitem(sys.modules, "pandas", None)
    with pytest.raises(UsageError, match=r"needs pandas: pip install 'rl-autotest\[notebook\]'"):
        frame(root)


def test_docs_list_every_column_and_the_extra_is_declared() -> None:
    page = (ROOT / "docs" / "history.md").read_text(encoding="utf-8")
    missing = [name for name, _ in COLUMNS if f"| `{name}` |" not in page]
    assert not missing, f"docs/history.md lacks export columns {missing}"
    assert 'notebook = ["pandas' in (ROOT / "pyproject.toml").read_text(encoding="utf-8")


def test_nightly_costs_sum_a_case_s_runs_per_night_and_keep_the_latest_mdes(root) -> None:
    from autotest.history.frame import nightly_costs

    with HistoryStore.open(sqlite_url(root / "history.sqlite"), read_only=True) as store:
        costs = nightly_costs(export_rows(store))
    assert [(c.case, c.night, c.runs, c.device_seconds, c.unit, c.mdes) for c in costs] == [
        ("a", "2026-01-02", 1, 812.5, "GPU-s", {REWARDS: 0.042}),
        ("a", "2026-01-03", 1, 700.0, "device-s", {}),
        ("b", "2026-01-02", 1, None, "device-s", {})]
