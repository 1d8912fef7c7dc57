"""Run one training command as its own process group, and always clean up after it.

``launch`` starts the command in a new session (so Ctrl-C at the harness never reaches it and
the whole tree can be signalled at once), writes stdout/stderr and ``launch.json`` (command,
cwd, env: redacted) under ``results_dir/logs``, enforces the wall-clock timeout and calls an
optional poll callback that may stop the run. Whatever the ending (exit, timeout, stop, crash,
KeyboardInterrupt, an exception in the callback) every process of the session is terminated
(SIGTERM, grace, SIGKILL) and reaped, the cleanup commands run (``ray stop --force`` for cases
that start Ray) and the survivors, if any, are recorded.

Whether the run is *complete* is decided apart, from the tracker: ``completion_status``.
``collect_artifacts`` keeps the tracker and saved config with the results whatever happened.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import shlex
import shutil
import signal
import subprocess
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from autotest.errors import UsageError
from autotest.inputs.case import Case, expand, placeholder_values, tracker_location
from autotest.redaction import json_ready, redact

RAY_CLEANUP = ("ray", "stop", "--force")
EXP_DIR_PATTERN = "[0-9]" * 14  # xtuner's exp dirs: <work_dir>/<YYYYmmddHHMMSS>/
CONFIG_SUFFIXES = (".py", ".json", ".yaml", ".yml", ".toml", ".sh")

PollCallback = Callable[[], "str | None"]


@dataclass(frozen=True)
class LaunchSpec:
    """A fully resolved command: nothing left to expand."""

    command: tuple[str, ...] | str  # a string runs with bash -c
    cwd: Path
    env: dict[str, str]  # overrides on top of os.environ at launch time
    timeout_s: float
    uses_ray: bool = False
    cleanup_commands: tuple[tuple[str, ...], ...] = ()
    cleanup_timeout_s: float = 120.0
    term_grace_s: float = 10.0

    @property
    def argv(self) -> list[str]:
        return ["bash", "-c", self.command] if isinstance(self.command, str) else list(self.command)

    @property
    def command_line(self) -> str:
        return self.command if isinstance(self.command, str) else shlex.join(self.command)


@dataclass(frozen=True)
class CleanupResult:
    command: tuple[str, ...]
    exit_code: int | None
    timed_out: bool
    error: str | None


@dataclass(frozen=True)
class LaunchResult:
    """How the process ended. Completion (steps reached) is judged by ``completion_status``."""

    command_line: str
    cwd: str
    started_at: str
    wall_s: float
    timeout_s: float
    exit_code: int | None  # None when a signal ended it
    signal: str | None
    timed_out: bool
    stopped_reason: str | None
    interrupted: str | None  # the exception that ended the wait (KeyboardInterrupt, ...)
    stdout_log: Path
    stderr_log: Path
    launch_json: Path
    leftover_pids: tuple[int, ...] = ()  # still running after the main process ended: killed
    escaped_pids: tuple[int, ...] = ()  # descendants that had left the session: killed
    survivors: tuple[int, ...] = ()  # still alive after SIGKILL (should never happen)
    cleanup: tuple[CleanupResult, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return json_ready(asdict(self))


# ---------------------------------------------------------------- resolving a case


def launch_spec(case: Case, work_dir: Path, *, seed: int | None = None, fault: str | None = None,
                extra_args: tuple[str, ...] = (), environ: Mapping[str, str] | None = None) -> LaunchSpec:
    """Resolve ``case``'s launch for one run in ``work_dir`` (placeholders, ${ENV}, seed, fault)."""
    env = os.environ if environ is None else environ
    if fault and not case.takes_fault:
        raise UsageError(f"{case.source}: launch.fault_args: the case takes no fault; "
                         "add fault_args: ['--fault', '{fault}'] to inject one")
    seed_value = case.seed.default if seed is None else seed
    values = placeholder_values(work_dir=work_dir, seed=seed_value, fault=fault)
    launch = case.launch
    added = [expand(case, f"launch.fault_args[{i}]", a, values, env)
             for i, a in enumerate(launch.fault_args)] if fault else []
    added += list(extra_args)
    command: tuple[str, ...] | str
    if isinstance(launch.command, str):
        command = expand(case, "launch.command", launch.command, values, env, shell=True)
        command = " ".join([command, *map(shlex.quote, added)])
    else:
        command = tuple(expand(case, f"launch.command[{i}]", a, values, env)
                        for i, a in enumerate(launch.command)) + tuple(added)
    overrides = {k: expand(case, f"launch.env.{k}", v, values, env) for k, v in launch.env.items()}
    if case.tracker.work_dir_env:
        overrides[case.tracker.work_dir_env] = values["work_dir"]
    if case.seed.env:
        overrides[case.seed.env] = str(seed_value)
    return LaunchSpec(command=command, cwd=Path(expand(case, "launch.cwd", launch.cwd, values, env)),
                      env=overrides, timeout_s=launch.timeout_s, uses_ray=launch.uses_ray,
                      cleanup_commands=(RAY_CLEANUP,) if launch.uses_ray else (),
                      term_grace_s=launch.term_grace_s)


