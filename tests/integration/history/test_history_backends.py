"""The history end to end on SQLite and a real PostgreSQL: ingest, drift, identical answers."""

from __future__ import annotations

import dataclasses
import hashlib
import os
import subprocess
import sys
from pathlib import Path

from autotest.history.drift import drift_in, record_and_detect, render_drift_lines
from autotest.history.store import HistoryStore, ingest, passing_runs, record_results
from tests.unit.history.builders import (
    REWARDS,
    STEP_TIME,
    nightly_values,
    write_nightlies,
    write_results_folder,
)
from tests import waits

SHIFT_NIGHT = 25
ROOT = Path(__file__).resolve().parents[3]


def _cli(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("RL_AUTOTEST_HISTORY", None)
    return waits.run([sys.executable, "-m", "autotest.cli", "history", *args], capture_output=True,
                     text=True, env=env, limit_s=120)


def test_half_threshold_shift_at_night_25_is_reported_within_a_few_nights(tmp_path, history_url) -> None:
    first_report = None
    for night, observed in enumerate(nightly_values(40, SHIFT_NIGHT, 0.5, seed=3), start=1):
        record_results(write_results_folder(tmp_path, "grpo-nightly", night, observed), history_url)
        with HistoryStore.open(history_url) as store:
            findings = drift_in(store, "grpo-nightly")
        if findings and first_report is None:
            first_report = (night, findings)
    assert first_report is not None, "the shift was never reported"
    night, findings = first_report
    assert SHIFT_NIGHT <= night <= SHIFT_NIGHT + 4
    assert [f.check_id for f in findings] == [REWARDS]
    # three runs into a shift its start is known to within a run; with all 40 nights, exactly
    assert abs(int(findings[0].since.results_dir[-2:]) - SHIFT_NIGHT) <= 1
    with HistoryStore.open(history_url) as store:
        [final] = drift_in(store, "grpo-nightly")
    assert final.check_id == REWARDS and final.since.results_dir.endswith(f"night-{SHIFT_NIGHT:02d}")
    assert final.runs_since == 40 - SHIFT_NIGHT + 1
    assert final.direction == "toward the threshold"
    assert 0.4 < final.shift_thresholds < 0.6
    assert final.p_value <= 0.01


def test_no_shift_reports_no_drift_and_the_cli_exits_0(tmp_path, history_url) -> None:
    write_nightlies(tmp_path / "results", "grpo-nightly", nights=40, shift_at=None, seed=4)
    assert _cli("ingest", str(tmp_path / "results"), "--history", history_url).returncode == 0
    done = _cli("drift", "--history", history_url)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout == "no drift: grpo-nightly, 2 gated statistics over 40 runs\n"


def test_the_cli_reports_drift_with_statistic_start_size_and_significance(tmp_path, history_url) -> None:
    write_nightlies(tmp_path / "results", "grpo-nightly", nights=40, shift_at=SHIFT_NIGHT, seed=5)
    assert _cli("ingest", str(tmp_path / "results"), "--history", history_url).returncode == 0
    done = _cli("drift", "--case", "grpo-nightly", "--history", history_url)
    assert done.returncode == 1, done.stdout + done.stderr
    [line] = done.stdout.splitlines()
    assert line.startswith(f"drift: grpo-nightly {REWARDS}: ")
    assert f"night-{SHIFT_NIGHT:02d}" in line and "x threshold 0.19, toward the threshold" in line
    assert "p = 0.001 (permutation test, 999 permutations)" in line


def test_ingesting_the_same_folders_twice_records_them_once(tmp_path, history_url) -> None:
    folders = write_nightlies(tmp_path / "results", "grpo-nightly", nights=3, seed=6)
    first = ingest([tmp_path / "results"], history_url)
    second = ingest([folders[0], tmp_path / "results"], history_url)
    assert len(first.recorded) == 3 and not first.already_recorded
    assert not second.recorded and len(second.already_recorded) == 3
    assert record_results(folders[1], history_url) is False
    with HistoryStore.open(history_url) as store:
        assert len(store.runs("grpo-nightly")) == 3
        assert len(store.check_points("grpo-nightly")) == 9


def test_concurrent_writers_record_each_run_once(tmp_path, history_url) -> None:
    write_nightlies(tmp_path / "results", "grpo-nightly", nights=12, seed=7)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    writers = [subprocess.Popen([sys.executable, "-m", "autotest.cli", "history", "ingest",
                                 str(tmp_path / "results"), "--history", history_url],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
               for _ in range(4)]
    outputs = [waits.communicate(w, 120) for w in writers]
    assert [w.returncode for w in writers] == [0, 0, 0, 0], outputs
    recorded = sum(int(out.split("recorded ")[1].split(" ")[0]) for out, _ in outputs)
    assert recorded == 12
    with HistoryStore.open(history_url) as store:
        assert len(store.runs("grpo-nightly")) == 12


def test_passing_runs_lists_the_latest_passing_runs_with_their_commits(tmp_path, history_url) -> None:
    folders = [write_results_folder(tmp_path, "c", night, {REWARDS: 0.05, STEP_TIME: 0.2}) for night in (1, 2, 4)]
    folders.insert(2, write_results_folder(tmp_path, "c", 3, {REWARDS: 0.5, STEP_TIME: 0.2}))  # fails
    ingest([tmp_path], history_url)
    runs = passing_runs("c", 2, history_url)
    assert [r.results_dir for r in runs] == [folders[1], folders[3]]
    assert [r.framework_sha for r in runs] == [hashlib.sha1(f"night {n}".encode()).hexdigest() for n in (2, 4)]
    assert all(r.tracker == r.results_dir / "tracker.jsonl" and r.harness_sha == "a" * 40 for r in runs)


def _answers(url: str) -> dict:
    with HistoryStore.open(url) as store:
        return {"cases": store.cases(),
                "runs": [dataclasses.replace(r, run_id=0) for r in store.runs("grpo-nightly")],
                "points": [(p.run.started_at, p.check_id, p.status, p.observed, p.threshold)
                           for p in store.check_points("grpo-nightly")],
                "metrics": [{k: v for k, v in r.items() if k != "run_id"} for r in store.metric_rows("grpo-nightly")],
                "drift": render_drift_lines(drift_in(store, "grpo-nightly"))}


def test_sqlite_and_postgresql_give_the_same_answers(tmp_path, both_urls) -> None:
    write_nightlies(tmp_path / "results", "grpo-nightly", nights=40, shift_at=SHIFT_NIGHT, seed=8)
    for url in both_urls.values():
        ingest([tmp_path / "results"], url)
    sqlite, postgresql = (_answers(both_urls[k]) for k in ("sqlite", "postgresql"))
    assert sqlite["drift"], "the shifted history should show drift on both back ends"
    assert len(sqlite["points"]) == 120 and len(sqlite["metrics"]) == 80
    assert sqlite == postgresql


def test_record_and_detect_after_each_verdict(tmp_path, history_url) -> None:
    folders = write_nightlies(tmp_path / "results", "grpo-nightly", nights=30, shift_at=SHIFT_NIGHT, seed=9)
    outcomes = [record_and_detect(f, history_url) for f in folders]
    assert all(recorded for recorded, _ in outcomes)
    assert [bool(findings) for _, findings in outcomes[:SHIFT_NIGHT - 1]] == [False] * (SHIFT_NIGHT - 1)
    recorded, findings = outcomes[-1]
    assert [f.check_id for f in findings] == [REWARDS]
    assert record_and_detect(folders[-1], history_url)[0] is False


def test_readers_create_and_write_nothing_on_either_back_end(tmp_path, history_url) -> None:
    import sqlalchemy as sa
    import pytest

    from autotest.errors import UsageError

    with pytest.raises(UsageError, match="no runs in "):
        HistoryStore.open(history_url, read_only=True)
    if history_url.startswith("sqlite"):
        assert not (tmp_path / "history.sqlite").exists()
    else:
        engine = sa.create_engine(history_url)
        with engine.connect() as conn:
            assert sa.inspect(conn).get_table_names() == []
        engine.dispose()
    write_nightlies(tmp_path / "results", "grpo-nightly", nights=2, seed=1)
    ingest([tmp_path / "results"], history_url)
    with HistoryStore.open(history_url, read_only=True) as store:
        with pytest.raises(sa.exc.DBAPIError, match="read-only|readonly"), store.engine.begin() as conn:
            conn.execute(sa.text("DELETE FROM runs"))
        assert len(store.runs("grpo-nightly")) == 2


def test_trust_marks_and_fault_runs_on_either_back_end(tmp_path, history_url) -> None:
    from autotest.history.trust import mark_run

    clean = [write_results_folder(tmp_path, "c", n, {REWARDS: 0.05, STEP_TIME: 0.2}) for n in (1, 2, 3)]
    write_results_folder(tmp_path, "c", 4, {REWARDS: 0.05, STEP_TIME: 0.2}, fault="lr-scale:0.1")
    ingest([tmp_path], history_url)
    assert [r.results_dir for r in passing_runs("c", 10, history_url)] == clean
    marked = mark_run(history_url, str(clean[0]), trusted=False, why="flaky node")
    assert marked.changed and marked.run.trust_reason == "flaky node" and not marked.run.trusted
    assert [r.results_dir for r in passing_runs("c", 10, history_url)] == clean[1:]
    mark_run(history_url, str(marked.run.run_id), trusted=True, why=None)
    assert [r.results_dir for r in passing_runs("c", 10, history_url)] == clean
