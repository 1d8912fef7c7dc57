"""scripted_run.py's ``fill-disk:LEAVE_KIB[:PAD_ROWS]`` fault: once the run's tracker is written, its disk fills
up as a training job's checkpoints would fill it, leaving LEAVE_KIB free on the filesystem of its work dir;
PAD_ROWS repeats each mini-batch row, so the tracker outgrows the verdict's own files.

For the full-disk tests: what the harness writes after such a run must never leave a partial file looking
complete, and the verdict must still reach the console.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path


def _pad(work_dir: Path, copies: int) -> None:
    (tracker,) = work_dir.glob("*/logs/exp_tracking/tracker.jsonl")
    lines = tracker.read_text().splitlines(keepends=True)
    padded = [line * (copies if line.startswith('{"train_metrics/') else 1) for line in lines]
    padding = tracker.with_name("tracker.jsonl.padding")
    padding.write_text("".join(padded))
    padding.replace(tracker)  # whole, as the harness's live follower expects of a log


def _fill(work_dir: Path, leave_bytes: int) -> None:
    stats = os.statvfs(work_dir)
    want = max(0, stats.f_bavail * stats.f_frsize - leave_bytes)
    chunk = memoryview(b"\0" * (1 << 20))
    fd = os.open(work_dir / "checkpoint.bin", os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        while want > 0:
            try:
                want -= os.write(fd, chunk[:want])
            except OSError as exc:
                if exc.errno != errno.ENOSPC:
                    raise
                break
    finally:
        os.close(fd)


def fill_disk(work_dir: Path, arg: str) -> None:
    """The ``fill-disk:LEAVE_KIB[:PAD_ROWS]`` fault of scripted_run.py, once its tracker is written."""
    leave_kib, _, pad_rows = arg.partition(":")
    if pad_rows and int(pad_rows) > 1:
        _pad(work_dir, int(pad_rows))
    _fill(work_dir, int(leave_kib or 0) * 1024)
