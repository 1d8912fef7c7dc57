"""OwnClock and the tests' waits on real processes: a process made to wait for a CPU is credited less than the wall
time; a sleeping one all of it; a dead one ends a wait at once; a stuck one runs out of its own time."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from autotest.own_time import OwnClock
from tests import waits

SPIN = "import time\nend = time.monotonic() + {s}\nwhile time.monotonic() < end:\n    pass\n"


def test_a_process_that_waits_for_a_cpu_is_credited_less_than_the_wall_time() -> None:
    # twice as many spinners as CPUs: each waits about half its time, more on a busy machine, never less
    spinners = [subprocess.Popen([sys.executable, "-c", SPIN.format(s=3)]) for _ in range(2 * (os.cpu_count() or 1))]
    try:
        clock = OwnClock(spinners[0].pid)
        while spinners[0].poll() is None:
            clock.elapsed_s()
            time.sleep(0.2)
        assert clock.waited_s > 0 and clock.own_s < clock.wall_s, clock.describe()
    finally:
        for proc in spinners:
            proc.kill()
            proc.wait()


def test_a_sleeping_process_is_credited_its_wall_time() -> None:
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    try:
        clock = OwnClock(proc.pid)
        time.sleep(1.0)
        clock.elapsed_s()
        assert clock.own_s > 0.9 * clock.wall_s, clock.describe()  # a sleeper waits for no CPU
    finally:
        proc.kill()
        proc.wait()


def test_a_run_that_never_finishes_is_killed_at_its_own_time_limit() -> None:
    with pytest.raises(subprocess.TimeoutExpired) as info:
        waits.run([sys.executable, "-c", "import time; time.sleep(600)"], 1.0, capture_output=True)
    assert "of its own time" in str(info.value.__cause__)


def test_a_process_that_dies_ends_the_wait_at_once_with_its_exit() -> None:
    proc = subprocess.Popen([sys.executable, "-c", "raise SystemExit(3)"])
    with pytest.raises(AssertionError, match=rf"pid {proc.pid} exited with 3 while waited on. the file never came"):
        waits.until(lambda: False, 3600, proc=proc, what="the file never came")


def test_run_gives_what_subprocess_run_gives() -> None:
    done = waits.run([sys.executable, "-c", "import sys; print(sys.stdin.read().upper()); sys.exit(4)"], 60,
                     input="abc", capture_output=True, text=True)
    assert (done.returncode, done.stdout) == (4, "ABC\n")
    with pytest.raises(subprocess.CalledProcessError):
        waits.run([sys.executable, "-c", "raise SystemExit(1)"], 60, check=True)
