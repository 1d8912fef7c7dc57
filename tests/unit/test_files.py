"""autotest.files on real full and read-only filesystems (small tmpfs mounts, see tests/filesystems.py):
every write is whole or absent, and a failure is one line naming the path and the error."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from autotest.errors import UsageError, WriteFailed
from autotest.files import append_text, copy_atomic, make_folder, require_writable, write_atomic, write_bytes_atomic
from tests.filesystems import PAGE, fill, free_bytes, leftovers, read_only, tmpfs

FULL = "[Errno 28] No space left on device; free space on that disk or write elsewhere"
READ_ONLY = "[Errno 30] Read-only file system; the filesystem is read-only; write elsewhere"


@pytest.fixture
def disk(tmp_path: Path):
    with tmpfs(tmp_path / "disk", size_kib=256) as mount:
        yield mount


def test_a_write_to_a_full_disk_is_one_line_and_leaves_nothing(disk: Path) -> None:
    fill(disk)
    with pytest.raises(WriteFailed) as caught:
        write_atomic(disk / "results.json", "{}" * 10_000)
    assert str(caught.value) == f"cannot write {disk / 'results.json'}: {FULL}"
    assert isinstance(caught.value, UsageError)  # the shells' one-line, exit-2 path
    assert not (disk / "results.json").exists() and leftovers(disk) == []


def test_a_write_that_runs_out_of_room_midway_keeps_the_previous_file_whole(disk: Path) -> None:
    write_atomic(disk / "report.md", "the previous report\n")
    fill(disk, leave_bytes=2 * PAGE)
    with pytest.raises(WriteFailed, match=r"report\.md: \[Errno 28\]"):
        write_atomic(disk / "report.md", "x" * (16 * PAGE))
    assert (disk / "report.md").read_text() == "the previous report\n"
    assert leftovers(disk) == [] and free_bytes(disk) == 2 * PAGE  # the partial temp file was removed


def test_a_write_to_a_read_only_disk_is_one_line(disk: Path) -> None:
    read_only(disk)
    with pytest.raises(WriteFailed) as caught:
        write_atomic(disk / "card.md", "card")
    assert str(caught.value) == f"cannot write {disk / 'card.md'}: {READ_ONLY}"


def test_a_folder_that_cannot_be_made_names_the_file_it_was_for(disk: Path) -> None:
    read_only(disk)
    with pytest.raises(WriteFailed) as caught:
        write_atomic(disk / "plots" / "reward.png", "png")
    assert str(caught.value) == f"cannot write {disk / 'plots' / 'reward.png'}: {READ_ONLY}"
    with pytest.raises(WriteFailed, match=rf"^cannot write {disk / 'work'}: \[Errno 30\]"):
        make_folder(disk / "work")


def test_a_copy_that_fails_midway_is_removed_not_left_looking_like_the_log(disk: Path, tmp_path: Path) -> None:
    source = tmp_path / "tracker.jsonl"
    source.write_text('{"step": 1, "reward": 0.5}\n' * 8000)  # ~220 KB: more than the room left
    fill(disk, leave_bytes=16 * PAGE)
    with pytest.raises(WriteFailed) as caught:
        copy_atomic(source, disk / "tracker.jsonl")
    assert str(caught.value) == f"cannot write {disk / 'tracker.jsonl'}: {FULL}"
    assert not (disk / "tracker.jsonl").exists() and leftovers(disk) == []
    assert free_bytes(disk) == 16 * PAGE


def test_a_copy_that_fits_is_whole(disk: Path, tmp_path: Path) -> None:
    source = tmp_path / "tracker.jsonl"
    source.write_text('{"step": 1}\n' * 100)
    assert copy_atomic(source, disk / "sub" / "tracker.jsonl").read_bytes() == source.read_bytes()
    assert leftovers(disk) == []


def test_a_failed_append_is_cut_back_to_the_previous_length(disk: Path) -> None:
    summary = disk / "step_summary.md"
    summary.write_text("## an earlier job's summary\n")
    fill(disk, leave_bytes=PAGE)
    with pytest.raises(WriteFailed) as caught:
        append_text(summary, "x" * (8 * PAGE))
    assert str(caught.value) == f"cannot write {summary}: {FULL}"
    assert summary.read_text() == "## an earlier job's summary\n"


def test_an_append_to_a_read_only_disk_is_one_line(disk: Path) -> None:
    (disk / "summary.md").write_text("kept\n")
    read_only(disk)
    with pytest.raises(WriteFailed, match=r"summary\.md: \[Errno 30\] Read-only file system"):
        append_text(disk / "summary.md", "more")
    assert (disk / "summary.md").read_text() == "kept\n"


def test_require_writable_refuses_a_read_only_disk_even_for_root(disk: Path) -> None:
    (disk / "results").mkdir()
    read_only(disk)
    with pytest.raises(UsageError) as caught:
        require_writable(disk / "results" / "new", "--out", advice="pass another folder")
    assert str(caught.value) == (f"--out: {disk / 'results' / 'new'}: cannot write in {disk / 'results'}: "
                                 "[Errno 30] Read-only file system; pass another folder")


def test_require_writable_refuses_a_disk_without_the_room_asked_for(disk: Path) -> None:
    fill(disk, leave_bytes=64 * 1024)
    with pytest.raises(UsageError) as caught:
        require_writable(disk / "results", "preflight: results folder", min_free_bytes=64 * 1024 * 1024,
                         advice="free space")
    assert str(caught.value) == (f"preflight: results folder: {disk / 'results'}: only 0.1 MiB free on its "
                                 "disk, below the 64 MiB needed; free space")
    require_writable(disk / "results", "--out", min_free_bytes=32 * 1024)  # enough room: no error
    assert sorted(p.name for p in disk.iterdir()) == ["filler.bin"]  # the check created nothing


@pytest.mark.parametrize("target", ["a file", "/dev/null"])
def test_require_writable_refuses_what_is_not_a_folder(tmp_path: Path, target: str) -> None:
    path = Path(target) if target.startswith("/") else tmp_path / "report.md"
    if not path.exists():
        path.write_text("not a folder")
    with pytest.raises(UsageError) as caught:
        require_writable(path, "--out")
    assert str(caught.value) == f"--out: {path} is not a directory; pass a folder"


@pytest.mark.parametrize("code, advice", [
    (errno.ENOSPC, "free space on that disk or write elsewhere"),
    (errno.EDQUOT, "free space under your quota or write elsewhere"),
    (errno.EROFS, "the filesystem is read-only; write elsewhere"),
    (errno.EACCES, "give this user write permission there or write elsewhere"),
    (errno.EPERM, "give this user write permission there or write elsewhere"),
    (errno.EIO, "write elsewhere"),
])
def test_each_write_error_says_what_to_do(code: int, advice: str) -> None:
    error = WriteFailed(Path("/r/results.json"), OSError(code, os.strerror(code)))
    assert str(error) == f"cannot write /r/results.json: [Errno {code}] {os.strerror(code)}; {advice}"


def test_a_written_file_gets_the_umask_s_mode_not_mkstemp_s_0600(tmp_path: Path) -> None:
    from autotest.files import new_file_mode

    old = os.umask(0o022)
    new_file_mode.cache_clear()
    try:
        assert new_file_mode() == 0o644
        write_atomic(tmp_path / "results.json", "{}")
    finally:
        os.umask(old)
        new_file_mode.cache_clear()
    assert (tmp_path / "results.json").stat().st_mode & 0o777 == 0o644


def test_a_write_whose_check_refuses_it_leaves_the_old_file_and_no_temp(tmp_path) -> None:
    target = tmp_path / "b.yaml"
    target.write_bytes(b"old\n")

    def refuse(path):
        assert path.read_bytes() == b"new\n" and path != target  # the check reads the written temp file
        raise UsageError(f"{path}: bad")

    with pytest.raises(UsageError, match=rf"^{target}: not written: the new file would not load \({target}: bad\); "
                                         "the file there is unchanged$"):
        write_bytes_atomic(target, b"new\n", check=refuse)
    assert target.read_bytes() == b"old\n" and [p.name for p in tmp_path.iterdir()] == ["b.yaml"]
    write_bytes_atomic(target, b"new\n", check=lambda path: None)
    assert target.read_bytes() == b"new\n"
