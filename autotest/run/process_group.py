"""The local backend: one training command in its own process group, always cleaned up after.

``launch`` starts the command in a new session (so Ctrl-C at the harness never reaches it and
the whole tree can be signalled at once), writes stdout/stderr and ``launch.json`` (command,
cwd, env: redacted) under ``results_dir/logs``, enforces the wall-clock timeout and calls an
optional poll callback that may stop the run. A watchdog process (``autotest.run.watchdog``) stops
the session should the harness itself be killed. Whatever the ending (exit, timeout, stop, crash,
KeyboardInterrupt, an exception in the callback) every process of the session is terminated
(SIGTERM, grace, SIGKILL) and reaped, the cleanup commands run (``ray stop --force`` for cases
that start Ray) and the survivors, if any, are recorded.
"""

from __future__ import annotations

import datetime as dt
import os
import shlex
import signal
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from autotest.errors import UsageError
from autotest.run import watchdog
from autotest.run.interrupts import Interrupted, describe, stop_requested
from autotest.run.launch import (
    CleanupResult,
    LaunchResult,
    LaunchSpec,
    PollCallback,
    RunInterrupted,
    final_launch_record,
    write_launch_record,
)
from autotest.run.proctable import TRACK_INTERVAL_S, alive_as_recorded, descendants, session_members



def _signal_pids(pids: list[int], sig: int) -> None:
    for pid in pids:
        try:
            os.kill(pid, sig)
        except (ProcessLookupError, PermissionError):
            pass


def _signal_tree(sid: int, sig: int) -> None:
    try:
        os.killpg(sid, sig)
    except (ProcessLookupError, PermissionError):
        pass
    _signal_pids(session_members(sid), sig)  # members that moved to a process group of their own


def _wait_until(done: Callable[[], bool], timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while not done():
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.05)
    return True


@dataclass(frozen=True)
class Teardown:
    leftover: tuple[int, ...]  # still running after the main process had ended
    escaped: tuple[int, ...]  # descendants that had left the session (setsid), killed too
    survivors: tuple[int, ...]  # alive after SIGKILL: should never happen


def terminate_session(proc: subprocess.Popen, grace_s: float,
                      tracked: dict[int, int] | None = None) -> Teardown:
    """SIGTERM every process of ``proc``'s session, SIGKILL after ``grace_s``, reap; then the
    same for ``tracked`` descendants ({pid: start time}) that left the session and still run."""
    sid = proc.pid
    leftover = tuple(session_members(sid)) if proc.poll() is not None else ()

    def gone() -> bool:
        proc.poll()  # reaps our direct child
        return proc.returncode is not None and not session_members(sid)

    if not gone():
        _signal_tree(sid, signal.SIGTERM)
        try:
            finished = _wait_until(gone, grace_s)
        except KeyboardInterrupt:  # a second Ctrl-C: skip the grace period
            finished = False
        if not finished:
            _signal_tree(sid, signal.SIGKILL)
            _wait_until(gone, 10.0)
    proc.wait()
    members = set(session_members(sid))
    outside = {pid: start for pid, start in (tracked or {}).items() if pid not in members}
    escaped = alive_as_recorded(outside)
    if escaped:
        _signal_pids(escaped, signal.SIGTERM)
        if not _wait_until(lambda: not alive_as_recorded(outside), min(grace_s, 10.0)):
            _signal_pids(alive_as_recorded(outside), signal.SIGKILL)
            _wait_until(lambda: not alive_as_recorded(outside), 10.0)
    survivors = session_members(sid) + alive_as_recorded(outside)
    return Teardown(leftover=leftover, escaped=tuple(escaped), survivors=tuple(survivors))


