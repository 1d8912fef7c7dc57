"""A history that cannot be created on a full disk is one line and leaves no 0-byte database behind."""

from __future__ import annotations

from pathlib import Path

import pytest

from autotest.errors import UsageError
from autotest.history.database import sqlite_url
from autotest.history.store import HistoryStore
from tests.filesystems import fill, leftovers, tmpfs


def test_a_new_history_on_a_full_disk_leaves_no_empty_file(tmp_path: Path) -> None:
    with tmpfs(tmp_path / "disk", size_kib=64) as disk:
        fill(disk)
        with pytest.raises(UsageError) as caught:
            HistoryStore.open(sqlite_url(disk / "history.sqlite"))
        assert "\n" not in str(caught.value)
        assert not (disk / "history.sqlite").exists() and not (disk / "history.sqlite-journal").exists()
        assert leftovers(disk) == []


def test_an_existing_history_is_kept_when_a_write_fails(tmp_path: Path) -> None:
    with tmpfs(tmp_path / "disk", size_kib=1024) as disk:
        url = sqlite_url(disk / "history.sqlite")
        HistoryStore.open(url).close()
        size = (disk / "history.sqlite").stat().st_size
        assert size > 0
        fill(disk)
        with pytest.raises(UsageError, match="database or disk is full"):
            HistoryStore.open(url)  # its lock needs a journal: the disk refuses it, the file stays as it was
        assert (disk / "history.sqlite").stat().st_size == size
