"""The xtuner-layout metric log writer."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import pytest

from autotest.errors import UsageError
from autotest.workloads.tracker import (
    TRACKER_RELPATH,
    JsonlTracker,
    make_exp_dir,
    write_config,
)


def test_exp_dir_is_a_fresh_14_digit_timestamp(tmp_path: Path) -> None:
    now = dt.datetime(2026, 7, 31, 12, 0, 5)
    first = make_exp_dir(tmp_path / "work", now)
    second = make_exp_dir(tmp_path / "work", now)  # same second: the next free one
    assert first.name == "20260731120005" and second.name == "20260731120006"
    # an older clock never produces a name that sorts before the newest run
    assert make_exp_dir(tmp_path / "work", now - dt.timedelta(hours=1)).name == "20260731120007"


def test_rows_are_appended_flushed_and_keep_nan(tmp_path: Path) -> None:
    exp = make_exp_dir(tmp_path)
    tracker = JsonlTracker(exp)
    tracker.write({"eval/accuracy": 0.5, "step": 0})
    tracker.write({"mismatch/mismatch_k3_kl": float("nan"), "step": 1})
    # flushed per call: readable before close
    lines = (exp / TRACKER_RELPATH).read_text().splitlines()
    assert lines[0] == '{"eval/accuracy": 0.5, "step": 0}'
    assert lines[1] == '{"mismatch/mismatch_k3_kl": NaN, "step": 1}'
    tracker.write_text('{"step": 2, "x"')
    tracker.close()
    assert (exp / TRACKER_RELPATH).read_text().endswith('"step": 1}\n{"step": 2, "x"')
    assert exp.relative_to(tmp_path).parts[0].isdigit()


def test_config_is_saved_beside_the_logs(tmp_path: Path) -> None:
    path = write_config(tmp_path, {"seed": 3, "recompute_logprobs": True})
    assert path == tmp_path / "config.json"
    assert json.loads(path.read_text()) == {"seed": 3, "recompute_logprobs": True}


def test_unusable_work_dir_is_a_usage_error(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(UsageError, match="--work-dir .*file/sub: cannot create it"):
        make_exp_dir(blocker / "sub")
