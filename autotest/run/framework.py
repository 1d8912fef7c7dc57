"""The framework under test: fetch its repository at a ref and check that commit out into a cache.

A case names its framework (``platform.framework``: name, env, optional repo and ref). CI names the
ref to test — an xtuner pull request (``refs/pull/123/head``), its default branch for the nightly, a
pinned sha for this repository's own pull requests — through ``--framework-ref`` or
``RL_AUTOTEST_FRAMEWORK_REF`` (and ``--framework-repo`` / ``RL_AUTOTEST_FRAMEWORK_REPO``). The harness
then runs the case in a checkout of exactly that commit and records the commit it resolved.

Cache layout (``RL_AUTOTEST_FRAMEWORK_CACHE``, default ``~/.cache/rl-autotest/frameworks``)::

    <name>-<hash of repo>/mirror.git        one bare repository per source, fetched into
    <name>-<hash of repo>/commits/<sha>/    one detached worktree per commit, reused by later runs
    <name>-<hash of repo>/.lock             runners on one node fetch and add worktrees one at a time

A worktree is keyed by commit, never by ref, so two jobs testing different refs never share a tree
and a ref that moves gets a fresh tree instead of a ``git checkout`` under a running job.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from filelock import FileLock

from autotest.errors import UsageError
from autotest.inputs.case import Case
from autotest.inputs.schema import expand_env

REPO_ENV = "RL_AUTOTEST_FRAMEWORK_REPO"
REF_ENV = "RL_AUTOTEST_FRAMEWORK_REF"
CACHE_ENV = "RL_AUTOTEST_FRAMEWORK_CACHE"
DEFAULT_REF = "HEAD"
GIT_TIMEOUT_S = 900.0  # a first fetch of a large framework over a slow link
LOCK_TIMEOUT_S = 1800.0
_FULL_SHA = re.compile(r"^[0-9a-f]{40}$")
_SHORT_SHA = re.compile(r"^[0-9a-f]{7,39}$")
#: transports git may use for a framework repository (never ext::, which runs a command)
ALLOWED_PROTOCOLS = "file:git:http:https:ssh"
_URL_SCHEMES = ("https://", "http://", "ssh://", "git://", "file://")
_REF_HELP = "name a branch, tag, full sha or refs/pull/N/head"


@dataclass(frozen=True)
class FrameworkRequest:
    """Which framework source and ref a run tests; ``origin`` says where the ref came from."""

    name: str
    env: str
    repo: str
    ref: str
    origin: str


@dataclass(frozen=True)
class Checkout:
    """A framework checkout at one commit, as recorded in preflight.json, results.json and the card."""

    name: str
    repo: str
    ref: str
    sha: str
    path: str
    reused: bool
    origin: str

    def describe(self) -> str:
        how = "reused" if self.reused else "checked out"
        return f"{self.name} {self.sha[:12]} ({self.ref} of {self.repo}; {how} at {self.path})"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def default_cache_dir(environ: Mapping[str, str]) -> Path:
    value = environ.get(CACHE_ENV)
    if value:
        return Path(value).expanduser().resolve()
    return Path(environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "rl-autotest" / "frameworks"


def framework_request(case: Case, environ: Mapping[str, str], *, repo: str | None = None,
                      ref: str | None = None) -> FrameworkRequest | None:
    """What to check out for ``case``, or None when the run uses the checkout in the case's env var as is.

    Precedence: the command line (``repo``/``ref``), then the environment, then the case file. A ref with
    no repository anywhere fetches from the local checkout the case's env var names (a clone on the node).
    An empty value anywhere is an error, never "use the default": in CI an unset input must not gate HEAD.
    """
    _refuse_empty({"--framework-repo": repo, "--framework-ref": ref})
    fw = case.platform.framework
    if fw is None:
        if repo is not None or ref is not None:
            raise UsageError(f"{case.source}: platform.framework: the case runs no framework, "
                             "so --framework-repo/--framework-ref do not apply; drop them for this case")
        return None
    _refuse_empty({REPO_ENV: environ.get(REPO_ENV), REF_ENV: environ.get(REF_ENV)})
    source = repo or environ.get(REPO_ENV) or (
        expand_env(fw.repo, f"{case.source}: platform.framework.repo", environ) if fw.repo else None)
    wanted = ref or environ.get(REF_ENV) or fw.ref
    origin = "command line" if ref else REF_ENV if environ.get(REF_ENV) else "case file"
    if source is None and wanted is None:
        return None
    if source is None:
        local = environ.get(fw.env, "")
        if not local:
            raise UsageError(f"{case.source}: platform.framework: ref {wanted!r} asked but no repository: "
                             f"set platform.framework.repo, {REPO_ENV} or --framework-repo, or {fw.env} "
                             "to a local clone")
        source = local
    repo_from = "--framework-repo" if repo else REPO_ENV if environ.get(REPO_ENV) else \
        f"{case.source}: platform.framework.repo" if fw.repo else fw.env
    return FrameworkRequest(name=fw.name, env=fw.env, repo=_normal_source(check_source(source, repo_from)),
                            ref=check_ref(wanted, origin_label(origin, case)) if wanted else DEFAULT_REF,
                            origin=origin if wanted else "default")


def _refuse_empty(given: Mapping[str, str | None]) -> None:
    for where, value in given.items():
        if value is not None and not value.strip():
            what = _REF_HELP if where.endswith(("-ref", "_REF")) else "give a repository URL or path"
            drop = "drop the flag" if where.startswith("--") else "unset it"
            raise UsageError(f"{where} is empty (an empty value never means the default); {what}, or {drop}")


def origin_label(origin: str, case: Case) -> str:
    """Where a ref came from, as the error line names it."""
    return {"command line": "--framework-ref", "case file": f"{case.source}: platform.framework.ref"}.get(origin, origin)


def check_ref(ref: str, where: str) -> str:
    """``ref`` when git would take it as a ref name, else one UsageError naming ``where``.

    Nothing option-shaped (``--upload-pack=...``) or refspec-shaped (``+a``, ``a:b``) reaches ``git fetch``:
    the name is checked with ``git check-ref-format`` and passed after ``--end-of-options`` besides.
    """
    if ref.startswith(("-", "+")) or any(ord(c) < 32 or c.isspace() for c in ref):
        raise UsageError(f"{where}: {ref!r} is not a ref name; {_REF_HELP}")
    try:
        done = subprocess.run(["git", "check-ref-format", "--allow-onelevel", ref], capture_output=True, check=False)
    except FileNotFoundError:
        raise UsageError(f"{where}: git is not installed on this machine") from None
    if done.returncode != 0:
        raise UsageError(f"{where}: {ref!r} is not a ref name (git check-ref-format refuses it); {_REF_HELP}")
    return ref


def check_source(source: str, where: str) -> str:
    """A repository URL (https, http, ssh, git, file, or scp-like ``git@host:path``) or a local path."""
    if source.startswith("-") or any(ord(c) < 32 for c in source):
        raise UsageError(f"{where}: {source!r} is not a repository; give a URL "
                         f"({', '.join(s[:-3] for s in _URL_SCHEMES)}) or a local path")
    if "://" in source and not source.startswith(_URL_SCHEMES):
        raise UsageError(f"{where}: {source.split('://')[0]!r} is not a transport the harness fetches over; "
                         f"use one of {', '.join(s[:-3] for s in _URL_SCHEMES)}")
    return source


def is_url(source: str) -> bool:
    """A remote repository (a URL or scp-like ``git@host:path``), not a local path."""
    return "://" in source or source.startswith("git@")


def _normal_source(source: str) -> str:
    """A local path becomes absolute (the cache key must not depend on the current directory)."""
    if is_url(source):
        return source
    return str(Path(source).expanduser().resolve())


def _git(args: list[str], *, what: str, cwd: Path | None = None) -> str:
    """Run git; a failure is one UsageError line naming what was asked and git's own first line."""
    # never wait for a password in CI; never a transport that runs a command (ext::)
    env = {**os.environ, "GIT_TERMINAL_PROMPT": "0", "GIT_ALLOW_PROTOCOL": ALLOWED_PROTOCOLS}
    try:
        done = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, env=env,
                              timeout=GIT_TIMEOUT_S, check=False)
    except FileNotFoundError:
        raise UsageError(f"{what}: git is not installed on this machine") from None
    except subprocess.TimeoutExpired:
        raise UsageError(f"{what}: git {args[0]} took over {GIT_TIMEOUT_S:g} s; check the network") from None
    if done.returncode != 0:
        raise UsageError(f"{what}: {git_error_line(done.stderr, done.returncode)}")
    return done.stdout.strip()


