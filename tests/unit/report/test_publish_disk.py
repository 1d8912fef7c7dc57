"""Publishing on a full or read-only disk (real tmpfs mounts): the verdict is never lost to a traceback, no
file is left half-written, and what could not be written is named, in one line each."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from autotest.inputs.baseline import load_baseline
from autotest.readers.reading import read_trace
from autotest.judge.verdict import compare
from autotest.report.publish import publish
from tests.filesystems import PAGE, fill, leftovers, read_only, tmpfs
from tests.helpers import ROOT
from tests.unit.judge.test_checks import mopd_tracker

FULL = "[Errno 28] No space left on device; free space on that disk or write elsewhere"


@pytest.fixture
def comparison(tmp_path: Path):
    baseline = load_baseline(ROOT / "baselines" / "mopd-qwen3-vl-2b.yaml")
    return compare(baseline, read_trace(mopd_tracker(tmp_path)))


def test_a_full_disk_writes_nothing_and_names_each_file_it_could_not_write(tmp_path: Path, comparison,
                                                                           monkeypatch) -> None:
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(tmp_path / "summary.md"))  # on another disk, as in CI
    with tmpfs(tmp_path / "disk", size_kib=256) as disk:
        out = disk / "run"
        out.mkdir()
        fill(disk)
        published = publish(comparison, out, lost=["cannot write earlier/tracker.jsonl"])
        unsaved = published.unsaved
        assert published.results_json is None and published.report_md is None
        plot = next(iter(sorted((out / "plots").glob("*")) or [None]), None)
        assert plot is None  # not one picture was written either
        assert unsaved[0] == "cannot write earlier/tracker.jsonl"
        assert unsaved[1].startswith(f"cannot write {out / 'plots'}/") and unsaved[1].endswith(FULL)
        assert unsaved[2] == f"cannot write {out / 'results.json'}: {FULL}"
        assert sorted(p.name for p in out.rglob("*")) == ["plots"] and leftovers(out) == []
    summary = (tmp_path / "summary.md").read_text()  # the verdict still reaches the CI page
    assert "### mopd-qwen3-vl-2b: " in summary and f"- not saved: cannot write {out / 'results.json'}: {FULL}" in summary


def test_pictures_that_find_no_room_leave_the_verdict_files_whole(tmp_path: Path, comparison, monkeypatch) -> None:
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    with tmpfs(tmp_path / "disk", size_kib=512) as disk:
        out = disk / "run"
        out.mkdir()
        fill(disk, leave_bytes=48 * PAGE)  # room for results.json and report.md, not for seven plots
        published = publish(comparison, out)
        assert published.report_md is not None and published.plots == {}
        (line,) = published.unsaved
        assert line.startswith(f"cannot write {out / 'plots'}/") and line.endswith(FULL)
        data = json.loads((out / "results.json").read_text())
        assert data["context"]["plots_error"] == f"plots not drawn: {line}"
        assert f"- plots not drawn: {line}" in (out / "report.md").read_text()
        assert leftovers(out) == []


def test_a_step_summary_on_a_full_disk_is_cut_back_and_named(tmp_path: Path, comparison, monkeypatch) -> None:
    with tmpfs(tmp_path / "disk", size_kib=256) as disk:
        summary = disk / "summary.md"
        earlier = "## an earlier step\n" + "x" * (PAGE - 20) + "\n"  # the page is full: any append needs another
        summary.write_text(earlier)
        fill(disk, leave_bytes=0)
        monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
        published = publish(comparison, tmp_path / "out", with_plots=False)
        assert not published.step_summary_written
        assert published.unsaved == (f"step summary: cannot write {summary}: {FULL}",)
        assert summary.read_text() == earlier
    assert json.loads((tmp_path / "out" / "results.json").read_text())["status"] == comparison.verdict.status


def test_a_step_summary_on_a_read_only_disk_is_named(tmp_path: Path, comparison, monkeypatch) -> None:
    with tmpfs(tmp_path / "disk", size_kib=256) as disk:
        (disk / "summary.md").write_text("kept\n")
        read_only(disk)
        monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(disk / "summary.md"))
        assert publish(comparison, tmp_path / "out", with_plots=False).unsaved == (f"step summary: cannot write {disk / 'summary.md.lock'}: [Errno 30] Read-only file "
                           "system; the filesystem is read-only; write elsewhere",)
        assert (disk / "summary.md").read_text() == "kept\n"
    assert (tmp_path / "out" / "report.md").is_file()