# ---------------------------------------------------------------- process-group handling

TRACK_INTERVAL_S = 1.0  # how often the run's process tree is recorded


@dataclass(frozen=True)
class _Proc:
    pid: int
    ppid: int
    pgrp: int
    session: int
    start: int  # clock ticks after boot: tells a reused pid apart


def _process_table() -> list[_Proc]:
    """Live processes from /proc (zombies are dead: left out); empty where there is no /proc."""
    table = []
    for entry in Path("/proc").iterdir() if Path("/proc/self/stat").exists() else ():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue  # exited while we looked
        fields = stat[stat.rfind(")") + 2:].split()  # after "pid (comm) "
        if fields[0] not in ("Z", "X"):
            table.append(_Proc(int(entry.name), int(fields[1]), int(fields[2]), int(fields[3]),
                               int(fields[19])))
    return table


def session_members(sid: int) -> list[int]:
    """Live processes in session or process group ``sid``."""
    return [p.pid for p in _process_table() if sid in (p.pgrp, p.session)]


def descendants(root: int) -> dict[int, int]:
    """{pid: start time} of every live descendant of ``root``, whatever its session."""
    table = _process_table()
    children: dict[int, list[_Proc]] = {}
    for proc in table:
        children.setdefault(proc.ppid, []).append(proc)
    found, todo = {}, [root]
    while todo:
        for child in children.get(todo.pop(), ()):
            found[child.pid] = child.start
            todo.append(child.pid)
    return found


def _alive_as_recorded(tracked: dict[int, int]) -> list[int]:
    live = {p.pid: p.start for p in _process_table()}
    return [pid for pid, start in tracked.items() if live.get(pid) == start]


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
    escaped = _alive_as_recorded(outside)
    if escaped:
        _signal_pids(escaped, signal.SIGTERM)
        if not _wait_until(lambda: not _alive_as_recorded(outside), min(grace_s, 10.0)):
            _signal_pids(_alive_as_recorded(outside), signal.SIGKILL)
            _wait_until(lambda: not _alive_as_recorded(outside), 10.0)
    survivors = session_members(sid) + _alive_as_recorded(outside)
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


def _write_json(path: Path, data: dict[str, Any]) -> None:
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(redact(data), indent=2, default=str) + "\n", encoding="utf-8")
    tmp.replace(path)


