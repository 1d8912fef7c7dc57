"""The harness as a user gets it: a wheel built from this checkout, installed into a fresh venv, driven from a
git repository of the user's (the adoption and base-install tests)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from tests.helpers import ROOT
from tests import waits

#: what never goes into the wheel's source copy (built outputs, local state)
NOT_SOURCE = (".git", ".venv", "results", "node_modules", "build", "dist", "__pycache__", ".pytest_cache",
              "*.egg-info", "accuracy", "site")
GIT = {"GIT_AUTHOR_NAME": "u", "GIT_AUTHOR_EMAIL": "u@example.com", "GIT_COMMITTER_NAME": "u",
       "GIT_COMMITTER_EMAIL": "u@example.com"}


def build_wheel(tmp: Path) -> Path:
    """The harness's wheel, built (no dependencies, no build isolation) from a clean copy of this checkout."""
    source = tmp / "source"
    shutil.copytree(ROOT, source, ignore=shutil.ignore_patterns(*NOT_SOURCE))
    wheels = tmp / "wheels"
    waits.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation",
               "--wheel-dir", str(wheels), str(source)], check=True, capture_output=True, limit_s=300)
    return next(wheels.glob("rl_autotest-*.whl"))


def user_env(venv: Path, **extra: str) -> dict[str, str]:
    """The environment of a user whose PATH starts at ``venv`` (none of this checkout's settings)."""
    drop = ("PYTHONPATH", "RL_AUTOTEST_RESULTS", "RL_AUTOTEST_PROJECT", "RL_AUTOTEST_HISTORY", "VIRTUAL_ENV")
    env = {k: v for k, v in os.environ.items() if k not in drop}
    return {**env, **GIT, "PATH": f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}", **extra}


def commit_all(project: Path, env: dict[str, str], message: str) -> None:
    for args in (["add", "-A"], ["commit", "-q", "-m", message]):
        subprocess.run(["git", "-C", str(project), *args], check=True, env=env, capture_output=True)
