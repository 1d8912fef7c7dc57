"""The history store down: a real PostgreSQL, stopped. ``run``, the plugin and a run of replicates keep their
verdict, say on the console and in results.json that it was not recorded, and --strict-history makes it ERROR."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Iterator

import pytest

from tests.helpers import DATA
from tests.integration.history import postgres
from tests import waits

CASE = DATA / "cases" / "scripted.yaml"
ROOT = Path(__file__).resolve().parents[3]

SUITE = f"""
import pytest
from autotest.inputs.case import load_case
from autotest.plugin import assert_case_outcome

@pytest.mark.grpo
def test_scripted(run_accuracy_case, request):
    assert_case_outcome(run_accuracy_case(load_case({str(CASE)!r})), False)
"""


@pytest.fixture(scope="module")
def stopped_url() -> Iterator[str]:
    """The URL of a PostgreSQL history that was up (one run recorded) and is now stopped."""
    import sqlalchemy as sa

    bin_dir = postgres.find_bin_dir()
    if bin_dir is None:
        message = "PostgreSQL server binaries not found (apt-get install postgresql)"
        if os.environ.get("CI") == "true":
            pytest.fail(message + "; CI must run the history tests against PostgreSQL")
        pytest.skip(message)
    server, base = postgres.start(bin_dir)
    engine = sa.create_engine(server.url(), isolation_level="AUTOCOMMIT")
    with engine.connect() as conn:
        conn.execute(sa.text('CREATE DATABASE "history"'))
    engine.dispose()
    waits.run(postgres._as_server_user([str(bin_dir / "pg_ctl"), "-D", str(base / "data"), "-m", "fast",
                                        "-w", "stop"]), check=True, capture_output=True, limit_s=60)
    yield server.url("history")
    postgres.stop(bin_dir, base)


def _run(tmp_path: Path, url: str, *extra: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "RL_AUTOTEST_GPU_COUNT": "0"}
    env.pop("RL_AUTOTEST_HISTORY", None)
    env.pop("GITHUB_STEP_SUMMARY", None)
    return waits.run([sys.executable, "-m", "autotest.cli", "run", str(CASE), "--yes", "--results-dir",
                      str(tmp_path), "--history", url, *extra], capture_output=True, text=True, env=env,
                     limit_s=300)


def _results(tmp_path: Path) -> dict:
    [path] = [p for p in tmp_path.glob("scripted/*/results.json")]
    return json.loads(path.read_text())


def test_run_with_the_history_down_keeps_its_pass_and_says_it_was_not_recorded(tmp_path, stopped_url) -> None:
    done = _run(tmp_path, stopped_url)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "verdict not recorded in the run history: cannot open history database postgresql" in done.stderr
    assert "scripted: PASS" in done.stdout
    data = _results(tmp_path)
    assert data["status"] == "PASS" and data["history"]["recorded"] is False
    assert "cannot open history database" in data["history"]["error"]


def test_strict_history_makes_it_an_error_and_exit_2(tmp_path, stopped_url) -> None:
    done = _run(tmp_path, stopped_url, "--strict-history")
    assert done.returncode == 2, done.stdout + done.stderr
    assert "ERROR history[recorded]: the verdict could not be recorded in the run history" in done.stdout
    assert "scripted: ERROR" in done.stdout
    assert _results(tmp_path)["status"] == "ERROR"


def test_a_run_of_replicates_with_the_history_down_is_error_under_strict_history(tmp_path, stopped_url) -> None:
    done = _run(tmp_path, stopped_url, "--strict-history", "--replicates", "2")
    assert done.returncode == 2, done.stdout + done.stderr
    assert "scripted: ERROR (mean of 2 replicates)" in done.stdout
    [mean] = [json.loads(p.read_text()) for p in tmp_path.glob("scripted/*/results.json")]
    assert mean["history"]["error"].startswith("2 of 2 replicates not recorded: cannot open history database")


def test_the_plugin_warns_and_strict_history_fails_the_test(pytester, stopped_url, monkeypatch) -> None:
    monkeypatch.setenv("RL_AUTOTEST_GPU_COUNT", "0")
    monkeypatch.delenv("RL_AUTOTEST_HISTORY", raising=False)
    pytester.makepyfile(test_suite=SUITE)
    results = pytester.path / "out"
    lenient = pytester.runpytest_subprocess("--results-dir", str(results), "--history", stopped_url)
    lenient.assert_outcomes(passed=1)
    lenient.stdout.fnmatch_lines(["*warning: *verdict not recorded in the run history: cannot open history database*"])
    strict = pytester.runpytest_subprocess("--results-dir", str(results), "--history", stopped_url,
                                           "--strict-history")
    strict.assert_outcomes(failed=1)
    strict.stdout.fnmatch_lines(["*scripted: ERROR*", "*ERROR history[[]recorded[]]: the verdict could not be*"])