def git_error_line(stderr: str, returncode: int) -> str:
    """The line of git's stderr that says what went wrong (its first ``fatal:``/``error:``), never a fragment
    of the advice after it ("and the repository exists.")."""
    lines = [ln.strip() for ln in stderr.strip().splitlines() if ln.strip()]
    first = next((ln for ln in lines if ln.startswith(("fatal:", "error:"))), lines[0] if lines else "")
    return first.removeprefix("fatal: ").removeprefix("error: ") or f"git exit code {returncode}"


def _has_commit(mirror: Path, sha: str) -> bool:
    done = subprocess.run(["git", "--git-dir", str(mirror), "cat-file", "-e", f"{sha}^{{commit}}"],
                          capture_output=True, check=False)
    return done.returncode == 0


def _fetch(mirror: Path, request: FrameworkRequest, what: str) -> None:
    """``git fetch REPO REF`` into the mirror; a commit or ref the repository lacks is said in those words."""
    try:
        _git(["--git-dir", str(mirror), "fetch", "--quiet", "--force", "--no-tags", "--end-of-options",
              request.repo, request.ref], what=what)
    except UsageError as exc:
        if "not our ref" in str(exc) or "couldn't find remote ref" in str(exc):
            if _FULL_SHA.match(request.ref):
                raise UsageError(f"framework {request.name}: commit {request.ref} is not in {request.repo}; "
                                 "check the sha (was the branch force-pushed?)") from None
            hint = " (a short sha is not fetched: give all 40 hex digits)" if _SHORT_SHA.match(request.ref) else ""
            raise UsageError(f"framework {request.name}: no branch, tag or ref {request.ref!r} in {request.repo}"
                             f"{hint}; {_REF_HELP}") from None
        raise


