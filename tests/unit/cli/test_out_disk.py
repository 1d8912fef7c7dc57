"""``compare --out`` where the verdict cannot be written (real tmpfs mounts): a read-only filesystem, a file,
``/dev/null`` are refused in one line before judging; a disk that fills up prints the verdict in one line
naming the file it could not write, exit 2, never a traceback."""

from __future__ import annotations

from pathlib import Path

import pytest

from autotest.cli import main
from tests.filesystems import fill, leftovers, read_only, tmpfs
from tests.helpers import ROOT
from tests.unit.judge.test_checks import mopd_tracker

BASELINE = str(ROOT / "baselines" / "mopd-qwen3-vl-2b.yaml")


def _compare(tmp_path: Path, out: Path, *more: str) -> int:
    return main(["compare", "--baseline", BASELINE, "--current", str(mopd_tracker(tmp_path)), "--out", str(out),
                 "--no-history", *more])


def _no_traceback(captured) -> None:
    assert "Traceback" not in captured.out + captured.err


def test_out_on_a_read_only_filesystem_is_refused_before_judging(tmp_path: Path, capsys, monkeypatch) -> None:
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    with tmpfs(tmp_path / "disk") as disk:
        read_only(disk)
        code = _compare(tmp_path, disk / "out")
    captured = capsys.readouterr()
    _no_traceback(captured)
    assert code == 2 and captured.out == ""
    assert captured.err == (f"rl-autotest: error: --out: {disk / 'out'}: cannot write in {disk}: [Errno 30] "
                            "Read-only file system; pass a folder on a writable disk\n")


@pytest.mark.parametrize("out", ["/dev/null", "a file"])
def test_out_that_is_not_a_folder_is_one_line(tmp_path: Path, capsys, out: str) -> None:
    path = Path(out) if out.startswith("/") else tmp_path / "report.html"
    if not path.exists():
        path.write_text("mine\n")
    assert _compare(tmp_path, path) == 2
    captured = capsys.readouterr()
    _no_traceback(captured)
    assert captured.err == f"rl-autotest: error: --out: {path} is not a directory; pass a folder\n"


def test_a_full_disk_prints_the_verdict_and_the_file_it_could_not_write(tmp_path: Path, capsys, monkeypatch) -> None:
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    with tmpfs(tmp_path / "disk", size_kib=256) as disk:
        fill(disk)
        code = _compare(tmp_path, disk / "out", "--no-plots")
        assert leftovers(disk) == [] and not (disk / "out" / "results.json").exists()
    captured = capsys.readouterr()
    _no_traceback(captured)
    assert code == 2
    last = captured.out.splitlines()[-1]
    assert last.startswith("mopd-qwen3-vl-2b: PASS") and last.endswith(
        f" — results not saved: cannot write {disk / 'out' / 'results.json'}: [Errno 28] No space left on device; "
        "free space on that disk or write elsewhere")
    assert "report:" not in captured.out
