"""Node preconditions (a case's ``node:`` section), checked after the GPU slot is taken and before launch.

The probing (:func:`probe_node`: the launching process's open-file limit, what the run's PATH finds and which
Python it runs in, who owns the node-wide paths, the Ray daemons of this user, the node's GPU count) is apart
from the judging (:func:`unmet`: pure, one line per unmet precondition with its fix), so the judging is tested
on hand-made facts and the probing on a real (simulated) node. :func:`check_node` joins them into the one
ERROR line the pipeline puts in the verdict before any GPU time is spent.

Why each matters, for xtuner's ``run_rl.sh`` (docs/gpu-runners.md, "Node preconditions"): under ``set -e`` a
failing ``ulimit -n 65536`` ends the script; bare ``python``/``ray`` run whatever the PATH finds; ``rm -rf``
and ``ln -sfn`` of ``/tmp/ray_log`` fail on (or take over) another user's link; ``ray stop --force`` kills
every Ray cluster of the user and ``ray.init(address="auto")`` may join one; the MOPD launcher's absolute GPU
ordinals land on other jobs' GPUs when its slot is not the whole node.
"""

from __future__ import annotations

import os
import pwd
import re
import resource
import shutil
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from autotest.run.proctable import own_processes
from autotest.inputs.case_node import NodeRequirements
from autotest.run.platform import detect_gpus

#: the daemons a Ray cluster runs on its head node (the binaries' names, as their argv[0] and comm show)
RAY_DAEMONS = ("gcs_server", "raylet")
PREFIX_TIMEOUT_S = 30.0
_CAP_SYS_RESOURCE = 24  # capability bit: lets a process raise its hard limits
_PYTHON_NAME = re.compile(r"python[0-9.]*")


@dataclass(frozen=True)
class Executable:
    """What the run's PATH finds for a bare command, and the Python environment it runs in."""

    name: str
    path: str | None
    interpreter: str | None = None
    prefix: str | None = None
    #: why the environment is unknown
    note: str | None = None


@dataclass(frozen=True)
class PathOwner:
    path: str
    #: the owner of the path itself (a link is not followed); None: absent
    uid: int | None
    user: str | None = None


@dataclass(frozen=True)
class RayDaemon:
    pid: int
    name: str
    command: str


@dataclass(frozen=True)
class GpuSlot:
    #: the node's GPUs, CUDA_VISIBLE_DEVICES left out
    node_gpus: int
    source: str
    #: the devices the harness's slot pins (None: the whole node)
    slot_visible: str | None
    #: a CUDA_VISIBLE_DEVICES the runner's environment already carried
    inherited_visible: str | None


@dataclass(frozen=True)
class NodeFacts:
    """What the node is, as probed from the process that will launch the run."""

    uid: int
    #: the hard RLIMIT_NOFILE (None: unlimited)
    open_files_hard: int | None
    #: CAP_SYS_RESOURCE: the process may raise its hard limit itself
    can_raise_limits: bool
    framework_python: str | None
    framework_prefix: str | None
    executables: tuple[Executable, ...] = ()
    #: why the framework python's environment is unknown (it did not run)
    framework_note: str | None = None
    paths: tuple[PathOwner, ...] = ()
    ray_daemons: tuple[RayDaemon, ...] = ()
    gpus: GpuSlot | None = None


# ---------------------------------------------------------------- probing


def probe_node(req: NodeRequirements, run_env: Mapping[str, str], *, slot_env: Mapping[str, str],
               environ: Mapping[str, str]) -> NodeFacts:
    """The facts ``req`` needs. ``run_env``: the launch's environment (its PATH, its ``FRAMEWORK_PYTHON``);
    ``slot_env``: what the GPU slot exports; ``environ``: the runner's own environment."""
    soft_hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    hard = None if soft_hard[1] == resource.RLIM_INFINITY else soft_hard[1]
    python = run_env.get("FRAMEWORK_PYTHON") or None
    prefix, note = python_prefix(python, run_env) if python and req.executables else (None, None)
    return NodeFacts(
        uid=os.getuid(), open_files_hard=hard, can_raise_limits=_has_capability(_CAP_SYS_RESOURCE),
        framework_python=python, framework_prefix=prefix, framework_note=note,
        executables=tuple(probe_executable(name, run_env) for name in req.executables),
        paths=tuple(path_owner(p) for p in req.owned_paths),
        ray_daemons=ray_daemons() if req.exclusive_ray else (),
        gpus=_gpu_slot(slot_env, environ) if req.whole_node else None)