def checkout(request: FrameworkRequest, cache_dir: Path) -> Checkout:
    """Fetch ``request.ref`` and return the worktree of its commit (made once, reused after)."""
    what = f"framework {request.name}: ref {request.ref!r} of {request.repo}"
    key = hashlib.sha256(request.repo.encode()).hexdigest()[:12]
    home = cache_dir / f"{request.name}-{key}"
    home.mkdir(parents=True, exist_ok=True)
    mirror = home / "mirror.git"
    with FileLock(str(home / ".lock"), timeout=LOCK_TIMEOUT_S):
        if not (mirror / "HEAD").is_file():
            _git(["init", "--quiet", "--bare", str(mirror)], what=what)
        if _FULL_SHA.match(request.ref) and _has_commit(mirror, request.ref):
            sha = request.ref  # a pinned commit already fetched: no network needed
        else:
            # FETCH_HEAD, not a named ref: pull-request refs, branches, tags and shas all work the same
            _fetch(mirror, request, what)
            sha = _git(["--git-dir", str(mirror), "rev-parse", "FETCH_HEAD^{commit}"], what=what)
            # keep the commit reachable so `git gc` in the mirror never prunes a worktree's commit
            _git(["--git-dir", str(mirror), "update-ref", f"refs/rl-autotest/{sha}", sha], what=what)
        tree = home / "commits" / sha
        reused = (tree / ".git").exists() and _git(["rev-parse", "HEAD"], cwd=tree, what=what) == sha
        if not reused:
            if tree.exists():  # a half-made tree from an interrupted run
                shutil.rmtree(tree)
            _git(["--git-dir", str(mirror), "worktree", "prune"], what=what)
            _git(["--git-dir", str(mirror), "worktree", "add", "--quiet", "--detach", str(tree), sha], what=what)
    return Checkout(name=request.name, repo=request.repo, ref=request.ref, sha=sha, path=str(tree),
                    reused=reused, origin=request.origin)
