"""Fixtures for the history's integration tests: each runs against SQLite and a real PostgreSQL."""

from __future__ import annotations

import os
import subprocess
import uuid
from typing import Iterator

import pytest

from tests.integration.history import postgres


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[postgres.PostgresServer]:
    bin_dir = postgres.find_bin_dir()
    if bin_dir is None:
        message = "PostgreSQL server binaries not found (apt-get install postgresql)"
        if os.environ.get("CI") == "true":
            pytest.fail(message + "; CI must run the history tests against PostgreSQL")
        pytest.skip(message)
    try:
        server, base = postgres.start(bin_dir)
    except subprocess.CalledProcessError as exc:
        pytest.fail(f"PostgreSQL did not start: {exc.stderr.decode(errors='replace')[-800:]}")
    yield server
    postgres.stop(bin_dir, base)


def _new_database(server: postgres.PostgresServer) -> str:
    import sqlalchemy as sa

    name = f"history_{uuid.uuid4().hex[:12]}"
    engine = sa.create_engine(server.url(), isolation_level="AUTOCOMMIT")
    with engine.connect() as conn:
        conn.execute(sa.text(f'CREATE DATABASE "{name}"'))
    engine.dispose()
    return server.url(name)


@pytest.fixture(params=["sqlite", "postgresql"])
def history_url(request: pytest.FixtureRequest, tmp_path) -> str:
    """A fresh, empty history database on each back end."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'history.sqlite'}"
    return _new_database(request.getfixturevalue("postgres_server"))


@pytest.fixture
def both_urls(tmp_path, postgres_server) -> dict[str, str]:
    return {"sqlite": f"sqlite:///{tmp_path / 'history.sqlite'}", "postgresql": _new_database(postgres_server)}
