"""The attach points resolve in the pinned releases (lmdeploy, vLLM, SGLang) and at the framework commits
recorded in the table (xtuner, verl, slime), read without importing anything.

Wheels are downloaded once with ``pip download --no-deps`` into a cache reused across runs
(``RL_AUTOTEST_WHEEL_CACHE``, default ``~/.cache/rl-autotest-wheels``); only the files the points live in are
read from them (docs/benchmarks.md has the cost). The framework commits are read from local mirrors when this
machine has them (``RL_AUTOTEST_MIRRORS``, default ``/work/.mirror``), else that check is skipped.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from autotest.attach.rl_autotest_collect import POINTS
from autotest.consistency.attach_contract import COMMIT, check_source, check_wheel, module_files, released_points
from tests import waits

pytestmark = pytest.mark.slow
CACHE = Path(os.environ.get("RL_AUTOTEST_WHEEL_CACHE", Path.home() / ".cache" / "rl-autotest-wheels"))
MIRRORS = Path(os.environ.get("RL_AUTOTEST_MIRRORS", "/work/.mirror"))
PLATFORMS = ("manylinux_2_34_x86_64", "manylinux_2_28_x86_64", "manylinux_2_17_x86_64", "manylinux2014_x86_64",
             "any")


def _wheel(release: str) -> Path:
    package, version = release.split("==")
    pattern = f"{package.replace('-', '_')}-{version}-*.whl"
    found = sorted(CACHE.glob(pattern))
    # sglang 0.5.23 ships cp312 wheels only: ask for this Python's, then 3.12's
    for python in dict.fromkeys((f"{sys.version_info.major}.{sys.version_info.minor}", "3.12")):
        if found:
            break
        CACHE.mkdir(parents=True, exist_ok=True)
        waits.run([sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "--quiet",
                        "--python-version", python, *(f"--platform={p}" for p in PLATFORMS), "-d", str(CACHE),
                        release], check=False, capture_output=True, limit_s=900)
        found = sorted(CACHE.glob(pattern))
    assert found, f"{release}: no wheel in {CACHE} and pip download found none"
    return found[0]


@pytest.mark.parametrize("release", sorted(released_points()))
def test_points_resolve_in_the_pinned_release(release):
    assert check_wheel(_wheel(release), released_points()[release]) == []


@pytest.mark.parametrize("point", [p for p in POINTS if COMMIT.match(p.verified)], ids=lambda p: p.name)
def test_points_resolve_at_the_recorded_commit(point):
    match = COMMIT.match(point.verified)
    mirror = MIRRORS / match["repo"].replace("/", "+") / "repo"
    if not mirror.is_dir():
        pytest.skip(f"no mirror of {match['repo']} at {mirror}")
    problems = []
    for method in (point.forward, *point.weight_updates):
        shown = [subprocess.run(["git", "-C", str(mirror), "show", f"{match['sha']}:{f}"], capture_output=True,
                                text=True, check=False) for f in module_files(method)]
        source = next((s.stdout for s in shown if s.returncode == 0), None)
        if source is None:
            problems.append(f"{point.name}: {method.name}: no module at {point.verified}")
            continue
        model = point.model if method == point.forward else None
        problems += [f"{point.name}: {p}" for p in check_source(source, method, model)]
    assert problems == []
