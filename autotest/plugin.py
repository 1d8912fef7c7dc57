"""pytest plugin: options and fixtures only; the suites and the CLI share the library underneath."""

from __future__ import annotations

import pytest


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("rl-autotest", "RL accuracy regression harness")
    group.addoption("--results-dir", default=None, help="root folder for per-case results (default: ./results)")
    group.addoption("--strict-cases", action="store_true", help="a case that cannot run here fails instead of skipping")
    group.addoption("--dry-run", action="store_true", help="print each case's experiment card and command; launch nothing")
    group.addoption("--fail-fast", action="store_true", help="stop a run as soon as a per-step gate check fails")
    group.addoption("--ray-address", default=None, help="submit each case as a Ray job to this cluster (or RAY_ADDRESS)")
