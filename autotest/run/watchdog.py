"""The run's watchdog: a tiny process that stops the launched session when the harness is gone.

The launcher starts the training command in a session of its own and then this watchdog, in a
second session (so neither a terminal's Ctrl-C nor the launcher's own session sweep reaches it).
The harness holds the write end of the watchdog's stdin: the kernel closes it however the harness
ends — SIGKILL and the out-of-memory killer included — so end-of-file without the word ``done``
means the harness is gone, and the watchdog stops the run's session (SIGTERM, grace, SIGKILL)
and every descendant it saw leave it. It also enforces the case timeout (plus a margin) on its
own, for a harness that is alive but stuck.

Why not ``prctl(PR_SET_PDEATHSIG)`` in the training's ``preexec_fn``: it fires when the parent
*thread* exits (calibration launches from pool threads), it reaches only the direct child, not
the session, and a process that calls ``setsid``/``exec`` of a setuid program loses it.

A run submitted as a Ray job has no local session: its watchdog (``--ray-job URL SUBMISSION_ID``)
asks the job server to stop the job instead (``POST /api/jobs/<id>/stop``, Ray's own ``ray job stop``).

Runs as ``python -m autotest.run.watchdog``; imports only :mod:`autotest.run.proctable` and the stdlib.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import select
import signal
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import IO

from autotest.run.proctable import TRACK_INTERVAL_S, alive_as_recorded, session_members, session_tree

DONE = b"done\n"
BACKSTOP_MARGIN_S = 30.0  # past the launcher's own timeout and grace: the launcher acts first
CHECK_INTERVAL_S = 0.25
RAY_TERMINAL = ("SUCCEEDED", "FAILED", "STOPPED")
RAY_HTTP_TIMEOUT_S = 10.0


def start(sid: int, timeout_s: float, grace_s: float, log: Path) -> subprocess.Popen | None:
    """Start the watchdog of session ``sid``; None (and a line in ``log``) when it cannot start."""
    return _start(["--session", str(sid)], timeout_s + grace_s, grace_s, log)


def start_for_ray_job(url: str, submission_id: str, timeout_s: float, stop_wait_s: float,
                      log: Path) -> subprocess.Popen | None:
    """Start the watchdog of a Ray job at the job server ``url`` (http[s]); None when it cannot start."""
    return _start(["--ray-job", url, submission_id], timeout_s, stop_wait_s, log)


def _start(target: list[str], deadline_s: float, grace_s: float, log: Path) -> subprocess.Popen | None:
    package_root = str(Path(__file__).resolve().parents[2])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [package_root, os.environ.get("PYTHONPATH")]))}
    command = [sys.executable, "-m", "autotest.run.watchdog", *target, "--harness-pid", str(os.getpid()),
               "--deadline-s", f"{deadline_s + BACKSTOP_MARGIN_S:g}", "--grace-s", f"{grace_s:g}"]
    with log.open("ab") as out:
        try:
            return subprocess.Popen(command, stdin=subprocess.PIPE, stdout=out, stderr=subprocess.STDOUT,
                                    cwd="/", env=env, start_new_session=True)
        except OSError as exc:
            out.write(f"watchdog could not start: {exc}\n".encode())
            return None


def stop(watchdog: subprocess.Popen | None) -> None:
    """The run is over and cleaned up by the launcher: tell the watchdog to leave it alone."""
    if watchdog is None:
        return
    try:
        assert watchdog.stdin is not None
        watchdog.stdin.write(DONE)
        watchdog.stdin.close()
        watchdog.wait(timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        watchdog.kill()
        watchdog.wait()


def _say(line: str) -> None:
    now = dt.datetime.now().isoformat(timespec="seconds")
    print(f"{now} watchdog[{os.getpid()}]: {line}", flush=True)


def _signal(pids: list[int], sig: int) -> None:
    for pid in pids:
        try:
            os.kill(pid, sig)
        except (ProcessLookupError, PermissionError):
            pass


def stop_session(sid: int, tracked: dict[int, int], grace_s: float) -> list[int]:
    """SIGTERM the session (and tracked descendants that left it), SIGKILL after ``grace_s``; survivors."""
    def alive() -> list[int]:
        return sorted(set(session_members(sid)) | set(alive_as_recorded(tracked)))

    for sig, wait_s in ((signal.SIGTERM, grace_s), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(sid, sig)
        except (ProcessLookupError, PermissionError):
            pass
        _signal(alive(), sig)
        deadline = time.monotonic() + wait_s
        while alive() and time.monotonic() < deadline:
            time.sleep(0.05)
        if not alive():
            return []
    return alive()


def _harness_gone(stdin: IO[bytes], received: bytearray) -> bool | None:
    """True when the pipe closed without ``done``, False on ``done``, None while it is open."""
    ready, _, _ = select.select([stdin], [], [], CHECK_INTERVAL_S)
    if not ready:
        return None
    chunk = os.read(stdin.fileno(), 64)
    received += chunk
    if DONE in received:
        return False
    return True if not chunk else None


def stop_ray_job(url: str, submission_id: str, wait_s: float) -> list[str]:
    """Ask the job server to stop the job and wait (bounded) until Ray reports it ended; what is left."""
    job = f"{url}/api/jobs/{urllib.parse.quote(submission_id, safe='')}"
    try:
        with urllib.request.urlopen(urllib.request.Request(f"{job}/stop", data=b"", method="POST"),
                                    timeout=RAY_HTTP_TIMEOUT_S) as response:
            response.read()
    except OSError as exc:  # finished meanwhile (the server answers 4xx) or unreachable: the status says
        _say(f"stop request for Ray job {submission_id}: {exc}")
    status, deadline = "unknown", time.monotonic() + wait_s
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(job, timeout=RAY_HTTP_TIMEOUT_S) as response:
                status = str(json.loads(response.read()).get("status"))
        except (OSError, ValueError) as exc:
            status = f"unknown ({exc})"
        if status in RAY_TERMINAL:
            return []
        time.sleep(0.5)
    return [f"Ray job {submission_id}: {status}"]


def watch(harness_pid: int, deadline_s: float, what: str, stop: Callable[[], list[str]],
          on_tick: Callable[[], None] = lambda: None) -> int:
    """Until the harness says ``done`` (exit 0), or is gone / the deadline passes (``stop`` the run)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a terminal's Ctrl-C is the harness's to handle
    t0 = time.monotonic()
    received = bytearray()
    while True:
        gone = _harness_gone(sys.stdin.buffer, received)
        if gone is False:
            return 0
        on_tick()
        if gone or os.getppid() != harness_pid:
            why = "the harness (pid %d) is gone" % harness_pid
        elif time.monotonic() - t0 > deadline_s:
            why = f"the run outlived its timeout by {BACKSTOP_MARGIN_S:g} s and the harness did not stop it"
        else:
            continue
        _say(f"{why}: stopping {what}")
        survivors = stop()
        _say(f"survivors: {survivors}" if survivors else f"{what} stopped")
        return 1 if survivors else 0


