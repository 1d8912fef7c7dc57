"""The commits a bisect searches: first-parent (or all) commits after ``good`` up to ``bad``, oldest first."""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

from autotest.errors import UsageError
from autotest.run.framework import git_error_line, is_url

GIT_TIMEOUT_S = 600.0
_SEP = "\x1f"


@dataclass(frozen=True)
class Commit:
    sha: str
    subject: str
    author: str

    def short(self) -> str:
        return f"{self.sha[:12]} {self.subject} ({self.author})"


def _git(args: list[str], what: str) -> str:
    try:
        done = subprocess.run(["git", *args], capture_output=True, text=True, timeout=GIT_TIMEOUT_S, check=False,
                              env={**os.environ, "GIT_TERMINAL_PROMPT": "0"})
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise UsageError(f"{what}: git failed ({exc})") from None
    if done.returncode != 0:
        raise UsageError(f"{what}: {git_error_line(done.stderr, done.returncode)}")
    return done.stdout


def history_dir(repo: str, cache: Path) -> Path:
    """A git directory holding ``repo``'s history: the repository itself when local, else a bare mirror."""
    local = Path(repo).expanduser()
    if local.is_dir() and (local / ".git").exists():
        return local / ".git"
    if local.is_dir() and (local / "HEAD").is_file():
        return local
    if not is_url(repo):
        what = "is not a git repository" if local.exists() else "does not exist"
        raise UsageError(f"bisect: framework repository {repo} {what}; pass --framework-repo with a clone's path or "
                         "a URL, or fix platform.framework.repo")
    cache.mkdir(parents=True, exist_ok=True)
    mirror = cache / "bisect-history.git"
    if not (mirror / "HEAD").is_file():
        _git(["init", "--quiet", "--bare", str(mirror)], f"bisect: {mirror}")
    _git(["--git-dir", str(mirror), "fetch", "--quiet", "--no-tags", "--end-of-options", repo,
          "+refs/heads/*:refs/heads/*"], f"bisect: fetch {repo}")
    return mirror


def resolve(git_dir: Path, ref: str, what: str) -> str:
    """The full sha of ``ref`` (an option-shaped or empty ref is refused before git sees it)."""
    if not ref.strip() or ref.startswith("-"):
        raise UsageError(f"{what}: {ref!r} is not a ref; give a branch, tag or commit")
    try:
        return _git(["--git-dir", str(git_dir), "rev-parse", "--verify", "--quiet", "--end-of-options",
                     f"{ref}^{{commit}}"], what).strip()
    except UsageError:
        raise UsageError(f"{what}: {ref!r} is not a commit of {git_dir}; fetch it or check the spelling") from None


def commits_between(git_dir: Path, good: str, bad: str, *, all_commits: bool = False) -> list[Commit]:
    """Commits after ``good`` up to and including ``bad``, oldest first (first-parent unless ``all_commits``)."""
    good_sha = resolve(git_dir, good, "--good")
    bad_sha = resolve(git_dir, bad, "--bad")
    ancestor = subprocess.run(["git", "--git-dir", str(git_dir), "merge-base", "--is-ancestor", good_sha, bad_sha],
                              capture_output=True, check=False)
    if ancestor.returncode != 0:
        raise UsageError(f"--good {good}: {good_sha[:12]} is not an ancestor of --bad {bad} ({bad_sha[:12]}); "
                         "give a good commit that the bad one descends from")
    args = ["--git-dir", str(git_dir), "log", "--reverse", f"--format=%H{_SEP}%s{_SEP}%an"]
    if not all_commits:
        args.append("--first-parent")
    out = _git([*args, f"{good_sha}..{bad_sha}"], "bisect: git log")
    commits = [Commit(*line.split(_SEP, 2)) for line in out.splitlines() if line.strip()]
    if not commits:
        raise UsageError(f"--good {good} and --bad {bad} are the same commit; nothing to bisect")
    return commits
