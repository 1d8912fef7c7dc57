"""A verdict survives a full or read-only results disk (real tmpfs mounts, real runs).

A read-only results root stops the run at preflight in one line; a run that fills its disk still prints
its verdict in one line naming the file that could not be written, exit 2; no partial file is left looking
complete (a tracker copy that found no room is removed, results.json is whole or absent).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from autotest.errors import UsageError
from autotest.inputs.case import load_case
from autotest.pipeline import JudgeOptions, LaunchOptions, PublishOptions, RunOptions, run_case
from tests.filesystems import leftovers, read_only, tmpfs
from tests.helpers import DATA, ROOT
from tests import waits

RL_AUTOTEST = [sys.executable, "-m", "autotest.cli"]
#: the scripted run; its fill-disk:LEAVE_KIB[:PAD_ROWS] fault fills its disk once its tracker is written
CASE = DATA / "cases" / "scripted.yaml"
FULL = r"\[Errno 28\] No space left on device; free space on that disk or write elsewhere"
#: a verdict says what its gates could have seen (a PASS) and what it cost
CAUGHT = r"( — (could have caught: [^—]*|cost [^—]*))?"


def _cli(*args: str, env: dict[str, str] | None = None, timeout_s: float = 300) -> subprocess.CompletedProcess:
    environ = {**os.environ, "PYTHONPATH": str(ROOT), **(env or {})}
    environ.pop("GITHUB_STEP_SUMMARY", None)
    return waits.run([*RL_AUTOTEST, *args], capture_output=True, text=True, env=environ, cwd=ROOT,
                     limit_s=timeout_s)


def test_a_read_only_results_root_is_one_preflight_line_and_nothing_launched(tmp_path: Path) -> None:
    with tmpfs(tmp_path / "disk") as disk:
        (disk / "results").mkdir()
        read_only(disk)
        done = _cli("run", str(CASE), "--yes", "--no-history", "--results-dir", str(disk / "results"))
        assert list((disk / "results").iterdir()) == []
    assert done.returncode == 2 and "Traceback" not in done.stdout + done.stderr
    assert done.stderr == (f"rl-autotest: error: preflight: results folder: {disk / 'results'}: cannot write in "
                           f"{disk / 'results'}: [Errno 30] Read-only file system; pass --results-dir (or set "
                           "$RL_AUTOTEST_RESULTS) to a folder on a writable disk with room ($RL_AUTOTEST_MIN_FREE_MIB "
                           "sets the room a run needs); nothing was launched\n")
    assert "[scripted] step" not in done.stdout


def test_a_disk_without_the_minimum_room_is_one_preflight_line(tmp_path: Path) -> None:
    with tmpfs(tmp_path / "disk", size_kib=2048) as disk:
        done = _cli("run", str(CASE), "--yes", "--no-history", "--results-dir", str(disk),
                    env={"RL_AUTOTEST_MIN_FREE_MIB": "4"})
        assert list(disk.iterdir()) == []
    assert done.returncode == 2 and "Traceback" not in done.stdout + done.stderr
    assert re.fullmatch(rf"rl-autotest: error: preflight: results folder: {disk}: only 2\.0 MiB free on its disk, "
                        r"below the 4 MiB needed; pass --results-dir .* nothing was launched\n", done.stderr)


def test_a_run_that_fills_its_disk_still_prints_its_verdict_in_one_line(tmp_path: Path) -> None:
    with tmpfs(tmp_path / "disk", size_kib=1024) as disk:
        done = _cli("run", str(CASE), "--fault", "fill-disk:0", "--yes", "--no-history", "--results-dir", str(disk),
                    env={"RL_AUTOTEST_MIN_FREE_MIB": "0"})
        (folder,) = (disk / "scripted").iterdir()
        assert not (folder / "tracker.jsonl").exists() and not (folder / "results.json").exists()
        assert not (folder / "report.md").exists() and leftovers(folder) == []
        assert (folder / "work").is_dir()  # the run's own log, where it wrote it
    assert done.returncode == 2 and "Traceback" not in done.stdout + done.stderr, done.stderr
    # the first file the full disk refused (the launch record, once the run ended), and how many more
    assert re.fullmatch(rf"scripted: PASS{CAUGHT} — results not saved: cannot write {folder}/logs/launch\.json: {FULL} "
                        r"\(and \d+ more\)", done.stdout.splitlines()[-1]), done.stdout


def test_a_tracker_copy_without_room_is_removed_and_the_verdict_files_record_it(tmp_path: Path) -> None:
    with tmpfs(tmp_path / "disk", size_kib=1024) as disk:
        # a ~600 KB tracker, then 128 KiB left on the disk
        run = run_case(load_case(CASE), RunOptions(
            LaunchOptions(results_root=disk, fault="fill-disk:128:2000", env={"RL_AUTOTEST_MIN_FREE_MIB": "0"}),
            publish=PublishOptions(with_plots=False, step_summary=False)))
        folder = run.results_dir
        assert run.status == "PASS"  # judged from the run's own log
        (line,) = run.unsaved
        assert re.fullmatch(rf"cannot write {folder}/tracker\.jsonl: {FULL}", line)
        assert not (folder / "tracker.jsonl").exists() and leftovers(folder) == []
        data = json.loads((folder / "results.json").read_text())
        assert data["status"] == "PASS" and data["context"]["unsaved"] == [line]
        assert f"## Not saved\n\n- {line}" in (folder / "report.md").read_text()
        assert re.fullmatch(rf"scripted: PASS{CAUGHT} — results not saved: {re.escape(line)} "
                            rf"\(report: {folder}/report\.md\)", run.summary_line())


@pytest.mark.slow
def test_tiny_grpo_into_a_nearly_full_disk_prints_its_verdict_and_leaves_no_partial_tracker(tmp_path: Path) -> None:
    """The real embedded workload: its 45 steps fit (~112 KiB with its logs), the tracker's copy (~90 KiB)
    does not."""
    # without its resume phase: the checkpoint (1.2 MB) would fill this disk at step 20, before the point of the test
    import yaml

    from autotest.inputs.case import CASES_DIR, REPO_ROOT

    data = yaml.safe_load((CASES_DIR / "tiny-grpo.yaml").read_text())
    data.pop("resume")
    data["baseline"] = str(REPO_ROOT / "baselines" / "tiny-grpo.yaml")
    (tmp_path / "tiny-grpo.yaml").write_text(yaml.safe_dump(data))
    with tmpfs(tmp_path / "disk", size_kib=160) as disk:
        done = _cli("run", str(tmp_path / "tiny-grpo.yaml"), "--yes", "--no-history", "--results-dir", str(disk),
                    env={"RL_AUTOTEST_MIN_FREE_MIB": "0"}, timeout_s=900)  # ~30 s alone, minutes on a busy node
        (folder,) = (disk / "tiny-grpo").iterdir()
        (log,) = (folder / "work").glob("*/logs/exp_tracking/tracker.jsonl")
        assert max(json.loads(row)["step"] for row in log.read_text().splitlines()) == 45  # the run finished
        assert not (folder / "tracker.jsonl").exists() and leftovers(folder) == []
        if (folder / "results.json").exists():  # whole, or absent
            json.loads((folder / "results.json").read_text())
    assert done.returncode == 2 and "Traceback" not in done.stdout + done.stderr, done.stderr
    assert re.fullmatch(rf"tiny-grpo: (PASS|FAIL)( — [^—]*)? — results not saved: cannot write {folder}/tracker\.jsonl: "
                        rf"{FULL}( \(and \d+ more\))?( \(report: .*\))?", done.stdout.splitlines()[-1]), done.stdout


SUITE = f"""
from autotest.errors import UsageError
from autotest.inputs.case import load_case
from autotest.plugin import assert_case_outcome

