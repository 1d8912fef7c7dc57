"""Issue 34, items 2 and 3, on a synthetic fleet: 8 cases x 40 nightlies built from recorded noise (the builders'
results folders, gate statistics at 0.3 of the threshold with run-to-run noise of 0.1 of it) in a real SQLite
history, then the nightly bisect. The bisect's search itself is stubbed here as in tests/unit/bisect (it is tested
for real in tests/integration/bisect): these tests count the bisects the night starts and check their ends.

1. an environment change on one night (torch in every case's recorded environment, the code as every night) ->
   one fleet finding naming it, one batch recalibration (8 candidates, one review), no bisect;
2. a code change across the fleet (tonight's commit breaks all 8) -> one bisect, its answer recorded for all 8;
3. a drift below the per-run thresholds in one case -> one bisect between the ends of a window that holds the
   night the shift began, its finding "near commit X (window ...)".
"""

from __future__ import annotations

from pathlib import Path

from autotest.bisect import nightly
from autotest.bisect.commits import Commit
from autotest.bisect.nightly import NightlyBudget, annotations, run_nightly_bisect, summary_lines
from autotest.bisect.probe import ProbeResult
from autotest.bisect.search import BAD, GOOD
from autotest.bisect.session import FOUND, BisectOutcome
from autotest.calibration.batch import batch_proposal, write_batch
from autotest.cli import main
from autotest.history.fleet import CODE, ENVIRONMENT, FleetParams, triage
from autotest.history.fleet_store import recorded_fleet_findings
from autotest.history.store import HistoryStore
from tests.unit.history.builders import CHANGE, FLEET_CASES, NIGHTS, REWARDS, THRESHOLDS, fleet, night_of, sha

CASES = FLEET_CASES


def stub_bisect(monkeypatch, tmp_path: Path, culprit: str) -> list[tuple]:
    """Each bisect the night starts: (case, good, bad, how its probes are answered: None for the gates')."""
    started: list[tuple] = []

    def bisected(case, options):
        started.append((case, options.good, options.bad, options.answer))
        return BisectOutcome(FOUND, tmp_path / f"bisect-{case}", first_bad=Commit(culprit, "the change", "dev"),
                             last_good=options.good, confidence="high")

    monkeypatch.setattr(nightly, "bisect", bisected)
    return started


def test_an_environment_change_on_one_night_is_one_finding_and_one_batch(tmp_path, monkeypatch, capsys) -> None:
    root = tmp_path / "results"
    url = fleet(root, shift=1.0, torch_at=CHANGE)  # every case FAILs from the night torch moved
    started = stub_bisect(monkeypatch, tmp_path, sha(CHANGE))
    lines: list[str] = []
    report = run_nightly_bisect(url, root, [], NightlyBudget(max_runs=8), lambda name: name, say=lines.append)
    assert started == [] and report.outcomes == {}
    (finding,) = report.fleet
    assert finding.kind == ENVIRONMENT and finding.changes == ("torch 2.4.0 -> 2.5.0",)
    assert [c.case for c in finding.cases] == CASES and finding.finding_id == 1
    assert set(report.not_run) == set(CASES) and all(w.startswith("caused by fleet finding 1: environment changed")
                                                      for w in report.not_run.values())
    assert [a for a in annotations(report) if "bisect" in a] == []  # one fleet line, not 8 investigations
    assert [a.split("::")[1] for a in annotations(report)] == ["warning title=fleet"]
    night_review = root / "fleet" / "fleet-1" / "review.md"  # the nightly proposes the batch itself
    assert report.batch_reviews == {1: night_review} and night_review.read_text().count("rl-autotest calibrate") == 8
    assert f"; review: `{night_review}`" in "\n".join(summary_lines(report))
    assert f"nightly: fleet finding 1: batch recalibration of 8 case(s) proposed: {night_review}" in lines
    with HistoryStore.open(url, read_only=True) as store:
        (recorded,) = recorded_fleet_findings(store)
        (looked,) = triage(store, params=FleetParams(nights=10))  # history fleet: the same cases, the same change
        assert (looked.kind, looked.changes, [c.case for c in looked.cases]) == (ENVIRONMENT, recorded.changes, CASES)
        proposal = batch_proposal(store, recorded)
    review, script = write_batch(proposal, tmp_path / "batch")
    assert [c.case for c in proposal.candidates] == CASES
    assert script.read_text().count("rl-autotest calibrate ") == 8
    text = review.read_text()
    assert text.count("| `rl-autotest calibrate case-") == 8 and "`torch 2.4.0 -> 2.5.0`" in text
    # history drift names the cause beside each case's own drift line
    assert main(["history", "drift", "--case", "case-3", "--history", url]) == 1
    out = capsys.readouterr().out
    assert out.startswith("drift: case-3 ") and "  case-3: caused by fleet finding 1 (environment, " in out


