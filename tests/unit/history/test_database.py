"""Where the history is (a strict URL grammar), its versioned schema, and opening it without writing."""

from __future__ import annotations

import sqlite3

import pytest
import sqlalchemy as sa

from autotest.errors import UsageError
from autotest.history.database import (
    HISTORY_ENV,
    SCHEMA_VERSION,
    _metadata,
    check_url,
    create_history_engine,
    describe,
    resolve_url,
    tables,
)
from autotest.history.migrations import MIGRATIONS, migrate


def test_the_url_comes_from_the_flag_then_the_environment_then_the_results_root(tmp_path, monkeypatch) -> None:
    monkeypatch.delenv(HISTORY_ENV, raising=False)
    assert resolve_url(None, tmp_path) == f"sqlite:///{tmp_path / 'history.sqlite'}"
    monkeypatch.setenv(HISTORY_ENV, "postgresql://ci@db/history")
    assert resolve_url(None, tmp_path) == "postgresql://ci@db/history"
    assert resolve_url(f"sqlite:///{tmp_path / 'h.db'}", tmp_path) == f"sqlite:///{tmp_path / 'h.db'}"
    monkeypatch.delenv(HISTORY_ENV)
    with pytest.raises(UsageError, match="no history database: pass --history URL"):
        resolve_url(None, None)


def test_passwords_are_hidden_in_messages() -> None:
    assert describe("postgresql://ci:s3cret@db/history") == "postgresql://ci:***@db/history"


@pytest.mark.parametrize("url", ["sqlite:///h.sqlite", "sqlite:////abs/h.sqlite", "postgresql://ci@db/history",
                                 "postgresql+psycopg://ci:pw@db:5433/history?sslmode=require"])
def test_the_accepted_url_forms(url) -> None:
    assert check_url(url).database


@pytest.mark.parametrize("url, message", [
    ("not a url", "--history: 'not a url' is not a history URL; expected sqlite:///PATH"),
    ("::::", "'::::' is not a history URL"),
    ("postgres//oops", "'postgres//oops' is not a history URL; expected sqlite:///PATH .*; the back end is "
                       "followed by ://"),
    ("results/history.sqlite", "is not a history URL; .*for a SQLite file give sqlite:////"),
    ("postgres://ci@db/h", "back end 'postgres' is not supported; .*did you mean postgresql://"),
    ("mysql://u@h/db", "back end 'mysql' is not supported"),
    ("postgresql://u@h:abc/db", "bad history URL postgresql://u@h:abc/db: the port is not a number"),
    ("postgresql://u@h", "no database name"),
    ("sqlite://", "a SQLite history needs a file path"),
    ("sqlite:///:memory:", "a SQLite history needs a file path"),
    ("sqlite://host/h.db", "a SQLite URL has no host or options"),
])
def test_every_other_url_is_refused_in_one_line(url, message) -> None:
    with pytest.raises(UsageError, match=message) as error:
        check_url(url)
    assert "\n" not in str(error.value)