def test_scripted(run_accuracy_case):
    assert_case_outcome(run_accuracy_case(load_case({str(CASE)!r}), fault="fill-disk:0"), False)
"""


def test_under_pytest_a_full_or_read_only_disk_fails_the_case_in_one_line(pytester, monkeypatch) -> None:
    monkeypatch.setenv("RL_AUTOTEST_MIN_FREE_MIB", "0")
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    pytester.makepyfile(test_suite=SUITE)
    with tmpfs(pytester.path / "disk", size_kib=1024) as disk:
        full = pytester.runpytest_subprocess("--results-dir", str(disk), "--no-history", "-p", "no:cacheprovider")
        read_only(disk)
        refused = pytester.runpytest_subprocess("--results-dir", str(disk), "--no-history", "-p", "no:cacheprovider")
    full.assert_outcomes(failed=1)
    full.stdout.fnmatch_lines(["*scripted: PASS*— results not saved: cannot write *launch.json: [[]Errno 28[]] No space "
                               "left on device; free space on that disk or write elsewhere (and * more)"])
    refused.assert_outcomes(failed=1)
    refused.stdout.fnmatch_lines(["*scripted: preflight: results folder: *: [[]Errno 30[]] Read-only file system; pass "
                                  "--results-dir*nothing was launched"])
    assert "Traceback" not in full.stdout.str() + refused.stdout.str()


def test_replicates_need_room_for_every_seed_before_any_starts(tmp_path: Path) -> None:
    with tmpfs(tmp_path / "disk", size_kib=2048) as disk:
        with pytest.raises(UsageError) as caught:
            run_case(load_case(CASE), RunOptions(
                LaunchOptions(results_root=disk, env={"RL_AUTOTEST_MIN_FREE_MIB": "1"}), JudgeOptions(replicates=3)))
        assert list(disk.iterdir()) == []
    assert str(caught.value).startswith(f"preflight: results folder: {disk}: only 2.0 MiB free on its disk, below the "
                                        "3 MiB needed; ")