def _has_capability(bit: int) -> bool:
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("CapEff:"):
                return bool(int(line.split()[1], 16) >> bit & 1)
    except (OSError, ValueError, IndexError):
        pass
    return False


def python_prefix(python: str, run_env: Mapping[str, str]) -> tuple[str | None, str | None]:
    """(sys.prefix of ``python``, why not)."""
    try:
        done = subprocess.run([python, "-c", "import sys; print(sys.prefix)"], capture_output=True, text=True,
                              env=dict(run_env), timeout=PREFIX_TIMEOUT_S, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return None, f"{python} did not run ({exc})"
    if done.returncode != 0 or not done.stdout.strip():
        return None, f"{python} did not run (exit code {done.returncode})"
    return done.stdout.strip().splitlines()[-1], None


def _interpreter(path: str, run_env: Mapping[str, str]) -> tuple[str | None, str | None]:
    """(the Python a script runs in, why not known): its ``#!`` line, ``/usr/bin/env NAME`` looked up on the
    run's PATH, or pip's ``#!/bin/sh`` + ``'''exec' PYTHON`` form for long interpreter paths."""
    try:
        with open(path, "rb") as handle:
            head = handle.read(1024).decode(errors="replace").splitlines()
    except OSError as exc:
        return None, f"cannot read it ({exc.strerror})"
    if not head or not head[0].startswith("#!"):
        return None, "it is not a script (no #! line)"
    words = head[0][2:].split()
    if words and words[0] == "/bin/sh" and len(head) > 1 and head[1].startswith("'''exec' "):
        words = head[1].split()[1:2]
    if words and Path(words[0]).name == "env":
        names = [w for w in words[1:] if not w.startswith("-")]
        found = shutil.which(names[0], path=run_env.get("PATH", "")) if names else None
        words = [found] if found else []
    if not words or not _PYTHON_NAME.fullmatch(Path(words[0]).name):
        return None, f"its first line {head[0][:80]!r} names no Python"
    return words[0], None


def probe_executable(name: str, run_env: Mapping[str, str]) -> Executable:
    path = shutil.which(name, path=run_env.get("PATH", ""))
    if path is None:
        return Executable(name, None)
    if _PYTHON_NAME.fullmatch(name):
        interpreter, note = path, None
    else:
        interpreter, note = _interpreter(path, run_env)
    prefix = None
    if interpreter is not None:
        prefix, note = python_prefix(interpreter, run_env)
    return Executable(name, path, interpreter, prefix, note)


def path_owner(path: str) -> PathOwner:
    try:
        uid = os.lstat(path).st_uid
    except FileNotFoundError:
        return PathOwner(path, None)
    try:
        user = pwd.getpwuid(uid).pw_name
    except KeyError:
        user = None
    return PathOwner(path, uid, user)


def ray_daemons(skip: frozenset[int] | None = None) -> tuple[RayDaemon, ...]:
    """This user's running Ray head daemons (gcs_server, raylet), by argv[0] or process name."""
    found = []
    for pid, args in own_processes(skip):
        try:
            comm = Path(f"/proc/{pid}/comm").read_text().strip()
        except OSError:
            continue  # gone while we looked
        name = Path(args[0]).name if args else ""
        for daemon in RAY_DAEMONS:
            if daemon in (name, comm):
                found.append(RayDaemon(pid, daemon, " ".join(args)[:160]))
                break
    return tuple(sorted(found, key=lambda d: d.pid))


def _gpu_slot(slot_env: Mapping[str, str], environ: Mapping[str, str]) -> GpuSlot:
    whole = detect_gpus({k: v for k, v in environ.items() if k != "CUDA_VISIBLE_DEVICES"})
    return GpuSlot(whole.count, whole.source, slot_env.get("CUDA_VISIBLE_DEVICES"),
                   environ.get("CUDA_VISIBLE_DEVICES"))


# ---------------------------------------------------------------- judging


def unmet(req: NodeRequirements, facts: NodeFacts, case_gpus: int) -> list[str]:
    """One line per unmet precondition, each with its fix; [] when the node is as the script assumes."""
    problems = []
    if req.open_files is not None and facts.open_files_hard is not None \
            and facts.open_files_hard < req.open_files and not facts.can_raise_limits:
        problems.append(
            f"open files: the hard limit of the launching process is {facts.open_files_hard}, the script runs "
            f"`ulimit -n {req.open_files}` under `set -e`, which fails below it; raise the runner service's hard "
            f"limit to {req.open_files} (systemd LimitNOFILE=, or nofile in /etc/security/limits.conf) and "
            "restart the runner")
    if facts.framework_note:
        problems.append(f"the framework's python: {facts.framework_note}, so which environment the script's bare "
                        "commands must run in cannot be told; point FRAMEWORK_PYTHON (or launch.python) at it")
    for exe in facts.executables:
        problem = _executable_problem(exe, facts)
        if problem:
            problems.append(problem)
    for owned in facts.paths:
        if owned.uid is not None and owned.uid != facts.uid:
            who = f"uid {owned.uid}" + (f" ({owned.user})" if owned.user else "")
            problems.append(
                f"{owned.path}: owned by {who}, not by this runner's uid {facts.uid}, and the script deletes and "
                f"re-links it; have its owner remove it (or run the runner as that user) before the run")
    if facts.ray_daemons:
        listed = ", ".join(f"{d.name} pid {d.pid}" for d in facts.ray_daemons)
        problems.append(
            f"Ray: a cluster this run did not start is running as this user ({listed}); the script's "
            "`ray stop --force` would kill it and `ray.init(address=\"auto\")` could join it; stop it (`ray stop` "
            "as its owner) or run the case where the runner's user runs no other Ray")
    if facts.gpus is not None:
        problem = _slot_problem(facts.gpus, case_gpus)
        if problem:
            problems.append(problem)
    return problems


def _executable_problem(exe: Executable, facts: NodeFacts) -> str | None:
    wanted = (f"the framework's python {facts.framework_python} ({facts.framework_prefix})"
              if facts.framework_python else "the framework's python")
    if exe.path is None:
        if _PYTHON_NAME.fullmatch(exe.name) and facts.framework_python:
            return (f"`{exe.name}`: not on the run's PATH, and the script calls it bare; add a `{exe.name}` link to "
                    f"{facts.framework_python} in {Path(facts.framework_python).parent}")
        return (f"`{exe.name}`: not on the run's PATH, and the script calls it bare; install it in {wanted} "
                f"or put the folder that holds it on PATH")
    if facts.framework_prefix is None:
        return None  # no framework python named: found on PATH is all that can be asked
    if exe.prefix is None:
        return (f"`{exe.name}`: the run's PATH finds {exe.path}, but which Python it runs cannot be told "
                f"({exe.note}); make `{exe.name}` the one installed with {wanted}")
    if os.path.realpath(exe.prefix) != os.path.realpath(facts.framework_prefix):
        return (f"`{exe.name}`: the run's PATH finds {exe.path}, which runs in {exe.prefix}, not in {wanted}; "
                f"install `{exe.name}` in that environment or set FRAMEWORK_PYTHON to the environment that has it")
    return None


def _slot_problem(slot: GpuSlot, case_gpus: int) -> str | None:
    inherited = [d for d in (slot.inherited_visible or "").split(",") if d.strip()]
    if slot.inherited_visible is not None and len(inherited) < slot.node_gpus:
        narrowed = f"the runner's environment narrows it (CUDA_VISIBLE_DEVICES={slot.inherited_visible})"
    elif slot.slot_visible is not None:
        narrowed = (f"its GPU slot is CUDA_VISIBLE_DEVICES={slot.slot_visible} of the node's {slot.node_gpus} "
                    f"GPUs ({slot.source})")
    elif slot.node_gpus != case_gpus:
        narrowed = f"the node has {slot.node_gpus} GPUs ({slot.source}), the case {case_gpus}"
    else:
        return None
    return (f"GPUs: the script places its processes on absolute GPU ordinals of the whole node, but {narrowed}; "
            f"run it on a node with exactly {case_gpus} GPUs and no CUDA_VISIBLE_DEVICES in the runner's "
            "environment")


def node_error(source: Path | str, problems: list[str]) -> str | None:
    """The one ERROR line naming every unmet precondition (None when there are none)."""
    if not problems:
        return None
    listed = "; ".join(f"({i}) {p}" for i, p in enumerate(problems, 1))
    return (f"{source}: node: {len(problems)} precondition{'s' if len(problems) > 1 else ''} of the launch "
            f"script unmet, nothing launched: {listed}")


def check_node(req: NodeRequirements | None, source: Path | str, case_gpus: int, run_env: Mapping[str, str],
               *, slot_env: Mapping[str, str], environ: Mapping[str, str]) -> str | None:
    """Probe the node for ``req`` and judge it: the ERROR line, or None when the node is as the case assumes."""
    if req is None:
        return None
    facts = probe_node(req, run_env, slot_env=slot_env, environ=environ)
    return node_error(source, unmet(req, facts, case_gpus))