def test_a_malformed_url_in_the_environment_names_the_variable(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv(HISTORY_ENV, "not a url")
    with pytest.raises(UsageError, match=r"\$RL_AUTOTEST_HISTORY: 'not a url' is not a history URL"):
        resolve_url(None, tmp_path)
    assert list(tmp_path.iterdir()) == []


def test_a_sqlite_file_in_a_missing_folder_is_refused() -> None:
    with pytest.raises(UsageError, match="folder /no/such/folder does not exist"):
        create_history_engine("sqlite:////no/such/folder/h.sqlite")


def test_readers_never_create_the_file(tmp_path) -> None:
    with pytest.raises(UsageError, match=r"no runs in sqlite:///.*h.sqlite \(no such file\)"):
        create_history_engine(f"sqlite:///{tmp_path / 'h.sqlite'}", read_only=True)
    assert not (tmp_path / "h.sqlite").exists()


def test_a_read_only_engine_cannot_write(tmp_path) -> None:
    path = tmp_path / "h.sqlite"
    sqlite3.connect(path).close()
    engine = create_history_engine(f"sqlite:///{path}", read_only=True)
    with pytest.raises(sa.exc.OperationalError, match="readonly database"), engine.begin() as conn:
        conn.execute(sa.text("CREATE TABLE t (x INTEGER)"))
    engine.dispose()
    assert path.stat().st_size == 0


def test_migrations_apply_once_and_are_recorded(tmp_path) -> None:
    engine = create_history_engine(f"sqlite:///{tmp_path / 'h.sqlite'}")
    assert migrate(engine) == 0
    assert migrate(engine) == SCHEMA_VERSION
    with engine.connect() as conn:
        versions = conn.execute(sa.select(tables()["schema_migrations"].c.version)).scalars().all()
        names = set(sa.inspect(conn).get_table_names())
    assert versions == [1, 2, 3, 4, 5, 6] == [v for v, _, _ in MIGRATIONS]
    assert {"runs", "checks", "metric_summaries", "trust_marks", "bisect_findings", "fleet_findings",
            "fleet_finding_cases"} <= names
    engine.dispose()


def test_a_version_1_history_is_migrated_with_each_run_kind_read_from_its_results(tmp_path) -> None:
    from tests.unit.history.builders import write_results_folder

    clean = write_results_folder(tmp_path, "c", 1, {})
    faulty = write_results_folder(tmp_path, "c", 2, {}, fault="lr-scale")
    engine = create_history_engine(f"sqlite:///{tmp_path / 'h.sqlite'}")
    v1 = _metadata(1)
    with engine.begin() as conn:
        v1.create_all(conn)
        conn.execute(v1.tables["schema_migrations"].insert().values(version=1, description="v1", applied_at="x"))
        for key, folder in (("a", clean), ("b", faulty), ("c", tmp_path / "gone")):
            conn.execute(v1.tables["runs"].insert().values(
                run_key=key, case_name="c", results_dir=str(folder), started_at="2026-01-01T00:00:00+00:00",
                status="PASS", hardware="x", recorded_at="x"))
    assert migrate(engine) == 1
    with engine.connect() as conn:
        kinds = dict(conn.execute(sa.text("SELECT run_key, kind FROM runs")).all())
    assert kinds == {"a": "gate", "b": "fault", "c": "gate"}
    engine.dispose()


def test_a_newer_schema_is_refused(tmp_path) -> None:
    engine = create_history_engine(f"sqlite:///{tmp_path / 'h.sqlite'}")
    migrate(engine)
    with engine.begin() as conn:
        conn.execute(tables()["schema_migrations"].insert().values(version=99, description="future",
                                                                    applied_at="2030-01-01T00:00:00+00:00"))
    with pytest.raises(UsageError, match=f"schema version 99, newer than this rl-autotest's {SCHEMA_VERSION}"):
        migrate(engine)
    engine.dispose()


def test_another_applications_sqlite_file_is_refused_and_left_untouched(tmp_path) -> None:
    path = tmp_path / "app.sqlite"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE runs (id INTEGER, name TEXT)")
    before = path.read_bytes()
    engine = create_history_engine(f"sqlite:///{path}")
    with pytest.raises(UsageError, match=r"app.sqlite is not an rl-autotest history \(it holds tables runs\)"):
        migrate(engine)
    engine.dispose()
    assert path.read_bytes() == before


def test_a_version_2_history_gets_each_run_s_cost_from_its_results(tmp_path) -> None:
    import json

    from tests.unit.history.builders import write_results_folder

    costed = write_results_folder(tmp_path, "c", 1, {})
    data = json.loads((costed / "results.json").read_text())
    data["context"]["cost"] = {"device_seconds": 90.0}
    (costed / "results.json").write_text(json.dumps(data))
    engine = create_history_engine(f"sqlite:///{tmp_path / 'h.sqlite'}")
    v2 = _metadata(2)
    with engine.begin() as conn:
        v2.create_all(conn)
        for version in (1, 2):
            conn.execute(v2.tables["schema_migrations"].insert().values(version=version, description="v",
                                                                        applied_at="x"))
        for key, folder in (("a", costed), ("b", write_results_folder(tmp_path, "c", 2, {})), ("c", tmp_path / "x")):
            conn.execute(v2.tables["runs"].insert().values(
                run_key=key, case_name="c", results_dir=str(folder), started_at="2026-01-01T00:00:00+00:00",
                status="PASS", hardware="x", recorded_at="x"))
    assert migrate(engine) == 2
    with engine.connect() as conn:
        costs = dict(conn.execute(sa.text("SELECT run_key, device_seconds FROM runs")).all())
    assert costs == {"a": 90.0, "b": None, "c": None}
    engine.dispose()


@pytest.mark.parametrize("version", ["5", "", "five"])
def test_a_schema_version_stored_as_text_is_refused_by_readers_and_writers(tmp_path, version: str) -> None:
    """Our table keeps versions as integers; a table rebuilt by another tool may hold text (SQLite's MAX ranks it
    above every number, so one text row is what MAX finds)."""
    from autotest.history.store import HistoryStore

    url = f"sqlite:///{tmp_path / 'h.sqlite'}"
    engine = create_history_engine(url)
    migrate(engine)
    with engine.begin() as conn:
        conn.execute(sa.text("ALTER TABLE schema_migrations RENAME TO old"))
        conn.execute(sa.text("CREATE TABLE schema_migrations (version TEXT, description TEXT, applied_at TEXT)"))
        conn.execute(sa.text("INSERT INTO schema_migrations SELECT version, description, applied_at FROM old "
                             "WHERE version < 5"))
        conn.execute(sa.text("INSERT INTO schema_migrations VALUES (:v, 'd', 'x')"), {"v": version})
        conn.execute(sa.text("DROP TABLE old"))
    engine.dispose()
    shown = max(["1", "2", "3", "4", version])  # the copied rows are text too: MAX compares text
    message = rf"table schema_migrations holds version '{shown}', not a whole number"
    for read_only in (True, False):
        with pytest.raises(UsageError, match=message) as info:
            HistoryStore.open(url, read_only=read_only)
        assert "\n" not in str(info.value)


def test_a_version_5_history_gets_each_run_s_cost_basis_and_gate_mdes_from_its_results(tmp_path) -> None:
    from autotest.history.record import read_results_folder
    from autotest.history.store import HistoryStore
    from tests.unit.history.builders import REWARDS, write_results_folder

    folder = write_results_folder(tmp_path, "c", 1, {REWARDS: 0.1}, cost={"device_seconds": 61.0,
                                  "basis": "cpu-seconds"}, mde={REWARDS: 0.042})
    record = read_results_folder(folder)
    url = f"sqlite:///{tmp_path / 'h.sqlite'}"
    engine = create_history_engine(url)
    v5 = _metadata(5)
    with engine.begin() as conn:
        v5.create_all(conn)
        conn.execute(v5.tables["schema_migrations"].insert(), [
            dict(version=v, description="v", applied_at="x") for v in (1, 2, 3, 4, 5)])
        for key, where in (("a", folder), ("b", tmp_path / "gone")):
            run_id = conn.execute(v5.tables["runs"].insert().values(
                run_key=key, case_name="c", results_dir=str(where), started_at=f"2026-01-0{len(key)}T00:00:00+00:00",
                status="PASS", hardware="x", recorded_at="x", device_seconds=61.0)).inserted_primary_key[0]
            conn.execute(v5.tables["checks"].insert(), [dict(run_id=run_id, check_id=c.check_id, status=c.status,
                                                             severity=c.severity) for c in record.checks])
    engine.dispose()
    with HistoryStore.open(url, read_only=True) as old:  # a reader of a v5 history: no column, no value
        assert old.version == 5 and {p.mde for p in old.check_points("c")} == {None}
        assert {r.cost_basis for r in old.runs("c")} == {None}
    assert migrate(create_history_engine(url)) == 5
    with HistoryStore.open(url, read_only=True) as store:
        assert [(r.results_dir, r.cost_basis) for r in store.runs("c")] == [(str(folder), "cpu-seconds"),
                                                                            (str(tmp_path / "gone"), None)]
        mdes = {(p.run.results_dir, p.check_id): p.mde for p in store.check_points("c")}
    assert mdes[(str(folder), REWARDS)] == 0.042 and mdes[(str(folder), "steps[count]")] is None
    assert mdes[(str(tmp_path / "gone"), REWARDS)] is None
