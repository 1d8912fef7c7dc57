"""The batch recalibration script ``history fleet --batch-out`` writes, run for real: recorded environment values
(a base image, package versions from each run's preflight.json) that try to run commands end up as escaped
comment text, and the script runs only ``rl-autotest calibrate`` (a stub on PATH that logs its arguments)."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
from pathlib import Path

from autotest.history.database import sqlite_url
from autotest.history.store import ingest
from tests.helpers import run_cli
from tests.unit.history.builders import REWARDS, write_results_folder

PASSING, FAILING = {REWARDS: 0.05}, {REWARDS: 0.5}


def hostile_values(sandbox: Path) -> list[str]:
    """Each would create a file named X-<n> in ``sandbox`` if the shell ran it."""
    x = [shlex.quote(str(sandbox / f"X-{n}")) for n in range(6)]
    return [f"img$(touch {x[0]})", f"img`touch {x[1]}`", f"img; touch {x[2]}", f"img\ntouch {x[3]}\n#",
            f"img'\"; touch {x[4]}; echo \"'", f"img\r\ntouch {x[5]}"]


def test_recorded_values_never_run_in_the_batch_script(tmp_path: Path, capsys) -> None:
    sandbox = tmp_path / "sandbox"
    sandbox.mkdir()
    new_image = " ".join(hostile_values(sandbox)) + "\x1b]0;title\x07\x1b[2J"
    root = tmp_path / "results"
    for case in ("c1", "c2"):
        for n in range(1, 4):
            folder = write_results_folder(root, case, n, FAILING if n == 3 else PASSING)
            preflight = json.loads((folder / "preflight.json").read_text())
            preflight["environment"]["image"] = new_image if n == 3 else "img:1"
            preflight["environment"]["packages"] = {"torch": "2.5.0$(touch X-torch)" if n == 3 else "2.4.0",
                                                    "numpy": "2.1.0"}
            (folder / "preflight.json").write_text(json.dumps(preflight))
    ingest([root], sqlite_url(root / "history.sqlite"))

    assert run_cli("history", "fleet", "--results-dir", str(root), "--batch-out", str(tmp_path / "batch")) == 1
    printed = capsys.readouterr().out
    assert "\x1b" not in printed and "\\ntouch" in printed  # the recorded image, escaped on the console too
    script = next((tmp_path / "batch").glob("fleet-*/recalibrate.sh"))
    text = script.read_text()
    assert [line for line in text.splitlines() if not line.startswith("#")] == [
        "set -e", "rl-autotest calibrate c1 --runs 3", "rl-autotest calibrate c2 --runs 3"]

    assert subprocess.run(["bash", "-n", str(script)], capture_output=True).returncode == 0
    stubs = tmp_path / "bin"
    stubs.mkdir()
    log = tmp_path / "calls.log"
    (stubs / "rl-autotest").write_text(f'#!/bin/sh\necho "$*" >> {shlex.quote(str(log))}\n')
    (stubs / "rl-autotest").chmod(0o755)
    env = {**os.environ, "PATH": f"{stubs}{os.pathsep}{os.environ['PATH']}"}
    for shell in ("sh", "bash"):
        done = subprocess.run([shell, str(script)], cwd=sandbox, env=env, capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
    assert sorted(p.name for p in sandbox.iterdir()) == []  # no X-<n>, no X-torch: nothing injected ran
    assert log.read_text().splitlines() == ["calibrate c1 --runs 3", "calibrate c2 --runs 3"] * 2
