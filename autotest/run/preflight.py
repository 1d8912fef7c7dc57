"""Before launching (seed 003 §0): the commit under test, the inputs, the environment, redaction.

``run_preflight`` gathers everything the experiment card and results.json record about a run
before it starts. It never raises for a missing input (the card shows the status);
``require_inputs`` is the fail-fast gate: one UsageError listing every missing input.
"""

from __future__ import annotations

import datetime as dt
import importlib.metadata
import os
import platform as stdlib_platform
import socket
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from autotest.errors import UsageError
from autotest.inputs.case import REPO_ROOT, Case
from autotest.inputs.placeholders import expand, placeholder_values, unset_variables
from autotest.redaction import json_ready
from autotest.run.framework_packages import framework_python, installed_versions, requirement_problems
from autotest.run.platform import PlatformCheck, check_platform, detect_gpus

GIT_TIMEOUT_S = 30.0
# importlib.metadata distribution names, looked up without importing the (heavy) packages
FINGERPRINT_PACKAGES = {
    "torch": "torch", "transformers": "transformers", "ray": "ray", "lmdeploy": "lmdeploy",
    "vllm": "vllm", "sglang": "sglang", "msprobe": "mindstudio-probe", "xtuner": "xtuner",
    "numpy": "numpy",
}


# ---------------------------------------------------------------- commit under test


@dataclass(frozen=True)
class CommitInfo:
    """The code version a run used; ``sha`` None means unknown, and ``reason`` says why."""

    repo_dir: str
    sha: str | None
    branch: str | None
    dirty: bool | None
    diff_stat: str
    untracked: tuple[str, ...]
    reason: str | None

    def describe(self) -> str:
        if self.sha is None:
            return f"unknown ({self.reason})"
        where = self.branch or "detached HEAD"
        state = "dirty" if self.dirty else "clean"
        return f"{self.sha[:12]} on {where}, {state}"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _git(repo_dir: Path, *args: str) -> tuple[int, str, str]:
    try:
        done = subprocess.run(["git", "-C", str(repo_dir), *args], capture_output=True,
                              text=True, timeout=GIT_TIMEOUT_S, check=False)
    except FileNotFoundError:
        return 127, "", "git is not installed"
    except subprocess.TimeoutExpired:
        return 124, "", f"git {args[0]} took over {GIT_TIMEOUT_S:g} s"
    return done.returncode, done.stdout, done.stderr


def commit_under_test(repo_dir: Path | str) -> CommitInfo:
    """``git rev-parse HEAD``, branch, dirty flag and ``git diff --stat`` (when dirty)."""
    repo = Path(repo_dir)
    unknown = dict(repo_dir=str(repo), sha=None, branch=None, dirty=None, diff_stat="",
                   untracked=())
    if not repo.is_dir():
        return CommitInfo(**unknown, reason=f"{repo} is not a directory")
    code, out, err = _git(repo, "rev-parse", "HEAD")
    if code != 0:
        first = (err.strip().splitlines() or [f"git exit code {code}"])[0]
        return CommitInfo(**unknown, reason=first.removeprefix("fatal: "))
    sha = out.strip()
    _, out, _ = _git(repo, "rev-parse", "--abbrev-ref", "HEAD")
    branch = out.strip() if out.strip() not in ("", "HEAD") else None
    _, status, _ = _git(repo, "status", "--porcelain", "--untracked-files=normal")
    lines = status.splitlines()
    untracked = tuple(line[3:] for line in lines if line.startswith("??"))
    dirty = bool(lines)
    diff_stat = shortened_diff_stat(_git(repo, "diff", "--stat", "HEAD")[1].rstrip()) if dirty else ""
    return CommitInfo(repo_dir=str(repo.resolve()), sha=sha, branch=branch, dirty=dirty,
                      diff_stat=diff_stat, untracked=untracked, reason=None)


#: files of a dirty tree's diff stat kept in the records (its summary line always is)
DIFF_STAT_FILES = 20


def shortened_diff_stat(stat: str) -> str:
    """``git diff --stat`` with at most ``DIFF_STAT_FILES`` file lines: a tree with a hundred edited files would
    otherwise put kilobytes into every preflight.json, results.json and card (twice: commit and harness)."""
    lines = stat.splitlines()
    files, summary = lines[:-1], lines[-1:]
    if len(files) <= DIFF_STAT_FILES:
        return stat
    return "\n".join([*files[:DIFF_STAT_FILES], f" ... and {len(files) - DIFF_STAT_FILES} more files", *summary])


# ---------------------------------------------------------------- inputs


@dataclass(frozen=True)
class InputStatus:
    """One declared input: its expanded path (None if a variable is unset) and whether it exists."""

    name: str
    raw: str
    path: str | None
    exists: bool
    reason: str | None