def _run_cleanup(command: tuple[str, ...], spec: LaunchSpec, env: dict[str, str],
                 log: Path) -> CleanupResult:
    with log.open("a", encoding="utf-8") as out:
        out.write(f"$ {shlex.join(command)}\n")
        out.flush()
        try:
            proc = subprocess.Popen(command, cwd=spec.cwd, env=env, stdin=subprocess.DEVNULL,
                                    stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        except OSError as exc:
            out.write(f"could not start: {exc}\n")
            return CleanupResult(command, None, False, f"could not start: {exc.strerror or exc}")
        try:
            code = proc.wait(timeout=spec.cleanup_timeout_s)
        except subprocess.TimeoutExpired:
            terminate_session(proc, grace_s=2.0)
            return CleanupResult(command, None, True, f"timed out after {spec.cleanup_timeout_s:g} s")
        finally:
            if proc.poll() is None:  # interrupted while waiting: do not leave it behind
                terminate_session(proc, grace_s=2.0)
        return CleanupResult(command, code, False, None)


# ---------------------------------------------------------------- launching


def launch(spec: LaunchSpec, results_dir: Path, *, poll: PollCallback | None = None,
           poll_interval_s: float = 10.0, on_start: Callable[[int], None] | None = None) -> LaunchResult:
    """Run ``spec`` to its end, the timeout, or a stop reason returned by ``poll``.

    ``poll`` is called every ``poll_interval_s`` while the run goes; a non-empty string it
    returns stops the run and becomes ``stopped_reason``. A KeyboardInterrupt (SIGTERM turned into
    one, or a stop request from another thread) becomes :class:`RunInterrupted` carrying the result;
    exceptions from ``poll`` propagate. Both only after the cleanup and after launch.json records them.
    ``on_start`` gets the run's pid once it exists (the contention sampler follows its process tree).
    """
    logs = Path(results_dir) / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    stdout_log, stderr_log, launch_json = logs / "stdout.log", logs / "stderr.log", logs / "launch.json"
    env = {**os.environ, **spec.env}
    started_at = dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
    record: dict[str, Any] = {
        "command": spec.command, "command_line": spec.command_line, "argv": spec.argv,
        "cwd": str(spec.cwd), "env_overrides": spec.env, "env": env,
        "timeout_s": spec.timeout_s, "uses_ray": spec.uses_ray,
        "cleanup_commands": [list(c) for c in spec.cleanup_commands], "started_at": started_at,
    }
    write_launch_record(launch_json, record)
    t0 = time.monotonic()
    with stdout_log.open("wb") as out, stderr_log.open("wb") as err:
        try:
            proc = subprocess.Popen(spec.argv, cwd=spec.cwd, env=env, stdin=subprocess.DEVNULL,
                                    stdout=out, stderr=err, start_new_session=True)
        except OSError as exc:
            record["result"] = {"error": f"could not start: {exc}"}
            write_launch_record(launch_json, record)
            raise UsageError(f"launch: could not start {spec.argv[0]!r} in {spec.cwd}: "
                             f"{exc.strerror or exc}; check the command and launch.cwd") from None
    record["pid"] = proc.pid
    # stops the session if this process dies without cleaning up (SIGKILL, OOM); the window between
    # the two starts is a fork and an exec
    guard = watchdog.start(proc.pid, spec.timeout_s, spec.term_grace_s, logs / "watchdog.log")
    if on_start is not None:
        on_start(proc.pid)
    timed_out, stopped, interrupted = False, None, None
    interrupt: BaseException | None = None
    tracked: dict[int, int] = {}
    try:
        deadline = t0 + spec.timeout_s
        next_poll = t0 + poll_interval_s if poll else float("inf")
        next_track = t0
        while True:
            until = min(deadline, next_poll, max(next_track, time.monotonic() + 0.05))
            try:
                proc.wait(timeout=max(0.0, until - time.monotonic()))
                break
            except subprocess.TimeoutExpired:
                pass
            if time.monotonic() >= next_track:
                # remembered now, while the parent chain exists: a setsid'd child (a teacher server)
                # leaves the session, and after its parent dies it is nobody's child
                tracked.update(descendants(proc.pid))
                next_track = time.monotonic() + TRACK_INTERVAL_S
            reason = stop_requested()
            if reason:  # another thread was interrupted (calibration's runs wait in a pool)
                raise Interrupted(reason)
            now = time.monotonic()
            if now >= deadline:
                timed_out = True
                break
            if poll and now >= next_poll:
                reason = poll()
                next_poll = time.monotonic() + poll_interval_s
                if reason:
                    stopped = str(reason)
                    break
    except KeyboardInterrupt as exc:
        interrupted, interrupt = describe(exc), exc
    except BaseException as exc:
        interrupted = describe(exc)
        raise
    finally:
        # every ending passes here: normal exit, timeout, stop, Ctrl-C, a failing callback
        wall_s = round(time.monotonic() - t0, 3)
        teardown = terminate_session(proc, spec.term_grace_s, tracked)
        watchdog.stop(guard)
        cleanups = tuple(_run_cleanup(c, spec, env, logs / "cleanup.log") for c in spec.cleanup_commands)
        code = proc.returncode
        result = LaunchResult(
            command_line=spec.command_line, cwd=str(spec.cwd), started_at=started_at,
            wall_s=wall_s, timeout_s=spec.timeout_s,
            exit_code=code if code is not None and code >= 0 else None,
            signal=signal.Signals(-code).name if code is not None and code < 0 else None,
            timed_out=timed_out, stopped_reason=stopped, interrupted=interrupted,
            stdout_log=stdout_log, stderr_log=stderr_log, launch_json=launch_json,
            leftover_pids=teardown.leftover, escaped_pids=teardown.escaped,
            survivors=teardown.survivors, cleanup=cleanups)
        result = final_launch_record(launch_json, record, result)
    if interrupt is not None:
        raise RunInterrupted(interrupted or "interrupted", result) from interrupt
    return result
