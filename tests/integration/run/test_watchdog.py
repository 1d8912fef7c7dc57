"""The watchdog as its own program, with real processes: it enforces the deadline while the harness is alive
but stuck, leaves a run alone once told ``done``, and stops a child that left the session."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from autotest.run.proctable import alive_as_recorded, descendants, session_members
from tests.helpers import ROOT
from tests import waits


def session(code: str) -> subprocess.Popen:
    """A Python process in a session of its own (as the launcher starts a run)."""
    return subprocess.Popen([sys.executable, "-c", code], start_new_session=True, stdin=subprocess.DEVNULL)


def watchdog(sid: int, deadline_s: float, log: Path) -> subprocess.Popen:
    """The watchdog of session ``sid``, its stdin held by this test (the harness); output to ``log``."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    with log.open("wb") as out:  # the child keeps its own copy of the descriptor
        return subprocess.Popen([sys.executable, "-m", "autotest.run.watchdog", "--session", str(sid), "--harness-pid",
                                 str(os.getpid()), "--deadline-s", str(deadline_s), "--grace-s", "1"],
                                stdin=subprocess.PIPE, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
                                env=env)


def wait_for(condition, timeout_s: float, **watched) -> bool:
    """``condition`` came true within ``timeout_s`` of the watched processes' own time (tests/waits.py)."""
    try:
        waits.until(condition, timeout_s, **watched)
    except AssertionError:
        return False
    return True


def test_a_stuck_harness_does_not_stop_the_case_timeout(tmp_path: Path) -> None:
    # the harness (this test) stays alive holding the pipe; the run's deadline passes
    run = session("import time; time.sleep(600)")
    guard = watchdog(run.pid, deadline_s=1.0, log=tmp_path / "watchdog.log")
    try:
        # stdin stays open: the harness is alive. The run sleeps 600 s and the watchdog too until it acts, so these
        # waits (own time: wall time for a sleeper) end only if the watchdog stops the run at its 1 s deadline
        waits.wait(guard, 30)
        out = (tmp_path / "watchdog.log").read_bytes()
        assert waits.wait(run, 10) is not None and not session_members(run.pid)
        assert b"outlived its timeout" in out and b"stopped" in out, out
        assert guard.returncode == 0
    finally:
        run.kill()
        guard.kill()
        guard.stdin.close()
        run.wait()
        guard.wait()


def test_done_leaves_the_run_alone(tmp_path: Path) -> None:
    run = session("import time; time.sleep(600)")
    guard = watchdog(run.pid, deadline_s=600.0, log=tmp_path / "watchdog.log")
    try:
        waits.communicate(guard, 30, b"done\n")
        assert guard.returncode == 0 and (tmp_path / "watchdog.log").read_bytes() == b""
        assert run.poll() is None  # still running: the launcher cleans up its own run
    finally:
        run.kill()
        run.wait()


def test_a_grandchild_that_left_the_session_is_stopped_with_it(tmp_path: Path) -> None:
    # as tiny-mopd's teacher servers: a child in a session of its own, whose parent then exits
    pid_file = tmp_path / "grandchild.pid"
    run = session(f"""
import subprocess, sys, time
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"], start_new_session=True)
open({str(pid_file)!r}, "w").write(str(child.pid))
time.sleep(600)
""")
    assert wait_for(lambda: pid_file.exists() and pid_file.read_text() != "", 30, proc=run)
    grandchild = int(pid_file.read_text())
    recorded = {grandchild: descendants(run.pid)[grandchild]}
    guard = watchdog(run.pid, deadline_s=600.0, log=tmp_path / "watchdog.log")
    try:
        time.sleep(1.0)  # the watchdog records the session's descendants while the chain exists
        guard.stdin.close()  # the harness is gone: no "done"
        waits.wait(guard, 30)
        out = (tmp_path / "watchdog.log").read_bytes()
        assert b"is gone: stopping session" in out, out
        waits.wait(run, 10)
        assert wait_for(lambda: not alive_as_recorded(recorded), 10, pids=lambda: alive_as_recorded(recorded)), \
            "the grandchild outlived its run"
    finally:
        for pid in alive_as_recorded(recorded):
            os.kill(pid, 9)
        run.kill()
        guard.kill()
        run.wait()
        guard.wait()
