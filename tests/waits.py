"""Waits in the harness's own tests that the machine's load cannot decide (load swings 1-20 on CI's 2 cores).

Every limit here counts the awaited process's own time (:class:`autotest.own_time.OwnClock`: wall time less its
waits for a CPU), so a process that is alive and getting CPU is waited for however busy the machine is; one that
dies fails the wait at once with its output, and one that is stuck (asleep or spinning) still runs out of its own
time. A limit is the bound on a broken run, never a claim about speed: keep it generous.
"""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Callable, Sequence
from typing import Any

from autotest.own_time import OwnClock

POLL_S = 0.2


def run(args: Sequence[str], limit_s: float, **kwargs: Any) -> subprocess.CompletedProcess:
    """``subprocess.run(args, **kwargs)`` with its limit on the child's own time (its process tree's), not the
    wall clock; past it the child is killed and ``subprocess.TimeoutExpired`` says how long it really ran."""
    check, data = kwargs.pop("check", False), kwargs.pop("input", None)
    if kwargs.pop("capture_output", False):
        kwargs["stdout"] = kwargs["stderr"] = subprocess.PIPE
    if data is not None:
        kwargs["stdin"] = subprocess.PIPE
    with subprocess.Popen(args, **kwargs) as proc:
        out, err = communicate(proc, limit_s, data)
    done = subprocess.CompletedProcess(args, proc.returncode, out, err)
    if check:
        done.check_returncode()
    return done


def communicate(proc: subprocess.Popen, limit_s: float, data: Any = None) -> tuple[Any, Any]:
    """``proc.communicate()`` with its limit on ``proc``'s own time (see :func:`run`)."""
    clock = OwnClock(proc.pid)
    while True:
        try:
            return proc.communicate(data, timeout=1.0)
        except subprocess.TimeoutExpired:
            data = None  # written on the first call; a retry must not send it again
            if clock.elapsed_s() >= limit_s:
                proc.kill()
                out, err = proc.communicate()
                raise subprocess.TimeoutExpired(proc.args, limit_s, out, err) from RuntimeError(
                    f"still running after {clock.describe()}")


def wait(proc: subprocess.Popen, limit_s: float) -> int:
    """``proc.wait()`` with its limit on ``proc``'s own time; ``AssertionError`` past it (the process is left to
    the test's cleanup, as ``Popen.wait`` leaves it)."""
    clock = OwnClock(proc.pid)
    while True:
        try:
            return proc.wait(timeout=1.0)
        except subprocess.TimeoutExpired:
            assert clock.elapsed_s() < limit_s, f"pid {proc.pid} still running after {clock.describe()}"


def until(condition: Callable[[], Any], limit_s: float, proc: subprocess.Popen | None = None,
          pid: int | None = None, pids: Callable[[], list[int]] | None = None,
          what: Callable[[], str] | str = "") -> Any:
    """Poll ``condition`` until it returns something true, and return that.

    The limit counts the own time of whatever the condition waits on: ``proc`` (its tree; its death fails the
    wait at once, with ``what``), ``pid`` (its tree) or ``pids()`` (re-read each time: e.g. processes expected to
    exit). With none of them it is the wall clock stretched by the load per core at each look (for a wait on
    something that is no process of the test's, e.g. a Ray job).
    """
    watched = proc.pid if proc is not None else pid
    clock = OwnClock(watched if watched is not None else 0, pids=pids) if watched is not None or pids else None
    started = time.monotonic()
    while True:
        found = condition()
        if found:
            return found
        detail = what() if callable(what) else what
        if proc is not None:
            assert proc.poll() is None, f"pid {proc.pid} exited with {proc.returncode} while waited on. {detail}"
        if clock is not None:
            assert clock.elapsed_s() < limit_s, f"not within {limit_s:g} s ({clock.describe()}). {detail}"
        else:
            assert time.monotonic() - started < limit_s * _load_factor(), f"not within {limit_s:g} s. {detail}"
        time.sleep(POLL_S)


def _load_factor() -> float:
    try:
        return max(1.0, os.getloadavg()[0] / (os.cpu_count() or 1))
    except OSError:
        return 1.0
