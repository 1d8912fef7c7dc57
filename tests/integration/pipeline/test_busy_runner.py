"""A busy runner is not a regression: a real run whose steps do CPU work, judged with CPU burners in sessions of
their own sharing the cores. A clean run is an environment outcome (exit 75 material), never a FAIL; a step that
really got slower (a sleep the machine does not explain) still FAILs; accuracy gates are unmoved."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from autotest.inputs.case import load_case
from autotest.pipeline import LaunchOptions, PublishOptions, RunOptions, run_case
from autotest.run.infra import DEFAULT_POLICY, InfraKind, KindPolicy, RetryPolicy
from tests.helpers import DATA

CASE = DATA / "cases" / "scripted-timed.yaml"
_BURN = "import time\nend = time.monotonic() + 120\nwhile time.monotonic() < end:\n    pass\n"
ONE_QUICK_RELAUNCH = RetryPolicy({**DEFAULT_POLICY.per_kind, InfraKind.CONTENTION: KindPolicy(1, 0)}, 2)


@pytest.fixture
def busy_runner():
    burners = [subprocess.Popen([sys.executable, "-c", _BURN], start_new_session=True)
               for _ in range(4 * (os.cpu_count() or 1))]
    yield
    for proc in burners:
        proc.kill()
    for proc in burners:
        proc.wait()


def _run(tmp_path: Path, fault: str, **launch):
    return run_case(load_case(CASE), RunOptions(LaunchOptions(results_root=tmp_path, fault=fault, poll_interval_s=0.1,
                                                              **launch), publish=PublishOptions(with_plots=False)))


def _gate(run):
    return next(r for r in run.verdict.results if r.check_id == "time/step[percentile]")


@pytest.mark.slow
def test_a_quiet_runner_passes_the_clean_run_and_records_its_contention(tmp_path):
    run = _run(tmp_path, "busy-step:0.3")
    assert run.status == "PASS", [r.message for r in run.verdict.results]
    machine = json.loads((run.results_dir / "results.json").read_text())["context"]["machine"]
    assert machine["during"]["run_delay_share"] is not None and machine["before"]["probe"]["cpu_s"] > 0
    assert "machine" in json.loads((run.results_dir / "preflight.json").read_text())
    series = json.loads((run.results_dir / "logs" / "contention.json").read_text())
    assert len(series["samples"]) >= 2 and sorted(map(int, series["step_seen_at"])) == list(range(1, 11))
    assert "## Runner contention" in (run.results_dir / "report.md").read_text()


@pytest.mark.slow
def test_a_busy_runner_is_an_environment_outcome_relaunched_once_and_a_real_slowdown_still_fails(
        tmp_path, busy_runner):
    clean = _run(tmp_path, "busy-step:0.3", retry_policy=ONE_QUICK_RELAUNCH)
    gate = _gate(clean)
    assert clean.status == "ERROR" and clean.verdict.environment_only, gate.message
    assert gate.message.startswith("environment: ") and "waited for a CPU" in gate.message
    assert [a["infra"]["kind"] for a in clean.verdict.context["retries"]] == ["contention", "contention"]
    assert "(environment:" in clean.summary_line()
    accuracy = {r.check_id: r.status for r in clean.verdict.results if r.kind == "metric" and r is not gate}
    assert set(accuracy.values()) == {"PASS"}, accuracy
    slow = _run(tmp_path, "busy-step:0.3+1.0")
    assert slow.status == "FAIL" and _gate(slow).status == "FAIL", _gate(slow).message
    assert "still fails" in _gate(slow).message and "(performance gate)" in slow.summary_line()
