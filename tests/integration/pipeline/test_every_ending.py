"""Every ending leaves a verdict: a launch that cannot start and an exception inside the harness give
results.json and report.md with ERROR and the reason; a run with no rows still gets its report
although plotting it warns (and the harness's own tests turn warnings into errors)."""

from __future__ import annotations

import json
import warnings
from dataclasses import replace
from pathlib import Path

import pytest

from autotest.pipeline import single
from autotest.inputs.case import load_case
from autotest.pipeline import LaunchOptions, PublishOptions, RunOptions, run_case
from tests.helpers import DATA

CASE = DATA / "cases" / "scripted.yaml"


def _results(run) -> dict:
    return json.loads((run.results_dir / "results.json").read_text())


def test_a_launch_that_cannot_start_is_an_error_verdict(tmp_path: Path) -> None:
    case = load_case(CASE)
    broken = replace(case, launch=replace(case.launch, command=("/no/such/trainer", "--work-dir", "{work_dir}")))
    run = run_case(broken, RunOptions(LaunchOptions(results_root=tmp_path), publish=PublishOptions(with_plots=False)))
    assert run.status == "ERROR"
    data = _results(run)
    (harness,) = [r for r in data["results"] if r["check_id"] == "run[harness]"]
    assert harness["status"] == "ERROR" and "could not start '/no/such/trainer'" in harness["message"]
    assert "could not start" in (run.results_dir / "report.md").read_text()


def test_an_exception_in_the_harness_is_an_error_verdict_with_its_traceback(tmp_path: Path, monkeypatch) -> None:
    def broken_start(*args, **kwargs):
        raise RuntimeError("follower lost its mind")

    monkeypatch.setattr(single, "start", broken_start)
    run = run_case(load_case(CASE), RunOptions(LaunchOptions(results_root=tmp_path),
                                               publish=PublishOptions(with_plots=False)))
    assert run.status == "ERROR"
    (harness,) = [r for r in _results(run)["results"] if r["check_id"] == "run[harness]"]
    assert harness["message"].startswith("the harness failed: RuntimeError: follower lost its mind (traceback: ")
    log = run.results_dir / "logs" / "harness_error.log"
    assert "RuntimeError: follower lost its mind" in log.read_text()
    assert (run.results_dir / "report.md").is_file()


#: a run that logs its step-0 eval and nothing else: every plot has nothing to draw or label
EVAL_ONLY = """
import json, sys, time, pathlib
exp = pathlib.Path(sys.argv[1]) / time.strftime("%Y%m%d%H%M%S") / "logs" / "exp_tracking"
exp.mkdir(parents=True)
(exp / "tracker.jsonl").write_text(json.dumps({"step": 0, "eval/accuracy": 0.0}) + "\\n")
"""


def test_a_run_without_training_rows_gets_its_report_even_where_warnings_are_errors(tmp_path: Path) -> None:
    case = load_case(CASE)
    silent = replace(case, launch=replace(case.launch, command=("{python}", "-c", EVAL_ONLY, "{work_dir}")))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # as the harness's own pytest.ini does
        run = run_case(silent, RunOptions(LaunchOptions(results_root=tmp_path),
                                          publish=PublishOptions(with_plots=True)))
    assert run.status == "ERROR"
    report = (run.results_dir / "report.md").read_text()
    assert "logged no training step" in report
    assert list((run.results_dir / "plots").glob("*.png")) and "plots not drawn" not in report


@pytest.mark.parametrize("ending", ["harness", "launch"])
def test_each_ending_publishes_the_same_files(tmp_path: Path, monkeypatch, ending: str) -> None:
    case = load_case(CASE)
    if ending == "harness":
        monkeypatch.setattr(single, "start", lambda *a, **k: (_ for _ in ()).throw(OSError("disk gone")))
    else:
        case = replace(case, launch=replace(case.launch, command=("/no/such/trainer",)))
    run = run_case(case, RunOptions(LaunchOptions(results_root=tmp_path), publish=PublishOptions(with_plots=False)))
    assert {"results.json", "report.md", "card.md", "preflight.json"} <= {p.name for p in run.results_dir.iterdir()}
