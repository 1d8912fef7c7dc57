"""Collecting a run's artifacts into a full results disk (a real tmpfs): a copy that finds no room is removed,
never left looking like the run's log, and the verdict is judged from the run's own log instead."""

from __future__ import annotations

import json
from pathlib import Path

from autotest.redaction import forget_secrets, register_secret
from autotest.run.artifacts import collect_artifacts, mask_logs
from tests.filesystems import PAGE, fill, free_bytes, leftovers, tmpfs

FULL = "[Errno 28] No space left on device; free space on that disk or write elsewhere"


def _run(work_dir: Path, tracker_bytes: int) -> Path:
    exp = work_dir / "20260101000000"
    (exp / "logs" / "exp_tracking").mkdir(parents=True)
    (exp / "config.json").write_text(json.dumps({"seed": 0}))
    row = json.dumps({"response/rewards/mean": 0.5, "step": 1}) + "\n"
    tracker = exp / "logs" / "exp_tracking" / "tracker.jsonl"
    tracker.write_text(row * (tracker_bytes // len(row)))
    return tracker


def test_a_tracker_copy_without_room_is_removed_and_the_run_log_is_judged(tmp_path: Path) -> None:
    with tmpfs(tmp_path / "disk", size_kib=1024) as disk:
        results = disk / "results"
        source = _run(results / "work", tracker_bytes=200_000)  # the run's work dir is in its results folder
        fill(disk, leave_bytes=24 * PAGE)  # room for the config copy, not for the tracker
        artifacts = collect_artifacts(results / "work", results)
        assert artifacts.tracker is None and artifacts.judged_tracker == source
        assert artifacts.unsaved == (f"cannot write {results / 'tracker.jsonl'}: {FULL}",)
        assert artifacts.notes == ()  # not "no tracker.jsonl": the run logged one, the disk refused the copy
        assert not (results / "tracker.jsonl").exists() and leftovers(results) == []
        assert source.stat().st_size > 190_000  # the run's own log is untouched
        assert [p.name for p in artifacts.run_config] == ["config.json"]  # the other copies are still tried
        assert free_bytes(disk) >= 23 * PAGE  # the partial copy gave its room back


def test_event_files_that_do_not_all_fit_leave_no_tensorboard_folder(tmp_path: Path) -> None:
    events = tmp_path / "work" / "tb"
    events.mkdir(parents=True)
    for index in range(4):
        (events / f"events.out.tfevents.{index}").write_bytes(b"\1" * 40_000)
    with tmpfs(tmp_path / "disk", size_kib=512) as disk:
        fill(disk, leave_bytes=24 * PAGE)  # two of the four fit
        artifacts = collect_artifacts(tmp_path / "work", disk / "results", tracker_path=events, fmt="tensorboard")
        assert artifacts.tracker is None and artifacts.judged_tracker == events
        (line,) = artifacts.unsaved
        assert line.startswith(f"cannot write {disk / 'results' / 'tensorboard'}/events.out.tfevents.")
        assert not (disk / "results" / "tensorboard").exists()  # two event files alone would look like the run


def test_a_copy_that_fits_is_the_one_judged(tmp_path: Path) -> None:
    _run(tmp_path / "work", tracker_bytes=10_000)
    artifacts = collect_artifacts(tmp_path / "work", tmp_path / "results")
    assert artifacts.unsaved == () and artifacts.judged_tracker == tmp_path / "results" / "tracker.jsonl"


def test_a_log_whose_secrets_cannot_be_masked_for_lack_of_room_is_removed(tmp_path: Path) -> None:
    register_secret("hf_s3cr3t_value_123")
    try:
        with tmpfs(tmp_path / "disk", size_kib=256) as disk:
            log = disk / "logs" / "stdout.log"
            log.parent.mkdir()
            log.write_text("token=hf_s3cr3t_value_123\n" + "x" * (3 * PAGE))
            fill(disk)
            (line,) = mask_logs(disk)
            assert line == (f"cannot write {log}: {FULL} (the log was removed: its secret values could not be "
                            "masked)")
            assert not log.exists() and leftovers(disk) == []
    finally:
        forget_secrets()
