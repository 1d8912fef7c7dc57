from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.helpers import ROOT
from tests.unit.judge.test_checks import mopd_tracker
from tests import waits

MOPD = ROOT / "baselines" / "mopd-qwen3-vl-2b.yaml"


def run(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return waits.run([sys.executable, "-m", "autotest.cli", *args], capture_output=True, text=True,
                     cwd=cwd, limit_s=120)


def test_compare_pass_fail_error_exit_codes(tmp_path):
    ok = run("compare", "--baseline", str(MOPD), "--current", str(mopd_tracker(tmp_path / "a")), "--no-plots",
             "--out", str(tmp_path / "out"))
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert ok.stdout.strip().splitlines()[-1].startswith("mopd-qwen3-vl-2b: PASS — could have caught: ")
    assert (tmp_path / "out" / "report.md").exists()
    bad = run("compare", "--baseline", str(MOPD), "--current",
              str(mopd_tracker(tmp_path / "b", nudge={("distillation/reduced_distillation_kl", 15): 0.05})))
    assert bad.returncode == 1
    assert "FAIL  distillation/reduced_distillation_kl[points]: distill_kl" in bad.stdout
    assert "next step: distillation KL breached with healthy rewards" in bad.stdout
    missing = run("compare", "--baseline", str(MOPD), "--current",
                  str(mopd_tracker(tmp_path / "c", drop="distillation/reduced_distillation_kl")))
    assert missing.returncode == 2 and "ERROR distillation/reduced_distillation_kl[points]" in missing.stdout


def test_bad_inputs_give_one_line_and_exit_2(tmp_path):
    (tmp_path / "bad.jsonl").write_text('{"step": 1, "a": 1}\n{oops}\n{"step": 3, "a": 1}\n')
    cases = [
        (["--current", str(tmp_path / "nope.jsonl")], "nope.jsonl: no such file or directory"),
        (["--current", str(tmp_path / "bad.jsonl")], "bad.jsonl:2: malformed JSON"),
    ]
    for extra, expected in cases:
        result = run("compare", "--baseline", str(MOPD), *extra)
        assert result.returncode == 2
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("rl-autotest: error: ") and expected in lines[0]
        assert "Traceback" not in result.stderr
    usage = run("compare", "--baseline", str(MOPD))
    assert usage.returncode == 2 and "--current" in usage.stderr


def test_a_reader_that_leaves_early_gets_no_traceback() -> None:
    # `rl-autotest cases | head -1`: the pipe closes before the listing is written
    read_fd, write_fd = os.pipe()
    os.close(read_fd)
    try:
        done = waits.run([sys.executable, "-m", "autotest.cli", "cases"], stdout=write_fd,
                         stderr=subprocess.PIPE, text=True, cwd=ROOT, limit_s=120)
    finally:
        os.close(write_fd)
    assert done.returncode == 2 and "Traceback" not in done.stderr and "Exception" not in done.stderr, done.stderr
