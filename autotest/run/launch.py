"""What to launch and how it ended: one interface, two backends (local process group, Ray job).

``launch_spec`` resolves a case into a :class:`LaunchSpec` (nothing left to expand);
:func:`autotest.run.backends.start` runs it with the backend asked for and returns a
:class:`LaunchResult`.
Both backends write ``logs/stdout.log``, ``logs/stderr.log`` and ``logs/launch.json`` (secrets
redacted), enforce the timeout, call the poll callback (which may stop the run), and always
clean up. Whether the run is *complete* is judged apart (``autotest.judge.structural``).
"""

from __future__ import annotations

import json
import os
import secrets
import shlex
import sys
from collections.abc import Callable, Collection, Mapping
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from autotest.errors import UsageError, WriteFailed
from autotest.files import write_atomic
from autotest.inputs.case import Case
from autotest.inputs.placeholders import expand, placeholder_values
from autotest.redaction import json_ready, redact
from autotest.run.interrupts import Interrupted
from autotest.run.isolation import (
    PYTHON_ENV,
    RAY_PORT_ENVS,
    RAY_TMPDIR_ENV,
    free_ports,
    python_env,
)

_STOP_RAY = ("-m", "autotest.run.isolation", "stop-ray")

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
    """How the process ended. Completion (steps reached) is judged by the judge, from the tracker too."""

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
    #: the final launch.json that a full or read-only disk refused (the result stands)
    unsaved: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return json_ready(asdict(self))


class RunInterrupted(Interrupted):
    """A backend's wait was interrupted (Ctrl-C, SIGTERM, a stop request); raised after the cleanup.

    It carries the run's :class:`LaunchResult`, so the pipeline can still judge and publish an
    ERROR verdict before the interrupt goes on up.
    """

    def __init__(self, reason: str, result: LaunchResult) -> None:
        super().__init__(reason)
        self.result = result


def launch_spec(case: Case, work_dir: Path, *, seed: int | None = None, fault: str | None = None,
                extra_args: tuple[str, ...] = (), environ: Mapping[str, str] | None = None) -> LaunchSpec:
    """Resolve ``case``'s launch for one run in ``work_dir`` (placeholders, ${ENV}, seed, fault)."""
    env = os.environ if environ is None else environ
    if fault and not case.takes_fault:
        raise UsageError(f"{case.source}: launch.fault_args: the case takes no fault; "
                         "add fault_args: ['--fault', '{fault}'] to inject one")
    seed_value = case.seed.default if seed is None else seed
    values = placeholder_values(repo=case.repo_root, work_dir=work_dir, seed=seed_value, fault=fault)
    launch = case.launch
    where = f"{case.source}: launch.python"
    python = python_env(expand(case, "launch.python", launch.python, values, env) if launch.python else None,
                        where, env)
    if python:  # ${FRAMEWORK_PYTHON} in the launch fields is the interpreter the run gets
        env = {**env, PYTHON_ENV: python[PYTHON_ENV]}
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
    overrides = {**python, **{k: expand(case, f"launch.env.{k}", v, values, env) for k, v in launch.env.items()}}
    if case.tracker.work_dir_env:
        overrides[case.tracker.work_dir_env] = values["work_dir"]
    if case.seed.env:
        overrides[case.seed.env] = str(seed_value)
    spec = LaunchSpec(command=command, cwd=case.resolve(expand(case, "launch.cwd", launch.cwd, values, env)),
                      env=overrides, timeout_s=launch.timeout_s, uses_ray=launch.uses_ray,
                      term_grace_s=launch.term_grace_s)
    return with_own_ray(spec, launch.env)


def with_own_ray(spec: LaunchSpec, case_env: Collection[str] = ()) -> LaunchSpec:
    """``spec`` with fresh Ray ports, its own RAY_TMPDIR and a cleanup that stops only that cluster.

    Variables the case file sets itself (``case_env``) are kept. The pipeline calls it again before a
    relaunch, so a relaunch after "address already in use" gets new ports.
    """
    if not spec.uses_ray:
        return spec
    env = dict(spec.env)
    for name, port in zip(RAY_PORT_ENVS, free_ports(len(RAY_PORT_ENVS))):
        if name not in case_env:
            env[name] = str(port)
    if RAY_TMPDIR_ENV not in case_env:
        env[RAY_TMPDIR_ENV] = f"/tmp/rlat-ray-{secrets.token_hex(4)}"
    gcs_port = env.get(RAY_PORT_ENVS[0], "6379")  # Ray's default when the case pins no port
    stop = (sys.executable, *_STOP_RAY, "--gcs-port", gcs_port, "--temp-dir", env.get(RAY_TMPDIR_ENV, ""))
    others = tuple(c for c in spec.cleanup_commands if tuple(c[1:4]) != _STOP_RAY)
    return replace(spec, env=env, cleanup_commands=(*others, stop))


def write_launch_record(path: Path, record: dict[str, Any]) -> None:
    """``logs/launch.json`` of either backend: secrets redacted, written atomically (it is rewritten as the run goes)."""
    write_atomic(path, json.dumps(redact(record), indent=2, default=str) + "\n")


def final_launch_record(path: Path, record: dict[str, Any], result: LaunchResult) -> LaunchResult:
    """The last launch.json, with ``result``, once the run has ended: a full or read-only disk must not cost
    the run's result; the line naming the file is in the returned result's ``unsaved``."""
    record["result"] = result.to_dict()
    try:
        write_launch_record(path, record)
    except WriteFailed as exc:
        return replace(result, unsaved=(str(exc),))
    return result
