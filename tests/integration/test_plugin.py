from __future__ import annotations

import pytest

from tests.helpers import DATA

CASE = DATA / "cases" / "scripted.yaml"

SUITE = f"""
from dataclasses import replace
import pytest
from autotest.inputs.case import load_case
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
        "# Experiment card: scripted",
        "## 判读标准 Pass criteria",
        "*scripted: FAIL*",
        "*FAIL mismatch/mismatch_k3_kl[[]stepwise[]]: mismatch/mismatch_k3_kl at step 3*",
        "*next step: train/inference inconsistency*",
        "*consistency dump requested: *consistency_request.json",
        "*rl-autotest cases*",
        "scripted: PASS — cost * CPU-s (report: *report.md)",
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


XDIST_SUITE = f"""
from dataclasses import replace
import pytest
from autotest.inputs.case import load_case
from autotest.plugin import assert_case_outcome

CASE = load_case({str(CASE)!r})

@pytest.mark.parametrize("index", range(4))
def test_gpu_case(run_accuracy_case, request, index):
    case = replace(CASE, platform=replace(CASE.platform, gpus=4))
    run = run_accuracy_case(case)
    assert_case_outcome(run, strict=True)
    print("RESULTS", run.results_dir)
"""


@pytest.mark.slow  # a pytest -n 2 session of its own (~40 s on a loaded 2-core machine)
def test_xdist_workers_get_disjoint_gpu_slices(pytester, monkeypatch):
    """Two workers on a fake 8-GPU node: 4+4 GPUs at a time, never the same GPU twice at once."""
    monkeypatch.setenv("RL_AUTOTEST_GPU_COUNT", "8")
    pytester.makepyfile(test_gpus=XDIST_SUITE)
    results = pytester.path / "out"
    result = pytester.runpytest_subprocess("-n", "2", "--results-dir", str(results), "-p", "no:cacheprovider")
    result.assert_outcomes(passed=4)
    runs = []
    for folder in sorted((results / "scripted").iterdir()):
        lines = (folder / "logs" / "stdout.log").read_text().splitlines()
        devices = frozenset(lines[0].split("=", 1)[1].split(","))
        runs.append((devices, float(lines[1].split()[1]), float(lines[-1].split()[1])))
    assert len(runs) == 4 and all(len(d) == 4 and d <= set("01234567") for d, _, _ in runs)
    overlapping = [(a, b) for i, a in enumerate(runs) for b in runs[i + 1:] if a[1] < b[2] and b[1] < a[2]]
    assert overlapping, "the two workers never ran at the same time"
    for a, b in overlapping:
        assert not a[0] & b[0], f"GPUs {sorted(a[0] & b[0])} were given to two runs at once"


REPLICATED = f"""
from autotest.inputs.case import load_case
from autotest.plugin import assert_case_outcome

def test_scripted(run_accuracy_case):
    assert_case_outcome(run_accuracy_case(load_case({str(CASE)!r})), False)
"""


def test_replicates_option_runs_k_seeds_and_summarises_their_mean(pytester):
    pytester.makepyfile(test_suite=REPLICATED)
    results = pytester.path / "out"
    result = pytester.runpytest_subprocess("--results-dir", str(results), "--replicates", "3", "--no-history",
                                           "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["scripted: PASS (mean of 3 replicates) — cost * CPU-s (report: *report.md)"])
    (folder,) = (results / "scripted").iterdir()
    assert sorted(p.name for p in (folder / "replicates").iterdir()) == ["r1-seed0", "r2-seed1", "r3-seed2"]


def test_a_bad_replicates_option_is_one_usage_line(pytester):
    pytester.makepyfile(test_suite=REPLICATED)
    result = pytester.runpytest_subprocess("--replicates", "0", "-p", "no:cacheprovider")
    assert result.ret == 4  # pytest's usage error, before anything runs
    result.stderr.fnmatch_lines(["ERROR: --replicates: 0 is below 1; give the number of seeds to run and average"])


@pytest.mark.parametrize("argv,line", [
    (["--ray-resource", "probe=1"], "*--ray-resource: needs --ray-jobs or $RAY_ADDRESS*"),
    (["--ray-jobs", "http://127.0.0.1:1", "--ray-resource", "probe"], "*--ray-resource 'probe': give NAME=AMOUNT*"),
])
def test_a_bad_ray_resource_is_one_usage_line_before_anything_runs(pytester, monkeypatch, argv, line):
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    pytester.makepyfile(test_suite=REPLICATED)
    results = pytester.path / "out"
    result = pytester.runpytest_subprocess("--results-dir", str(results), "--no-history", "-p", "no:cacheprovider",
                                           *argv)
    assert result.ret == 4  # pytest's usage error
    result.stderr.fnmatch_lines([f"ERROR: {line}"])
    assert not results.exists()  # nothing launched


def test_the_old_ray_address_option_still_works_and_names_its_new_spelling(pytester, monkeypatch):
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    pytester.makepyfile(test_suite=REPLICATED)
    result = pytester.runpytest_subprocess("--ray-address", "http://127.0.0.1:1", "--ray-resource", "probe",
                                           "-p", "no:cacheprovider")
    assert result.ret == 4  # the value reached --ray-jobs: the resource is checked against it
    result.stderr.fnmatch_lines(["rl-autotest: --ray-address is now --ray-jobs (the old spelling goes in the next "
                                 "release)", "ERROR: --ray-resource 'probe': give NAME=AMOUNT*"])


def test_replicates_over_the_cap_fail_the_case_in_one_line(pytester):
    from autotest.inputs.replicate_limits import REPLICATE_CAPS

    count = REPLICATE_CAPS["cpu"] + 1
    pytester.makepyfile(test_suite=REPLICATED)
    results = pytester.path / "out"
    result = pytester.runpytest_subprocess("--replicates", str(count), "--results-dir", str(results),
                                           "--no-history", "-p", "no:cacheprovider")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([f"*scripted: --replicates: {count} is above the cap of {REPLICATE_CAPS['cpu']} "
                                 "replicates for a CPU case; pass --force-replicates to run more"])
    assert "Traceback" not in result.stdout.str() and not results.exists()


NAMED_SUITE = f"""
from autotest.plugin import assert_case_outcome

def test_by_name(run_accuracy_case, request):
    assert_case_outcome(run_accuracy_case("tiny-grpo"), False)

def test_by_file(run_accuracy_case, request):
    assert_case_outcome(run_accuracy_case({str(CASE)!r}), False)

def test_unknown_name(run_accuracy_case):
    run_accuracy_case("tiny-gpro")
"""


def test_the_fixture_takes_a_case_name_or_file_as_documented(pytester):
    pytester.makepyfile(test_named=NAMED_SUITE)
    result = pytester.runpytest_subprocess("--dry-run", "-rs", "--results-dir", str(pytester.path / "out"))
    result.assert_outcomes(skipped=2, failed=1)
    result.stdout.fnmatch_lines(["*dry run; command: *autotest.workloads.grpo*",
                                 "*dry run; command: *scripted_run.py --work-dir*"], consecutive=False)
    assert "AttributeError" not in result.stdout.str()
    result.stdout.fnmatch_lines(["*tiny-gpro*"])
