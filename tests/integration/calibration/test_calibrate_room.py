"""Calibration's N runs need N runs' room on the results disk: refused in one line before the first run."""

from __future__ import annotations

from pathlib import Path

from autotest.cli import main
from tests.filesystems import tmpfs
from tests.helpers import DATA


def test_calibrate_without_room_for_its_runs_is_one_line_and_runs_nothing(tmp_path: Path, capsys,
                                                                          monkeypatch) -> None:
    monkeypatch.setenv("RL_AUTOTEST_MIN_FREE_MIB", "1")
    with tmpfs(tmp_path / "disk", size_kib=2048) as disk:
        code = main(["calibrate", str(DATA / "cases" / "scripted.yaml"), "--runs", "3", "--allow-dirty",
                     "--results-dir", str(disk), "--baselines-dir", str(tmp_path / "baselines")])
        assert list(disk.iterdir()) == []
    captured = capsys.readouterr()
    assert code == 2 and "Traceback" not in captured.out + captured.err
    assert captured.err.startswith(f"rl-autotest: error: preflight: results folder: {disk}: only 2.0 MiB free on its "
                                   "disk, below the 3 MiB needed; pass --results-dir")
    assert captured.err.count("\n") == 1
