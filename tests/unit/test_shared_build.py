"""tests/shared_build.py: an artefact is built once per session, by one process, and a failed build is redone."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.helpers import ROOT
from tests.shared_build import content_key, session_root, shared_build
from tests import waits


class _Factory:
    """The one method of pytest's TempPathFactory that shared_build uses, pointed at a folder of ours."""

    def __init__(self, base: Path) -> None:
        self.base = base

    def getbasetemp(self) -> Path:
        return self.base


def test_the_second_ask_reads_what_the_first_built(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PYTEST_XDIST_WORKER", raising=False)
    calls = []

    def build(folder: Path) -> None:
        calls.append(folder)
        (folder / "out.txt").write_text("made")

    first = shared_build(_Factory(tmp_path), "thing", "k1", build)
    second = shared_build(_Factory(tmp_path), "thing", "k1", build)
    assert first == second == tmp_path / "shared-builds" / "thing-k1"
    assert calls == [first] and (first / "out.txt").read_text() == "made"
    # another key is another artefact
    assert shared_build(_Factory(tmp_path), "thing", "k2", build) != first and len(calls) == 2


def test_xdist_workers_share_the_parent_of_their_basetemp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYTEST_XDIST_WORKER", "gw1")
    assert session_root(_Factory(tmp_path / "popen-gw1")) == tmp_path / "shared-builds"


def test_a_failed_build_leaves_nothing_and_the_next_ask_builds_again(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PYTEST_XDIST_WORKER", raising=False)

    def broken(folder: Path) -> None:
        (folder / "half.txt").write_text("half")
        raise RuntimeError("build broke")

    with pytest.raises(RuntimeError, match="build broke"):
        shared_build(_Factory(tmp_path), "thing", "k", broken)
    assert not (tmp_path / "shared-builds" / "thing-k").exists()
    folder = shared_build(_Factory(tmp_path), "thing", "k", lambda f: (f / "ok.txt").write_text("ok"))
    assert sorted(p.name for p in folder.iterdir()) == [".built", "ok.txt"]


def test_content_key_follows_parameters_and_file_text(tmp_path: Path) -> None:
    source = tmp_path / "scenarios.py"
    source.write_text("A = 1\n")
    key = content_key("tensor", ("x",), files=(source,))
    assert key == content_key("tensor", ("x",), files=(source,)) and len(key) == 16
    assert key != content_key("statistics", ("x",), files=(source,))
    source.write_text("A = 2\n")
    assert key != content_key("tensor", ("x",), files=(source,))


WORKER = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    sys.path.insert(0, sys.argv[1])
    from tests.shared_build import shared_build

    class Factory:
        def getbasetemp(self):
            return Path(sys.argv[2])

    def build(folder):
        with open(sys.argv[3], "a") as log:
            log.write(sys.argv[4] + "\\n")
        time.sleep(1.0)  # long enough for the other worker to reach the lock while this one builds
        (folder / "out.txt").write_text("made by " + sys.argv[4])

    print((shared_build(Factory(), "dumps", "k", build) / "out.txt").read_text())
""")


def test_two_worker_processes_build_once_and_both_read_it(tmp_path: Path) -> None:
    script = tmp_path / "worker.py"
    script.write_text(WORKER)
    log = tmp_path / "builds.log"
    env = {**os.environ, "PYTEST_XDIST_WORKER": "gw"}
    procs = [subprocess.Popen([sys.executable, str(script), str(ROOT), str(tmp_path / f"popen-gw{i}"), str(log),
                               f"gw{i}"], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for i in (0, 1)]
    outs = [waits.communicate(proc, 120) for proc in procs]
    assert [proc.returncode for proc in procs] == [0, 0], outs
    builders = log.read_text().split()
    assert len(builders) == 1  # one process built it
    assert [out.strip() for out, _ in outs] == [f"made by {builders[0]}"] * 2  # both read that one
