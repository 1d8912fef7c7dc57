"""Where the history is, and its versioned schema."""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from autotest.errors import UsageError
from autotest.history.database import (
    HISTORY_ENV,
    SCHEMA_VERSION,
    create_history_engine,
    describe,
    migrate,
    resolve_url,
    tables,
)


def test_the_url_comes_from_the_flag_then_the_environment_then_the_results_root(tmp_path, monkeypatch) -> None:
    monkeypatch.delenv(HISTORY_ENV, raising=False)
    assert resolve_url(None, tmp_path) == f"sqlite:///{tmp_path / 'history.sqlite'}"
    monkeypatch.setenv(HISTORY_ENV, "postgresql://ci@db/history")
    assert resolve_url(None, tmp_path) == "postgresql://ci@db/history"
    assert resolve_url(str(tmp_path / "h.db"), tmp_path) == f"sqlite:///{tmp_path / 'h.db'}"
    monkeypatch.delenv(HISTORY_ENV)
    with pytest.raises(UsageError, match="no history database: pass --history URL"):
        resolve_url(None, None)


def test_passwords_are_hidden_in_messages() -> None:
    assert describe("postgresql://ci:s3cret@db/history") == "postgresql://ci:***@db/history"


@pytest.mark.parametrize("url, message", [
    ("mysql://u@h/db", "back end 'mysql' is not supported"),
    ("sqlite://", "a SQLite history needs a file path"),
    ("not a url://", "bad history URL"),
    ("sqlite:////no/such/folder/h.sqlite", "folder /no/such/folder does not exist"),
])
def test_bad_urls_are_one_clear_error(url, message) -> None:
    with pytest.raises(UsageError, match=message):
        create_history_engine(url)


def test_a_missing_sqlite_history_is_not_created_by_readers(tmp_path) -> None:
    with pytest.raises(UsageError, match="no history at .*; ingest results first"):
        create_history_engine(f"sqlite:///{tmp_path / 'h.sqlite'}", must_exist=True)
    assert not (tmp_path / "h.sqlite").exists()


def test_migrations_apply_once_and_are_recorded(tmp_path) -> None:
    engine = create_history_engine(f"sqlite:///{tmp_path / 'h.sqlite'}")
    assert migrate(engine) == 0
    assert migrate(engine) == SCHEMA_VERSION
    with engine.connect() as conn:
        versions = conn.execute(sa.select(tables()["schema_migrations"].c.version)).scalars().all()
        names = set(sa.inspect(conn).get_table_names())
    assert versions == [1] and {"runs", "checks", "metric_summaries"} <= names
    engine.dispose()


def test_a_newer_schema_is_refused(tmp_path) -> None:
    engine = create_history_engine(f"sqlite:///{tmp_path / 'h.sqlite'}")
    migrate(engine)
    with engine.begin() as conn:
        conn.execute(tables()["schema_migrations"].insert().values(version=99, description="future",
                                                                    applied_at="2030-01-01T00:00:00+00:00"))
    with pytest.raises(UsageError, match="schema version 99, newer than this rl-autotest's 1"):
        migrate(engine)
    engine.dispose()
