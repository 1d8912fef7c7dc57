"""Fixtures shared by the MOPD test modules: the teacher fixture is trained once per session
into a cache shared by pytest-xdist workers (file-locked), never in ~; servers are real processes."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest


def shared_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A cache dir shared by the whole session, xdist workers included."""
    base = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        base = base.parent
    return base / "rl-autotest-cache"


@pytest.fixture(scope="session")
def mopd_fixture(tmp_path_factory: pytest.TempPathFactory):
    """The default recipe's fixture, prepared once per session."""
    pytest.importorskip("torch")
    from autotest.workloads.teachers import ensure_fixture

    return ensure_fixture(root=shared_cache(tmp_path_factory), log=lambda line: None)


@pytest.fixture
def mopd_cache_env(monkeypatch: pytest.MonkeyPatch, mopd_fixture):
    """Point RL_AUTOTEST_CACHE at the session cache, so launched processes find the fixture."""
    from autotest.workloads.teachers import CACHE_ENV

    monkeypatch.setenv(CACHE_ENV, str(mopd_fixture.root.parents[1]))
    return mopd_fixture


@pytest.fixture(scope="module")
def teacher_servers(mopd_fixture, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict]:
    """One real teacher server per domain, stopped after the module."""
    from autotest.workloads.teachers import teacher_name

    from .test_teacher_server import start_server, stop

    folder = tmp_path_factory.mktemp("teachers")
    started = {}
    try:
        for domain in mopd_fixture.domains:
            started[teacher_name(domain)] = start_server(mopd_fixture.teacher(domain), folder, teacher_name(domain))
        yield started
    finally:
        for server in started.values():
            stop(server)
