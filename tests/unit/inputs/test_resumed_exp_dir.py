"""A resumed xtuner run reuses its exp dir: it is read when its metric log grew during this run."""

from __future__ import annotations

import os
import time
from pathlib import Path

from autotest.inputs.tracker_layout import newest_exp_dir, tracker_in
from autotest.run.artifacts import collect_artifacts
from tests.helpers import write_tracker


def _exp(work: Path, started: float, mtime: float) -> Path:
    exp = work / time.strftime("%Y%m%d%H%M%S", time.localtime(started))
    tracker = write_tracker(exp / "logs" / "exp_tracking" / "tracker.jsonl", {1: {"response/rewards/mean": 0.5}})
    os.utime(tracker, (mtime, mtime))
    return exp


def test_an_older_exp_dir_whose_tracker_grew_is_this_runs(tmp_path):
    launch = time.time()
    earlier = _exp(tmp_path, launch - 7200, launch - 7000)  # an earlier run, untouched since
    resumed = _exp(tmp_path, launch - 3600, launch + 5)  # created before, appended to during this run
    assert newest_exp_dir(tmp_path, since=launch) == resumed
    os.utime(tracker_in(resumed), (launch - 100, launch - 100))
    assert newest_exp_dir(tmp_path, since=launch) is None  # nothing of this run: not an earlier run's log
    assert newest_exp_dir(tmp_path) == resumed and earlier.exists()


def test_a_new_exp_dir_still_wins_over_a_grown_older_one(tmp_path):
    launch = time.time()
    _exp(tmp_path, launch - 3600, launch + 5)
    fresh = _exp(tmp_path, launch + 1, launch + 5)
    assert newest_exp_dir(tmp_path, since=launch) == fresh


def test_collect_copies_the_resumed_tracker(tmp_path):
    launch = time.time()
    _exp(tmp_path / "work", launch - 3600, launch + 5)
    artifacts = collect_artifacts(tmp_path / "work", tmp_path / "results", since=launch)
    assert artifacts.tracker == tmp_path / "results" / "tracker.jsonl" and artifacts.tracker.is_file()
