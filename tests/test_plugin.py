from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CASE = ROOT / "tests" / "data" / "cases" / "scripted.yaml"

SUITE = f"""
from dataclasses import replace
import pytest
from autotest.cases import load_case
from autotest.plugin import assert_case_outcome

CASE = load_case({str(CASE)!r})

@pytest.mark.grpo
@pytest.mark.parametrize("fault", [None, "mismatch-from:3"], ids=["clean", "mismatch"])
def test_scripted(run_accuracy_case, request, fault):
    assert_case_outcome(run_accuracy_case(CASE, fault=fault), request.config.getoption("--strict-cases"))

@pytest.mark.grpo
def test_needs_gpus(run_accuracy_case, request):
    case = replace(CASE, platform=replace(CASE.platform, gpus=8))
    assert_case_outcome(run_accuracy_case(case), request.config.getoption("--strict-cases"))

@pytest.mark.calibration
def test_calibration_writes_baselines():
    pass
"""


def test_suite_outcomes_summary_and_calibration_deselected(pytester, monkeypatch):
    monkeypatch.setenv("RL_AUTOTEST_GPU_COUNT", "0")
    pytester.makepyfile(test_suite=SUITE)
    results = pytester.path / "out"
    result = pytester.runpytest_subprocess("--results-dir", str(results), "-p",
                                           "no:cacheprovider")
    result.assert_outcomes(passed=1, failed=1, skipped=1, deselected=1)
    result.stdout.fnmatch_lines([
        "*scripted: FAIL*",
        "*FAIL mismatch/mismatch_k3_kl[[]stepwise[]]: mismatch/mismatch_k3_kl at step 3*",
        "*next step: train/inference inconsistency*",
        "*consistency dump requested: *consistency_request.json",
        "*rl-autotest cases*",
        "scripted: PASS (report: *report.md)",
    ])
    assert len(list((results / "scripted").iterdir())) == 2


def test_strict_cases_turn_skips_into_failures(pytester, monkeypatch):
    monkeypatch.setenv("RL_AUTOTEST_GPU_COUNT", "0")
    pytester.makepyfile(test_suite=SUITE)
    result = pytester.runpytest_subprocess("-k", "needs_gpus", "--strict-cases", "--results-dir",
                                           str(pytester.path / "out"))
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*scripted cannot run here (strict mode): needs 8 GPUs, found 0*"])


def test_calibration_runs_only_when_asked(pytester):
    pytester.makepyfile(test_suite=SUITE)
    pytester.runpytest_subprocess("-m", "calibration").assert_outcomes(passed=1)


def test_dry_run_shows_card_and_command(pytester):
    pytester.makepyfile(test_suite=SUITE)
    result = pytester.runpytest_subprocess("-k", "clean", "--dry-run", "-rs", "--results-dir",
                                           str(pytester.path / "out"))
    result.assert_outcomes(skipped=1)
    result.stdout.fnmatch_lines(["*dry run; command: *scripted_run.py --work-dir*"])
