"""Trusted history: fault runs, dry runs, bisect probes and runs a person untrusted never teach the harness
what normal looks like (calibrate --from-history, drift, the dashboard's bands); they stay visible, marked."""

from __future__ import annotations

import sqlite3

import pytest

from autotest.cli import main
from autotest.errors import UsageError
from autotest.history.drift import drift_in, statistic_histories
from autotest.history.database import SCHEMA_VERSION
from autotest.history.store import HistoryStore, ingest, passing_runs
from tests.unit.history.builders import REWARDS, STEP_TIME, write_nightlies, write_results_folder


@pytest.fixture(autouse=True)
def _no_env_history(monkeypatch) -> None:
    monkeypatch.delenv("RL_AUTOTEST_HISTORY", raising=False)


def _url(root) -> str:
    return f"sqlite:///{root / 'history.sqlite'}"


def _mixed_history(root):
    """Nights 1-4 clean and passing; 5 and 6 made with a fault (and passing: below the thresholds); 7 a bisect probe."""
    clean = [write_results_folder(root, "c", n, {REWARDS: 0.05, STEP_TIME: 0.3}) for n in range(1, 5)]
    faults = [write_results_folder(root, "c", n, {REWARDS: 0.15, STEP_TIME: 0.3}, fault="lr-scale:0.1")
              for n in (5, 6)]
    probe = write_results_folder(root, "c", 7, {REWARDS: 0.15, STEP_TIME: 0.3}, kind="bisect")
    ingest([root], _url(root))
    return clean, faults, probe


def test_fault_runs_and_bisect_probes_never_feed_calibration_drift_or_bands(tmp_path) -> None:
    clean, _, _ = _mixed_history(tmp_path)
    assert [r.results_dir for r in passing_runs("c", 10, _url(tmp_path))] == clean
    with HistoryStore.open(_url(tmp_path), read_only=True) as store:
        assert [r.kind for r in store.runs("c")] == ["gate"] * 4 + ["fault", "fault", "bisect"]
        assert [len(h.points) for h in statistic_histories(store, "c")] == [4, 4]
        assert [len(h.points) for h in statistic_histories(store, "c", trusted_only=False)] == [7, 7]


def test_a_history_without_enough_trusted_runs_says_how_many_were_left_out(tmp_path) -> None:
    for n in (1, 2):
        write_results_folder(tmp_path, "c", n, {REWARDS: 0.05, STEP_TIME: 0.3}, fault="lr-scale:0.1")
    ingest([tmp_path], _url(tmp_path))
    with pytest.raises(UsageError, match=r"no trusted passing run of 'c' .*\(2 passing run\(s\) left out: made "
                                         r"with a fault, or marked untrusted\)"):
        passing_runs("c", 5, _url(tmp_path))


def test_untrust_and_trust_are_recorded_with_when_who_and_why_and_revocable(tmp_path, capsys) -> None:
    clean, _, _ = _mixed_history(tmp_path)
    root = ["--results-dir", str(tmp_path)]
    assert main(["history", "untrust", str(clean[1]), "--why", "node 7 had a failing GPU", *root]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"run 2 (c, 2026-01-03T02:00:00+00:00, {clean[1]}): untrusted (node 7 had a failing GPU)")
    assert [r.results_dir for r in passing_runs("c", 10, _url(tmp_path))] == [clean[0], clean[2], clean[3]]
    assert main(["history", "show", "c", *root]) == 0
    rows = capsys.readouterr().out.splitlines()
    assert "no: untrusted since " in rows[2] and "node 7 had a failing GPU" in rows[2]
    assert "no: fault run" in rows[5] and "no: bisect run" in rows[7] and " yes " in rows[1]
    assert main(["history", "trust", "2", *root]) == 0
    assert capsys.readouterr().out.startswith("run 2 (c, ")
    assert [r.results_dir for r in passing_runs("c", 10, _url(tmp_path))] == clean
    assert main(["history", "trust", "2", *root]) == 0
    assert capsys.readouterr().out == "run 2 is already trusted; nothing recorded\n"
    with sqlite3.connect(tmp_path / "history.sqlite") as conn:
        marks = conn.execute("SELECT run_id, trusted, reason, marked_at IS NOT NULL FROM trust_marks").fetchall()
    assert marks == [(2, 0, "node 7 had a failing GPU", 1), (2, 1, "trusted again", 1)]


def test_a_fault_run_cannot_be_trusted_into_calibration(tmp_path, capsys) -> None:
    _mixed_history(tmp_path)
    assert main(["history", "trust", "5", "--results-dir", str(tmp_path)]) == 2
    assert "run 5 is a fault run; only gate and calibration runs feed" in capsys.readouterr().err