def watch_session(sid: int, harness_pid: int, deadline_s: float, grace_s: float) -> int:
    tracked: dict[int, int] = {}
    next_track = 0.0

    def track() -> None:
        # remembered while the parent chain exists: a setsid'd grandchild is nobody's child later
        nonlocal next_track
        if time.monotonic() >= next_track:
            tracked.update(session_tree(sid))
            next_track = time.monotonic() + TRACK_INTERVAL_S

    return watch(harness_pid, deadline_s, f"session {sid}",
                 lambda: [str(pid) for pid in stop_session(sid, tracked, grace_s)], track)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m autotest.run.watchdog", description=__doc__.splitlines()[0])
    target = parser.add_mutually_exclusive_group(required=True)
    target.add_argument("--session", type=int, help="session id (the launched command's pid)")
    target.add_argument("--ray-job", nargs=2, metavar=("URL", "SUBMISSION_ID"), help="a Ray job at its job server")
    parser.add_argument("--harness-pid", type=int, required=True, help="the launcher's pid (our parent)")
    parser.add_argument("--deadline-s", type=float, required=True, help="stop the session after this long")
    parser.add_argument("--grace-s", type=float, default=10.0, help="SIGTERM to SIGKILL; a Ray job's stop wait")
    args = parser.parse_args(argv)
    if args.ray_job:
        url, submission_id = args.ray_job
        return watch(args.harness_pid, args.deadline_s, f"Ray job {submission_id} at {url}",
                     lambda: stop_ray_job(url, submission_id, args.grace_s))
    return watch_session(args.session, args.harness_pid, args.deadline_s, args.grace_s)


if __name__ == "__main__":
    sys.exit(main())
