"""The results folder's preflight: writable (a read-only mount, not permission bits) and with room for the
run, else one line naming the folder and what to do, before anything is launched."""

from __future__ import annotations

from pathlib import Path

import pytest

from autotest.errors import UsageError
from autotest.run.results_dir import DEFAULT_MIN_FREE_MIB, MIN_FREE_ENV, min_free_bytes, require_room
from tests.filesystems import fill, read_only, tmpfs

MIB = 1024 * 1024
ADVICE = ("pass --results-dir (or set $RL_AUTOTEST_RESULTS) to a folder on a writable disk with room "
          "($RL_AUTOTEST_MIN_FREE_MIB sets the room a run needs); nothing was launched")


def test_a_run_needs_64_mib_unless_the_environment_says_otherwise() -> None:
    assert DEFAULT_MIN_FREE_MIB == 64
    assert min_free_bytes({}) == 64 * MIB
    assert min_free_bytes({MIN_FREE_ENV: "0"}) == 0
    assert min_free_bytes({MIN_FREE_ENV: " 0.5 "}) == MIB // 2
    assert min_free_bytes({MIN_FREE_ENV: ""}) == 64 * MIB


@pytest.mark.parametrize("raw", ["lots", "-1", "nan", "inf", "64MiB"])
def test_a_bad_minimum_is_one_line_naming_the_variable(raw: str) -> None:
    with pytest.raises(UsageError) as caught:
        min_free_bytes({MIN_FREE_ENV: raw})
    assert str(caught.value) == (f"$RL_AUTOTEST_MIN_FREE_MIB: {raw!r} is not a size; give the MiB of free space a "
                                 "run needs (default 64; 0 turns the check off)")


def test_a_read_only_results_root_stops_the_run_in_one_line(tmp_path: Path) -> None:
    with tmpfs(tmp_path / "disk", size_kib=1024) as disk:
        (disk / "results").mkdir()
        read_only(disk)
        with pytest.raises(UsageError) as caught:
            require_room(disk / "results", {MIN_FREE_ENV: "0"})
    assert str(caught.value) == (f"preflight: results folder: {disk / 'results'}: cannot write in "
                                 f"{disk / 'results'}: [Errno 30] Read-only file system; {ADVICE}")


def test_a_nearly_full_results_disk_stops_the_run_in_one_line(tmp_path: Path) -> None:
    with tmpfs(tmp_path / "disk", size_kib=1024) as disk:
        fill(disk, leave_bytes=MIB // 2)
        with pytest.raises(UsageError) as caught:
            require_room(disk / "results", {MIN_FREE_ENV: "1"})
        require_room(disk / "results", {MIN_FREE_ENV: "0.25"})  # room for one such run
        with pytest.raises(UsageError, match="only 0.5 MiB free on its disk, below the 0.75 MiB needed"):
            require_room(disk / "results", {MIN_FREE_ENV: "0.25"}, runs=3)  # three replicates need three times
        assert not (disk / "results").exists()  # the preflight created nothing
    assert str(caught.value) == (f"preflight: results folder: {disk / 'results'}: only 0.5 MiB free on its disk, "
                                 f"below the 1 MiB needed; {ADVICE}")
