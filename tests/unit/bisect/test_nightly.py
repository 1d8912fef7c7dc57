"""The nightly's bisect: which cases flipped PASS -> FAIL in the history, the budget, the summary and annotations
(no training runs here: flips that need no bisect, and the budget spent before one starts)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from autotest.bisect.nightly import (
    NightlyBudget,
    annotations,
    find_flips,
    run_nightly_bisect,
    summary_lines,
    tonight_cost,
)
from autotest.history.store import HistoryStore, ingest
from autotest.history.database import sqlite_url
from tests.unit.history.builders import REWARDS, write_results_folder
from tests.helpers import run_cli

PASSING, FAILING = {REWARDS: 0.05}, {REWARDS: 0.5}


def _night(root: Path, case: str, night: int, values: dict, sha: str, kind: str | None = None,
           device_seconds: float | None = None) -> Path:
    folder = write_results_folder(root, case, night, values, sha=sha, kind=kind)
    if device_seconds is not None:
        data = json.loads((folder / "results.json").read_text())
        data["context"]["cost"] = {"device_seconds": device_seconds}
        (folder / "results.json").write_text(json.dumps(data))
    return folder


@pytest.fixture
def history(tmp_path: Path) -> tuple[str, Path]:
    root = tmp_path / "results"
    _night(root, "flipped", 1, PASSING, "a" * 40)
    _night(root, "flipped", 2, FAILING, "b" * 40, device_seconds=500.0)
    _night(root, "flipped", 3, FAILING, "c" * 40, kind="bisect")  # a probe: never a nightly
    _night(root, "same-code", 1, PASSING, "d" * 40)
    _night(root, "same-code", 2, FAILING, "d" * 40, device_seconds=300.0)
    _night(root, "still-red", 1, FAILING, "e" * 40)
    _night(root, "still-red", 2, FAILING, "f" * 40)
    _night(root, "healed", 1, FAILING, "1" * 40)
    _night(root, "healed", 2, PASSING, "2" * 40)
    url = sqlite_url(root / "history.sqlite")
    ingest([root], url)
    return url, root


def test_a_flip_is_pass_then_fail_in_the_last_two_gate_runs(history) -> None:
    url, _ = history
    with HistoryStore.open(url, read_only=True) as store:
        flips = {f.case: f for f in find_flips(store)}
    assert set(flips) == {"flipped", "same-code"}
    assert (flips["flipped"].good.framework_sha, flips["flipped"].bad.framework_sha) == ("a" * 40, "b" * 40)
    assert flips["same-code"].same_commit and not flips["flipped"].same_commit


def test_the_same_commit_is_not_bisected_and_the_cost_is_summed(history) -> None:
    url, root = history

    def no_case(name: str):
        raise AssertionError(f"{name}: no bisect may start here")

    report = run_nightly_bisect(url, root, [root], NightlyBudget(max_runs=8), no_case, cases=["same-code"])
    assert report.tonight_device_seconds == 800.0 and report.outcomes == {}
    assert "the framework commit did not change (dddddddddddd)" in report.not_run["same-code"]
    lines = summary_lines(report)
    assert "### same-code: PASS at `dddddddddddd` -> FAIL at `dddddddddddd`" in lines
    assert lines[-1] == ("Cost: tonight's runs 800.0 device-s (0.22 device-h), bisects 0.0 device-s (0.00 device-h), "
                         "total 800.0 device-s (0.22 device-h)")
    assert annotations(report) == ["::warning title=bisect same-code::no bisect: " + report.not_run["same-code"]]


def test_a_spent_budget_starts_no_bisect_and_is_an_error(history) -> None:
    url, root = history
    report = run_nightly_bisect(url, root, [root], NightlyBudget(max_runs=8, device_seconds=600.0),
                                lambda name: pytest.fail("no bisect over budget"))
    assert report.over_budget and report.not_run["flipped"].startswith("the nightly budget of 600.0 device-s")
    assert summary_lines(report)[-1].endswith("of a budget of 600.0 device-s (0.17 device-h) (OVER BUDGET)")
    assert annotations(report)[-1] == ("::error title=nightly budget::the nightly cost 800.0 device-s (0.22 device-h), "
                                       "over its budget of 600.0 device-s (0.17 device-h)")


def test_no_flip_says_so(history) -> None:
    url, root = history
    report = run_nightly_bisect(url, root, [], NightlyBudget(max_runs=8), load_case_never, cases=["still-red"])
    assert report.flips == [] and "No case flipped from PASS to FAIL since the previous nightly." in summary_lines(report)
    assert annotations(report) == [] and tonight_cost([]) == 0.0


def load_case_never(name: str):
    raise AssertionError(name)


@pytest.mark.parametrize("argv,message", [
    (["--budget-device-s", "0"], "--budget-device-s: 0 is not a positive number of device-seconds"),
    (["--budget-device-s", "nan"], "--budget-device-s: nan is not a positive number of device-seconds"),
    (["--max-runs", "1"], "--max-runs: 1 is below 2; the good and bad ends take two runs"),
    (["--tonight", "/no/such/night"], "--tonight /no/such/night: no such folder; give tonight's results folders"),
    (["--jobs", "0"], "--jobs: 0 is below 1"),
    (["--jobs", "100000"], "--jobs: 100000 is above the cap of 64"),
    (["--max-runs", "100000"], "--max-runs: 100000 is above the cap of 200"),
    (["--case", "nope"], "--case 'nope': no run of this case in the history "),
    (["--case", ""], "--case '': no run of this case in the history "),
])
def test_bad_flags_are_one_line(argv, message, capsys, history) -> None:
    url, root = history
    assert run_cli("nightly-bisect", "--history", url, "--results-dir", str(root), *argv) == 2
    out = capsys.readouterr().out.strip().splitlines()
    assert out[-1].startswith("rl-autotest: error: ") and message in out[-1]


def test_a_history_that_refuses_the_probes_and_the_finding_warns_and_keeps_the_answer(tmp_path, monkeypatch) -> None:
    """The bisect's answer stands in bisect.json; a history gone read-only loses only its records, each one line."""
    from autotest.bisect import nightly
    from autotest.bisect.commits import Commit
    from autotest.bisect.session import FOUND, BisectOutcome
    from autotest.history.database import describe
    from tests.filesystems import read_only, tmpfs

    probe = _night(tmp_path / "bisect" / "probes", "flipped", 3, FAILING, "c" * 40, kind="bisect")
    culprit = Commit("c" * 40, "optimiser: new default learning rate", "dev")

    def bisected(case, options):  # the search itself is tested for real in tests/integration/bisect
        options.after_round([probe.parent.parent])
        return BisectOutcome(FOUND, tmp_path / "bisect", first_bad=culprit, last_good="a" * 40, confidence="high")

    monkeypatch.setattr(nightly, "bisect", bisected)
    with tmpfs(tmp_path / "disk", size_kib=4096) as disk:
        _night(disk, "flipped", 1, PASSING, "a" * 40)
        _night(disk, "flipped", 2, FAILING, "b" * 40)
        url = sqlite_url(disk / "history.sqlite")
        ingest([disk], url)
        read_only(disk)
        lines: list[str] = []
        report = run_nightly_bisect(url, tmp_path / "results", [], NightlyBudget(max_runs=8),
                                    lambda name: name, say=lines.append)
    refused = f"cannot open history database {describe(url)}: attempt to write a readonly database"
    assert report.outcomes["flipped"].first_bad == culprit
    assert annotations(report)[0].startswith("::error title=bisect flipped::first bad commit cccccccccccc ")
    assert lines[1:] == [f"nightly: warning: the probe run {probe} is not in the history: {refused}",
                         f"nightly: warning: the finding for flipped is not in the history: {refused}"]


def test_a_drift_bisect_answers_by_the_side_of_the_shift() -> None:
    from autotest.bisect.nightly import drift_answer
    from autotest.bisect.probe import ProbeResult
    from autotest.bisect.search import BAD, GOOD, SKIPPED

    answer = drift_answer(REWARDS, 0.057, 0.133, 0.19)  # toward a '<' threshold: higher is the new side

    def probe(observed):
        return ProbeResult("c" * 40, GOOD, "high", 1, 0.0, {} if observed is None else {REWARDS: ("PASS", observed, 0.19)})

    assert [(p.answer, p.confidence) for p in map(answer, map(probe, (0.05, 0.14, 0.1)))] == [
        (GOOD, "high"), (BAD, "high"), (BAD, "low")]
    assert answer(probe(0.14)).reason == (f"{REWARDS} 0.14 nearer the drift's new level (0.133 since, 0.057 before; "
                                          "threshold 0.19)")
    assert answer(probe(None)).answer == SKIPPED
    falling = drift_answer(REWARDS, 0.5, 0.2, 1.0)  # a '>' gate drifting down
    assert (falling(probe(0.25)).answer, falling(probe(0.45)).answer) == (BAD, GOOD)
