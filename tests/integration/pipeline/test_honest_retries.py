"""A relaunch never launders a crash, and a verdict reached after one says so (real scripted runs)."""

from __future__ import annotations

from pathlib import Path

import pytest

from autotest.inputs.case import load_case
from autotest.pipeline import LaunchOptions, PublishOptions, RunOptions, run_case
from autotest.run.infra import DEFAULT_POLICY, InfraKind, KindPolicy, RetryPolicy

CASE = Path(__file__).resolve().parents[3] / "tests" / "data" / "cases" / "scripted.yaml"
FAST = RetryPolicy({**DEFAULT_POLICY.per_kind, InfraKind.PORT_IN_USE: KindPolicy(2, 0.1)}, 2)


@pytest.fixture
def case():
    return load_case(CASE)


def options(tmp_path: Path, **launch) -> RunOptions:
    return RunOptions(LaunchOptions(results_root=tmp_path / "results", poll_interval_s=0.2, **launch),
                      publish=PublishOptions(with_plots=False))


def test_a_dead_server_of_the_runs_own_making_stays_an_error(case, tmp_path: Path) -> None:
    run = run_case(case, options(tmp_path, fault="server-dies-at:3"))
    assert run.status == "ERROR" and not run.relaunches
    assert "retries" not in run.verdict.context  # one attempt, no relaunch decided
    assert any("server exited" in r.message for r in run.verdict.results), [r.message for r in run.verdict.results]
    assert not (run.results_dir / "attempts").exists()


def test_the_trail_points_each_attempt_at_its_own_kept_log(case, tmp_path: Path) -> None:
    run = run_case(case, options(tmp_path, fault="infra-once", retry_policy=FAST))
    first, second = run.verdict.context["retries"]
    kept = run.results_dir / "attempts" / "1" / "logs" / "stderr.log"
    assert first["log_path"] == str(kept)
    assert "Address already in use" in Path(first["log_path"]).read_text()
    assert "Address already in use" not in (run.results_dir / "logs" / "stderr.log").read_text()
    assert second["verdict"] == "PASS"


def test_a_pass_after_a_relaunch_says_so_in_its_summary(case, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(tmp_path / "summary.md"))
    run = run_case(case, options(tmp_path, fault="infra-once", retry_policy=FAST))
    assert run.status == "PASS"
    after = "PASS after 1 relaunch (port_in_use (Address already in use))"
    assert run.summary_line().startswith(f"scripted: {after}")
    assert run.report.read_text().splitlines()[0] == f"# scripted: ✅ {after}"
    summary = (tmp_path / "summary.md").read_text()
    assert summary.startswith(f"### scripted: ✅ {after}\n")
    kept = run.results_dir / "attempts" / "1" / "logs" / "stderr.log"
    assert f"- attempt 1: ERROR, port_in_use (Address already in use): relaunch 1 of 2; log `{kept}`" in summary
