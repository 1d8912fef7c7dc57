"""Root conftest: every Ray the tests (and the runs they launch) start stays local and quiet."""

import os

# Ray 2.60 enables token auth and usage reporting by default; tests only ever use local clusters.
os.environ.setdefault("RAY_AUTH_MODE", "disabled")
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")

from pathlib import Path

import pytest

from tests.run_order import prefer_worksteal, run_order

@pytest.hookimpl(tryfirst=True)
def pytest_cmdline_main(config):
    """Before xdist turns a bare ``-n`` into ``--dist load``: worksteal (tests/run_order.py)."""
    prefer_worksteal(config.option)


def pytest_collection_modifyitems(config, items):
    if config.rootpath == Path(__file__).resolve().parent:  # this checkout's suite, not a project's accuracy run
        items[:] = run_order(items)