def input_statuses(case: Case, environ: Mapping[str, str] | None = None) -> tuple[InputStatus, ...]:
    env = os.environ if environ is None else environ
    out = []
    for name, raw in case.inputs.items():
        unset = unset_variables(raw, env)
        if unset:
            names = ", ".join(unset)
            out.append(InputStatus(name, raw, None, False,
                                   f"{names} {'is' if len(unset) == 1 else 'are'} not set"))
            continue
        path = str(case.resolve(expand(case, f"inputs.{name}", raw, placeholder_values(repo=case.repo_root), env)))
        exists = Path(path).exists()
        out.append(InputStatus(name, raw, path, exists, None if exists else "does not exist"))
    return tuple(out)


def check_inputs(case: Case, environ: Mapping[str, str] | None = None) -> list[InputStatus]:
    """The missing inputs (name, path and why), in the case file's order."""
    return [s for s in input_statuses(case, environ) if not s.exists]


def require_inputs(case: Case, environ: Mapping[str, str] | None = None) -> dict[str, Path]:
    """Every input's path, or one UsageError naming each missing input with its path."""
    statuses = input_statuses(case, environ)
    missing = [s for s in statuses if not s.exists]
    if missing:
        listed = ", ".join(f"{s.name}={s.path or s.raw} ({s.reason})" for s in missing)
        raise UsageError(f"{case.source}: inputs: {len(missing)} missing: {listed}; "
                         "export the share roots or fix the paths, then rerun")
    return {s.name: Path(s.path) for s in statuses if s.path is not None}


# ---------------------------------------------------------------- environment


def environment_fingerprint(environ: Mapping[str, str] | None = None) -> dict[str, Any]:
    """Versions and hardware a run depends on; no heavy package is imported for it."""
    packages: dict[str, str | None] = {}
    for key, dist in FINGERPRINT_PACKAGES.items():
        try:
            packages[key] = importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            packages[key] = None
    gpus = detect_gpus(environ, details=True)
    return {
        "python": stdlib_platform.python_version(),
        "python_executable": sys.executable,
        "platform": stdlib_platform.platform(),
        "machine": stdlib_platform.machine(),
        "hostname": socket.gethostname(),
        "cpu_count": os.cpu_count(),
        "packages": packages,
        "gpu": {"count": gpus.count, "source": gpus.source, "models": sorted(set(gpus.names)),
                "driver": gpus.driver, "cuda": gpus.cuda},
    }


def framework_environment(case: Case, environ: Mapping[str, str] | None = None) -> dict[str, Any] | None:
    """The framework's Python and its package versions (asked of that interpreter); None if the case names none."""
    env = os.environ if environ is None else environ
    try:
        python = framework_python(case, env)
        if python is None:
            return None
        names = {*FINGERPRINT_PACKAGES.values(), *case.platform.requires}
        return {"python": python, "packages": installed_versions(python, names)}
    except UsageError as exc:
        return {"python": None, "packages": {}, "error": str(exc)}


@dataclass(frozen=True)
class Preflight:
    """Everything known about a case's run before it starts."""

    case: str
    case_file: str
    created_at: str
    commit: CommitInfo
    harness: CommitInfo
    platform: PlatformCheck
    inputs: tuple[InputStatus, ...]
    environment: dict[str, Any]
    #: the framework checkout the harness made for this run (autotest.run.framework.Checkout), if any
    framework: dict[str, Any] | None = None
    #: the harness's own version, recorded beside the commit under test
    harness_version: str = "unknown"

    @property
    def missing_inputs(self) -> tuple[InputStatus, ...]:
        return tuple(s for s in self.inputs if not s.exists)

    def requirement_problems(self, case: Case) -> list[str]:
        """``case.platform.requires`` against the framework's Python this preflight asked."""
        if not case.platform.requires:
            return []
        found = self.environment.get("framework") or {}
        if found.get("error"):
            return [found["error"]]
        return requirement_problems(case, found.get("python"), found.get("packages") or {})

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON types, secrets masked."""
        return json_ready({
            "case": self.case, "case_file": self.case_file, "created_at": self.created_at,
            "commit": self.commit.to_dict(), "harness": self.harness.to_dict(),
            "harness_version": self.harness_version,
            "platform": self.platform.to_dict(), "inputs": [asdict(s) for s in self.inputs],
            "environment": self.environment, "framework": self.framework,
        })


def run_preflight(case: Case, framework_dir: Path | str | None = None,
                  environ: Mapping[str, str] | None = None,
                  framework: dict[str, Any] | None = None) -> Preflight:
    """Commit, platform, inputs and environment for ``case``.

    The commit under test is the framework checkout (``framework_dir``, else the one the
    platform check found); for embedded workloads it is this repo.
    """
    platform = check_platform(case, environ)
    checkout = framework_dir or platform.framework_dir or case.framework_checkout
    harness = commit_under_test(REPO_ROOT)
    return Preflight(
        case=case.name, case_file=str(case.source),
        created_at=dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        commit=commit_under_test(checkout) if checkout else harness, harness=harness,
        platform=platform, inputs=input_statuses(case, environ),
        environment={**environment_fingerprint(environ), "framework": framework_environment(case, environ)},
        framework=framework, harness_version=harness_version())


def harness_version() -> str:
    try:
        return importlib.metadata.version("rl-autotest")
    except importlib.metadata.PackageNotFoundError:
        return "unknown (not installed)"