def test_an_untrusted_shift_is_not_drift(tmp_path, capsys) -> None:
    folders = write_nightlies(tmp_path, "c", nights=30, shift_at=25, seed=9)
    ingest([tmp_path], _url(tmp_path))
    with HistoryStore.open(_url(tmp_path), read_only=True) as store:
        assert [f.check_id for f in drift_in(store, "c")] == [REWARDS]
    for night in range(25, 31):
        assert main(["history", "untrust", str(folders[night - 1]), "--why", "bad node",
                     "--results-dir", str(tmp_path)]) == 0
    with HistoryStore.open(_url(tmp_path), read_only=True) as store:
        assert drift_in(store, "c") == []
    capsys.readouterr()
    assert main(["history", "drift", "--results-dir", str(tmp_path)]) == 0
    assert capsys.readouterr().out == ("no drift: c, 2 gated statistics over 24 runs (6 untrusted run(s) left out; "
                                       "history show c lists them)\n")
    assert main(["history", "show", "c", "--metric", "response/rewards/mean", "--results-dir", str(tmp_path)]) == 0
    rows = capsys.readouterr().out.splitlines()
    assert rows[0].split()[:4] == ["started_at", "status", "trusted", "framework_sha"]
    assert sum("no: untrusted since" in row for row in rows) == 6


def test_the_dashboard_marks_untrusted_runs_and_draws_bands_from_trusted_ones(tmp_path, capsys) -> None:
    _mixed_history(tmp_path)
    assert main(["history", "dashboard", "--results-dir", str(tmp_path), "--out", str(tmp_path / "site")]) == 0
    page = (tmp_path / "site" / "index.html").read_text()
    assert page.count('<tr class="untrusted">') == 3 and page.count('<tr class="trusted">') == 4
    assert "no: fault run" in page and "no: bisect run" in page
    assert page.count("(4 runs)</text>") == 2  # each trend: the four trusted runs


def _v1_history(root) -> str:
    """A history written by the previous release (schema v1: no kind, no trust marks)."""
    from autotest.history.database import _metadata, create_history_engine
    from autotest.history.record import read_results_folder

    url = _url(root)
    engine = create_history_engine(url)
    v1 = _metadata(1)
    with engine.begin() as conn:
        v1.create_all(conn)
        conn.execute(v1.tables["schema_migrations"].insert().values(version=1, description="v1", applied_at="x"))
        for index, folder in enumerate(sorted(root.glob("c/night-*")), start=1):
            r = read_results_folder(folder)
            conn.execute(v1.tables["runs"].insert().values(
                id=index, run_key=r.run_key, case_name=r.case, results_dir=r.results_dir, started_at=r.started_at,
                status=r.status, framework_sha=r.framework_sha, harness_sha=r.harness_sha, hardware=r.hardware,
                recorded_at="x"))
            conn.execute(v1.tables["checks"].insert(), [dict(
                run_id=index, check_id=c.check_id, status=c.status, severity=c.severity, metric=c.metric,
                operator=c.operator, observed=c.observed, threshold=c.threshold) for c in r.checks])
    engine.dispose()
    return url


def test_a_version_1_history_is_read_as_it_is_without_writing(tmp_path, capsys) -> None:
    clean = [write_results_folder(tmp_path, "c", n, {REWARDS: 0.05, STEP_TIME: 0.3}) for n in range(1, 4)]
    write_results_folder(tmp_path, "c", 4, {REWARDS: 0.15, STEP_TIME: 0.3}, fault="lr-scale:0.1")
    url = _v1_history(tmp_path)
    before = (tmp_path / "history.sqlite").read_bytes()
    with HistoryStore.open(url, read_only=True) as store:
        assert store.version == 1 and [r.kind for r in store.runs("c")] == ["gate"] * 4
    # its results.json still says it was made with a fault: calibration never takes it
    assert [r.results_dir for r in passing_runs("c", 10, url)] == clean
    assert main(["history", "drift", "--history", url]) == 0
    assert main(["history", "show", "c", "--history", url]) == 0
    assert (tmp_path / "history.sqlite").read_bytes() == before


def test_a_version_1_history_is_migrated_by_its_next_writer(tmp_path, capsys) -> None:
    for n in range(1, 3):
        write_results_folder(tmp_path, "c", n, {REWARDS: 0.05, STEP_TIME: 0.3})
    faulty = write_results_folder(tmp_path, "c", 3, {REWARDS: 0.15, STEP_TIME: 0.3}, fault="lr-scale:0.1")
    url = _v1_history(tmp_path)
    assert main(["history", "untrust", "1", "--why", "first night's node was flaky", "--history", url]) == 0
    with HistoryStore.open(url, read_only=True) as store:
        runs = store.runs("c")
        assert store.version == SCHEMA_VERSION  # migrated to the current schema
        assert [(r.kind, r.trusted) for r in runs] == [("gate", False), ("gate", True), ("fault", False)]
        assert runs[2].results_dir == str(faulty)


def test_a_why_with_terminal_escapes_is_shown_escaped(tmp_path, capsys) -> None:
    clean, _, _ = _mixed_history(tmp_path)
    root = ["--results-dir", str(tmp_path)]
    why = "bad node\x1b[2J\x1b]0;pwned\x07\rok"
    assert main(["history", "untrust", str(clean[1]), "--why", why, *root]) == 0
    echoed = capsys.readouterr().out
    assert "\x1b" not in echoed and "bad node\\x1b[2J" in echoed
    assert main(["history", "show", "c", *root]) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\x07" not in out and "\r" not in out
    assert "bad node\\x1b[2J\\x1b]0;pwned\\x07\\rok" in out.splitlines()[2]