def launch(spec: LaunchSpec, results_dir: Path, *, poll: PollCallback | None = None,
           poll_interval_s: float = 10.0) -> LaunchResult:
    """Run ``spec`` to its end, the timeout, or a stop reason returned by ``poll``.

    ``poll`` is called every ``poll_interval_s`` while the run goes; a non-empty string it
    returns stops the run and becomes ``stopped_reason``. KeyboardInterrupt and exceptions
    from ``poll`` propagate after the cleanup (and after launch.json records them).
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
    _write_json(launch_json, record)
    t0 = time.monotonic()
    with stdout_log.open("wb") as out, stderr_log.open("wb") as err:
        try:
            proc = subprocess.Popen(spec.argv, cwd=spec.cwd, env=env, stdin=subprocess.DEVNULL,
                                    stdout=out, stderr=err, start_new_session=True)
        except OSError as exc:
            record["result"] = {"error": f"could not start: {exc}"}
            _write_json(launch_json, record)
            raise UsageError(f"launch: could not start {spec.argv[0]!r} in {spec.cwd}: "
                             f"{exc.strerror or exc}; check the command and launch.cwd") from None
    record["pid"] = proc.pid
    timed_out, stopped, interrupted = False, None, None
    tracked: dict[int, int] = {}
    try:
        deadline = t0 + spec.timeout_s
        next_poll = t0 + poll_interval_s if poll else float("inf")
        while True:
            until = min(deadline, next_poll, time.monotonic() + TRACK_INTERVAL_S)
            try:
                proc.wait(timeout=max(0.0, until - time.monotonic()))
                break
            except subprocess.TimeoutExpired:
                pass
            # remembered now, while the parent chain exists: a setsid'd child (a teacher
            # server) leaves the session, and after its parent dies it is nobody's child
            tracked.update(descendants(proc.pid))
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
    except BaseException as exc:
        interrupted = f"{type(exc).__name__}: {exc}".rstrip(": ")
        raise
    finally:
        # every ending passes here: normal exit, timeout, stop, Ctrl-C, a failing callback
        wall_s = round(time.monotonic() - t0, 3)
        teardown = terminate_session(proc, spec.term_grace_s, tracked)
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
        record["result"] = result.to_dict()
        _write_json(launch_json, record)
    return result


# ---------------------------------------------------------------- completion


@dataclass(frozen=True)
class Completion:
    """Did the run finish its expected shape? status PASS, or ERROR with the reasons."""

    status: str
    observed_steps: int | None
    expected_steps: int
    exact: bool
    reasons: tuple[str, ...]

    @property
    def complete(self) -> bool:
        return self.status == "PASS"


def completion_status(result: LaunchResult, observed_steps: int | None, expected_steps: int,
                      exact: bool) -> Completion:
    """Judge completion from the exit and the highest step the tracker reached.

    An exit code alone proves nothing (a trainer behind ``tee`` exits 0 after a crash), and
    steps alone miss a crash after the last step; both are required.
    """
    at = (f"at step {observed_steps} of {expected_steps}" if observed_steps is not None
          else f"before any step was logged (expected {expected_steps})")
    reasons = []
    if result.timed_out:
        reasons.append(f"run timed out after {result.timeout_s:g} s {at}")
    elif result.stopped_reason:
        reasons.append(f"run stopped by the harness {at}: {result.stopped_reason}")
    elif result.interrupted:
        reasons.append(f"run interrupted ({result.interrupted}) {at}")
    elif result.signal:
        reasons.append(f"run was killed by {result.signal} {at}")
    elif result.exit_code != 0:
        reasons.append(f"run exited with code {result.exit_code} {at}")
    elif observed_steps is None:
        reasons.append(f"run exited 0 but logged no training step (expected {expected_steps}); "
                       "is the tracker written where the case says?")
    elif observed_steps < expected_steps:
        reasons.append(f"run ended {at} with exit code 0 (a pipeline may hide a crash)")
    if exact and observed_steps is not None and observed_steps > expected_steps:
        reasons.append(f"run reached step {observed_steps} but the case expects exactly "
                       f"{expected_steps} (did epochs, batch size or dataset size change?)")
    return Completion(status="ERROR" if reasons else "PASS", observed_steps=observed_steps,
                      expected_steps=expected_steps, exact=exact, reasons=tuple(reasons))


# ---------------------------------------------------------------- artifacts


@dataclass(frozen=True)
class Artifacts:
    """What ``collect_artifacts`` found and copied; None/empty when absent."""

    exp_dir: Path | None
    tracker: Path | None  # the copy in results_dir
    tracker_source: Path | None
    run_config: tuple[Path, ...]
    notes: tuple[str, ...]


def newest_exp_dir(work_dir: Path, since: float | None = None) -> Path | None:
    """The newest ``<14-digit timestamp>`` exp dir, ignoring those from before ``since``."""
    found = []
    for path in Path(work_dir).glob(EXP_DIR_PATTERN):
        if not path.is_dir():
            continue
        try:
            started = time.mktime(time.strptime(path.name, "%Y%m%d%H%M%S"))
        except ValueError:
            continue
        if since is None or started >= int(since) - 1:  # names have whole seconds, local time
            found.append(path)
    return max(found, key=lambda p: p.name) if found else None


def collect_artifacts(work_dir: Path, results_dir: Path, *, tracker_path: Path | None = None,
                      since: float | None = None) -> Artifacts:
    """Copy the run's tracker.jsonl and config files into ``results_dir``, tolerating absence.

    The tracker comes from ``tracker_path`` when given, else the newest exp dir under
    ``work_dir`` (``logs/exp_tracking/tracker.jsonl``, or ``rank0/`` for SFT). Config files
    (py/json/yaml/toml/sh at the top of the exp dir and of the work dir, where run_rl.sh copies
    the config and itself) go to ``run_config/exp_dir/`` and ``run_config/work_dir/``.
    """
    results_dir = Path(results_dir)
    results_dir.mkdir(parents=True, exist_ok=True)
    notes = []
    exp_dir = newest_exp_dir(work_dir, since) if Path(work_dir).is_dir() else None
    source = tracker_path
    if source is None and exp_dir is not None:
        tracking = exp_dir / "logs" / "exp_tracking"
        source = next((p for p in (tracking / "tracker.jsonl", tracking / "rank0" / "tracker.jsonl")
                       if p.is_file()), None)
    tracker = None
    if source is not None and Path(source).is_file():
        tracker = results_dir / "tracker.jsonl"
        shutil.copyfile(source, tracker)
    else:
        where = source or (exp_dir and f"{exp_dir}/logs/exp_tracking") or f"{work_dir} (no exp dir)"
        notes.append(f"no tracker.jsonl at {where}")
    copied = []
    for label, folder in (("exp_dir", exp_dir), ("work_dir", Path(work_dir))):
        if folder is None or not folder.is_dir():
            continue
        for path in sorted(folder.iterdir()):
            if path.is_file() and path.suffix in CONFIG_SUFFIXES:
                target = results_dir / "run_config" / label / path.name
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(path, target)
                copied.append(target)
    if not copied:
        notes.append("no config files found")
    return Artifacts(exp_dir=exp_dir, tracker=tracker, tracker_source=Path(source) if source else None,
                     run_config=tuple(copied), notes=tuple(notes))


def artifacts_for(case: Case, work_dir: Path, results_dir: Path, *, since: float | None = None,
                  environ: Mapping[str, str] | None = None) -> Artifacts:
    """``collect_artifacts`` at the place ``case`` says its tracker appears."""
    folder, explicit = tracker_location(case, work_dir, os.environ if environ is None else environ)
    return collect_artifacts(folder, results_dir, tracker_path=explicit, since=since)
