"""The process table read from /proc, with real processes: a session's tree includes a grandchild that left
the session (as tiny-mopd's teacher servers do) and nothing outside it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from autotest.run.proctable import descendants, session_members, session_tree
from tests import waits


def test_a_session_tree_holds_its_members_and_a_grandchild_that_left_the_session(tmp_path: Path) -> None:
    pid_file = tmp_path / "grandchild.pid"
    run = subprocess.Popen([sys.executable, "-c", f"""
import subprocess, sys, time
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"], start_new_session=True)
open({str(pid_file)!r}, "w").write(str(child.pid))
time.sleep(600)
"""], start_new_session=True, stdin=subprocess.DEVNULL)
    bystander = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"], start_new_session=True)
    grandchild = None
    try:
        waits.until(lambda: pid_file.exists() and pid_file.read_text(), 30, proc=run,
                    what="the run never started its child")
        grandchild = int(pid_file.read_text())
        tree = session_tree(run.pid)
        assert set(tree) == {run.pid, grandchild}
        assert session_members(run.pid) == [run.pid]  # the grandchild is in a session of its own
        assert tree[grandchild] == descendants(run.pid)[grandchild]  # the same start time: the same process
        assert bystander.pid not in tree and os.getpid() not in tree
    finally:
        for proc in (run, bystander):
            proc.kill()
            proc.wait()
        if grandchild is not None:
            os.kill(grandchild, 9)
