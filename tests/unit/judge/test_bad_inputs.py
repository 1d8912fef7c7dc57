"""Bad metric logs get one clear line naming the file and what to do; never a traceback."""

from __future__ import annotations

import gzip
import os
from pathlib import Path

import pytest

from autotest.errors import UsageError
from autotest.readers.reading import read_trace


def test_a_gzip_compressed_tracker_is_named_as_such(tmp_path: Path) -> None:
    path = tmp_path / "tracker.jsonl"
    path.write_bytes(gzip.compress(b'{"step": 1, "loss": 0.5}\n'))
    with pytest.raises(UsageError, match=rf"^{path}: metric log is not UTF-8 text: gzip-compressed; decompress"):
        read_trace(path)


def test_a_binary_tracker_is_named_as_such(tmp_path: Path) -> None:
    path = tmp_path / "tracker.jsonl"
    path.write_bytes(b'{"step": 1, "loss": 0.5}\n' + bytes(range(128, 256)) * 100)
    with pytest.raises(UsageError, match=rf"^{path}: metric log is not UTF-8 text: binary or not UTF-8"):
        read_trace(path)


def test_a_fifo_is_refused_without_blocking(tmp_path: Path) -> None:
    fifo = tmp_path / "tracker.jsonl"
    os.mkfifo(fifo)
    with pytest.raises(UsageError, match=rf"^{fifo}: not a regular file \(a FIFO, socket or device\)"):
        read_trace(fifo)


def test_dev_null_is_refused() -> None:
    with pytest.raises(UsageError, match=r"^/dev/null: not a regular file"):
        read_trace(Path("/dev/null"))