def test_a_code_change_across_the_fleet_starts_one_bisect(tmp_path, monkeypatch) -> None:
    root = tmp_path / "results"
    url = fleet(root, shift=2.0, change=NIGHTS)  # no environment change; tonight's commit breaks every case
    started = stub_bisect(monkeypatch, tmp_path, sha(NIGHTS))
    report = run_nightly_bisect(url, root, [], NightlyBudget(max_runs=8), lambda name: name)
    (finding,) = report.fleet
    assert finding.kind == CODE and len(finding.cases) == 8
    assert len(started) == 1
    (case, good, bad, answer) = started[0]
    assert answer is None  # a flip: the gates answer
    assert case == finding.representative and (good, bad) == (finding.good_sha, finding.bad_sha)
    assert (night_of(good), night_of(bad)) == (NIGHTS - 1, NIGHTS)
    assert set(report.attributed) == set(CASES) - {case} and report.not_run == {}
    with HistoryStore.open(url, read_only=True) as store:
        assert all([f.first_bad_sha for f in store.findings(c)] == [sha(NIGHTS)] for c in CASES)
    errors = [a for a in annotations(report) if a.startswith("::error")]
    assert len(errors) == 1 and "for the fleet: " in errors[0]
    assert "One bisect for the fleet: " in "\n".join(summary_lines(report))


def test_a_drift_below_the_thresholds_is_bisected_in_the_window_of_its_night(tmp_path, monkeypatch) -> None:
    root = tmp_path / "results"
    url = fleet(root, shift=0.4, cases=["drifting"], seed=3)  # 0.3 -> 0.7 of the threshold: every run PASSes
    with HistoryStore.open(url, read_only=True) as store:
        assert {r.status for r in store.runs("drifting")} == {"PASS"}
    started = stub_bisect(monkeypatch, tmp_path, sha(CHANGE))
    lines: list[str] = []
    report = run_nightly_bisect(url, root, [], NightlyBudget(max_runs=8), lambda name: name, say=lines.append)
    assert report.flips == [] and report.fleet == []
    ((case, good, bad, answer),) = started
    (target,) = report.targets
    # the gates pass on both sides of this drift: a probe answers by the side of the shift its statistic is on
    old, new = (ProbeResult(c, GOOD, "high", 1, 0.0, {REWARDS: ("PASS", level * THRESHOLDS[REWARDS],
                                                                 THRESHOLDS[REWARDS])}) for c, level in
                (("old", 0.3), ("new", 0.7)))
    assert (answer(old).answer, answer(new).answer) == (GOOD, BAD)
    assert answer(new).reason.startswith(f"{REWARDS} 0.133 nearer the drift's new level")
    assert case == "drifting" and target.source == "drift" and night_of(good) < CHANGE <= night_of(bad)
    assert target.near_window is not None and target.near_window.endswith(f", {night_of(bad) - night_of(good)} nights")
    with HistoryStore.open(url, read_only=True) as store:
        (finding,) = store.findings("drifting")
    assert finding.near_window == target.near_window
    assert finding.describe() == f"near commit {sha(CHANGE)[:12]} (window {target.near_window})"
    assert any(line.startswith(f"nightly: drifting: near commit {sha(CHANGE)[:12]} (window ") for line in lines)
    assert f"near commit {sha(CHANGE)[:12]} (window {target.near_window})" in "\n".join(summary_lines(report))
    # bisected once: the next night does not start it again
    started.clear()
    run_nightly_bisect(url, root, [], NightlyBudget(max_runs=8), lambda name: name)
    assert started == []
