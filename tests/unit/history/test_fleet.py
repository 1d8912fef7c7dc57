"""Fleet triage: events grouped by window across cases, classified from the recorded environments and commits,
recorded once with each case marked; the batch recalibration proposal; ``history fleet``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from autotest.calibration.batch import batch_proposal, render_batch_review
from autotest.history.database import SCHEMA_VERSION, sqlite_url
from autotest.history.fleet import (
    CODE,
    DRIFT,
    ENVIRONMENT,
    FLIP,
    FLIP_AND_DRIFT,
    UNEXPLAINED,
    CaseEvent,
    FleetParams,
    case_events,
    classify,
    environment_changes_between,
    group_events,
    triage,
    window_text,
)
from autotest.history.fleet_store import record_fleet_findings, recorded_fleet_findings
from autotest.history.store import HistoryStore, RunRow, ingest
from tests.helpers import run_cli
from tests.unit.history.builders import REWARDS, write_results_folder

PASSING, FAILING = {REWARDS: 0.05}, {REWARDS: 0.5}


def night(root: Path, case: str, n: int, values: dict, sha: str | None = None, torch: str = "2.4.0",
          image: str | None = None) -> Path:
    folder = write_results_folder(root, case, n, values, sha=sha)
    preflight = json.loads((folder / "preflight.json").read_text())
    preflight["environment"]["packages"] = {"torch": torch, "numpy": "2.1.0"}
    if image is not None:
        preflight["environment"]["image"] = image
    (folder / "preflight.json").write_text(json.dumps(preflight))
    return folder


def store_of(root: Path) -> HistoryStore:
    url = sqlite_url(root / "history.sqlite")
    ingest([root], url)
    return HistoryStore.open(url)


def run(run_id: int, case: str, day: int, sha: str = "a" * 40) -> RunRow:
    return RunRow(run_id, case, f"/nowhere/{case}/{day}", f"2026-01-{day:02d}T02:00:00+00:00", "PASS", sha, None, "hw")


def event(case: str, start: int, end: int, kind: str = FLIP, run_id: int = 0) -> CaseEvent:
    good, bad = run(run_id + start, case, start), run(run_id + end, case, end)
    return CaseEvent(case, kind, good, bad, (good, bad))


def test_overlapping_windows_group_across_cases_and_a_lone_case_is_no_fleet() -> None:
    events = [event("a", 9, 10), event("b", 9, 10), event("c", 8, 11, DRIFT), event("d", 20, 21),
              event("a", 8, 11, DRIFT, run_id=100)]
    groups = group_events(events, min_cases=2)
    assert [[e.case for e in g] for g in groups] == [["a", "b", "c"]]
    a = groups[0][0]
    assert a.kind == FLIP_AND_DRIFT and a.good.started_at.startswith("2026-01-09")  # the flip's exact ends win
    assert group_events(events, min_cases=4) == []
    assert window_text(run(1, "a", 24), run(2, "a", 27)) == "2026-01-24 .. 2026-01-27, 3 nights"


def test_one_environment_change_in_every_case_is_an_environment_finding(tmp_path: Path) -> None:
    root = tmp_path / "r"
    for case in ("c1", "c2", "c3"):
        for n in range(1, 6):
            night(root, case, n, FAILING if n >= 4 else PASSING, torch="2.5.0" if n >= 4 else "2.4.0")
    night(root, "quiet", 1, PASSING)
    night(root, "quiet", 5, PASSING)
    with store_of(root) as store:
        events = case_events(store, params=FleetParams(nights=7))
        (finding,) = triage(store)
    assert sorted(e.case for e in events) == ["c1", "c2", "c3"]
    assert finding.kind == ENVIRONMENT and finding.changes == ("torch 2.4.0 -> 2.5.0",)
    assert [c.case for c in finding.cases] == ["c1", "c2", "c3"] and finding.nights == 1
    assert "environment changed between 2026-01-04 and 2026-01-05 (1 night(s)): torch 2.4.0 -> 2.5.0" \
        in finding.describe()


def test_a_code_change_without_an_environment_change_is_one_bisect_for_the_fleet(tmp_path: Path) -> None:
    root = tmp_path / "r"
    for case in ("c1", "c2", "c3"):
        for n in range(1, 6):
            night(root, case, n, FAILING if n >= 4 else PASSING)  # every night its own commit (the builder's)
    with store_of(root) as store:
        (finding,) = triage(store)
    assert finding.kind == CODE and finding.representative == "c1"
    assert finding.good_sha != finding.bad_sha and finding.changes == ()
    assert {(c.good_sha, c.bad_sha) for c in finding.cases} == {(finding.good_sha, finding.bad_sha)}


def test_an_environment_change_in_every_case_at_the_same_commit_and_nothing_recorded(tmp_path: Path) -> None:
    root = tmp_path / "r"
    for i, case in enumerate(("c1", "c2")):  # different changes, the same commit: still the environment
        for n in range(1, 4):
            night(root, case, n, FAILING if n == 3 else PASSING, sha="f" * 40,
                  image=f"img:{i}.{1 if n == 3 else 0}")
    for case in ("c3", "c4"):  # the same commit, nothing recorded changed
        for n in range(1, 4):
            night(root, case, n, FAILING if n == 3 else PASSING, sha="f" * 40)
    with store_of(root) as store:
        both = group_events(case_events(store), 2)
        (env,) = [classify([e for e in both[0] if e.case in ("c1", "c2")])]
        (plain,) = [classify([e for e in both[0] if e.case in ("c3", "c4")])]
        assert environment_changes_between(both[0][0].runs) == ["image img:0.0 -> img:0.1"]
    assert env.kind == ENVIRONMENT and env.changes == ("image img:0.0 -> img:0.1", "image img:1.0 -> img:1.1")
    assert plain.kind == UNEXPLAINED and "no recorded environment or framework change" in plain.describe()


def test_a_healed_flip_or_an_old_one_is_no_event(tmp_path: Path) -> None:
    root = tmp_path / "r"
    for n, values in enumerate([PASSING, FAILING, PASSING], start=1):
        night(root, "healed", n, values)
    for n in range(1, 21):
        night(root, "old", n, FAILING if n >= 3 else PASSING)
    with store_of(root) as store:
        assert case_events(store, ["healed"]) == []
        assert case_events(store, ["old"], FleetParams(nights=7)) == []
        assert [e.kind for e in case_events(store, ["old"], FleetParams(nights=19))] == [FLIP]


def test_findings_are_recorded_once_with_each_case_marked(tmp_path: Path) -> None:
    root = tmp_path / "r"
    for case in ("c1", "c2"):
        for n in range(1, 4):
            night(root, case, n, FAILING if n == 3 else PASSING, torch="2.5.0" if n == 3 else "2.4.0")
    with store_of(root) as store:
        found = triage(store)
        first = record_fleet_findings(store, found)
        again = record_fleet_findings(store, triage(store))
        assert [f.finding_id for f in first] == [f.finding_id for f in again] == [1]
        (held,) = recorded_fleet_findings(store, "c2")
        assert recorded_fleet_findings(store, "other") == []
        proposal = batch_proposal(store, held, runs=3)
    assert held.kind == ENVIRONMENT and [c.case for c in held.cases] == ["c1", "c2"]
    assert held.cases[1].changes == ("torch 2.4.0 -> 2.5.0",) and held.cases[1].check_ids == (REWARDS,)
    assert [c.command for c in proposal.candidates] == ["rl-autotest calibrate c1 --runs 3",
                                                        "rl-autotest calibrate c2 --runs 3"]
    review = render_batch_review(proposal)
    assert review.startswith("# Batch recalibration: fleet finding 1") and "no calibration has run yet" in review
    assert f"| c2 | `{REWARDS}` | 0.05 | 0.5 | 0.19 | +2.37 |" in review


def test_history_fleet_prints_records_and_writes_one_batch(tmp_path: Path, capsys) -> None:
    root = tmp_path / "r"
    for case in ("c1", "c2"):
        for n in range(1, 4):
            night(root, case, n, FAILING if n == 3 else PASSING, torch="2.5.0" if n == 3 else "2.4.0")
    ingest([root], sqlite_url(root / "history.sqlite"))
    assert run_cli("history", "fleet", "--results-dir", str(root)) == 1  # read-only: nothing recorded
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("fleet finding: environment changed") and len(out) == 3
    assert run_cli("history", "fleet", "--results-dir", str(root), "--record", "--batch-out",
                   str(tmp_path / "batch")) == 1
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("fleet finding 1: environment changed")
    assert out[1].startswith(f"  c1: flip ({REWARDS}) between runs 2 and 3: caused by this finding")
    assert out[-1] == (f"  batch recalibration (2 candidate(s)): review {tmp_path / 'batch/fleet-1/review.md'}, "
                       f"commands {tmp_path / 'batch/fleet-1/recalibrate.sh'}")
    assert (tmp_path / "batch/fleet-1/recalibrate.sh").read_text().splitlines()[-2:] == [
        "rl-autotest calibrate c1 --runs 3", "rl-autotest calibrate c2 --runs 3"]


@pytest.mark.parametrize("argv,message", [
    (["--nights", "0"], "--nights: must be at least 1, got 0"),
    (["--min-cases", "1"], "--min-cases: must be at least 2, got 1"),
])
def test_history_fleet_bad_flags_are_one_line(tmp_path: Path, capsys, argv, message) -> None:
    night(tmp_path, "c1", 1, PASSING)
    ingest([tmp_path], sqlite_url(tmp_path / "history.sqlite"))
    assert run_cli("history", "fleet", "--results-dir", str(tmp_path), *argv) == 2
    assert capsys.readouterr().out.strip() == f"rl-autotest: error: {message}"


def test_history_fleet_with_nothing_together(tmp_path: Path, capsys) -> None:
    night(tmp_path, "c1", 1, PASSING)
    night(tmp_path, "c1", 2, FAILING)
    ingest([tmp_path], sqlite_url(tmp_path / "history.sqlite"))
    assert run_cli("history", "fleet", "--results-dir", str(tmp_path)) == 0
    assert capsys.readouterr().out.strip() == ("no fleet finding: no 2 or more cases changed in one window of the "
                                               "latest 7 night(s)")


def test_a_v4_history_reads_its_findings_and_the_next_writer_adds_the_fleet_tables(tmp_path: Path) -> None:
    from autotest.history.database import _metadata, create_history_engine
    from autotest.history.migrations import migrate
    from autotest.history.store import BisectFinding

    url = sqlite_url(tmp_path / "h.sqlite")
    engine = create_history_engine(url)
    v4 = _metadata(4)
    with engine.begin() as conn:
        v4.create_all(conn)
        conn.execute(v4.tables["schema_migrations"].insert(), [
            dict(version=v, description="v", applied_at="x") for v in (1, 2, 3, 4)])
        conn.execute(v4.tables["runs"].insert().values(
            run_key="k", case_name="c", results_dir="/x", started_at="2026-01-01T00:00:00+00:00", status="PASS",
            hardware="x", recorded_at="x"))
        conn.execute(v4.tables["bisect_findings"].insert().values(
            case_name="c", good_sha="a", bad_sha="b", first_bad_sha="b" * 40, subject="s", author="d",
            confidence="high", bisect_dir="/b", found_at="t"))
    engine.dispose()
    with HistoryStore.open(url, read_only=True) as reader:
        assert reader.version == 4 and recorded_fleet_findings(reader) == []
        (old,) = reader.findings("c")
    assert old.near_window is None and old.describe() == f"first bad commit {'b' * 12}"
    with HistoryStore.open(url) as store:
        assert store.version == SCHEMA_VERSION
        assert store.findings("c") == [old]
        store.add_finding(BisectFinding("c", "a", "b", "c" * 40, "s", "d", "high", "/b", "t", "2026-01-24 .. "
                                        "2026-01-27, 3 nights"))
        assert store.findings("c")[-1].describe() == f"near commit {'c' * 12} (window 2026-01-24 .. 2026-01-27, 3 nights)"
    assert migrate(create_history_engine(url)) == SCHEMA_VERSION


def test_a_drift_that_ends_the_night_a_flip_starts_is_the_same_event() -> None:
    from autotest.history.fleet import merge_case_events

    merged = merge_case_events([event("a", 26, 29, DRIFT), event("a", 29, 30), event("b", 20, 23, DRIFT),
                                event("b", 29, 30)])
    assert [(e.case, e.kind, e.start.day, e.end.day) for e in merged] == [
        ("a", FLIP_AND_DRIFT, 29, 30), ("b", DRIFT, 20, 23), ("b", FLIP, 29, 30)]
