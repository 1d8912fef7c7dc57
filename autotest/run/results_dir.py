"""Where results go: one default root, never relative to the current directory, and a fresh folder per run."""

from __future__ import annotations

import datetime as dt
import os
from pathlib import Path

from autotest.errors import UsageError
from autotest.inputs.case import REPO_ROOT, Case
from autotest.inputs.project import find_project

RESULTS_ENV = "RL_AUTOTEST_RESULTS"


def default_results_root() -> Path:
    """``$RL_AUTOTEST_RESULTS``, else the project's ``results``, else the demo's own folder: ``results/``
    in the harness checkout, or ``~/.local/share/rl-autotest/results`` for an installed harness (never
    inside the installed package, never the working directory)."""
    configured = os.environ.get(RESULTS_ENV)
    if configured is not None:
        if not configured.strip():
            raise UsageError(f"${RESULTS_ENV} is set but empty; unset it or name the results root")
        return Path(configured).expanduser().resolve()
    project = find_project()
    if project is not None:
        return project.results
    return demo_results_root()


def demo_results_root() -> Path:
    if (REPO_ROOT / "pyproject.toml").is_file() and (REPO_ROOT / ".git").exists():
        return REPO_ROOT / "results"  # a checkout of the harness: its ignored results/ folder
    data_home = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(data_home).expanduser().resolve() / "rl-autotest" / "results"


DEFAULT_ROOT_HELP = f"${RESULTS_ENV}, else the project's results, else {demo_results_root()}"


def fresh_folder(parent: Path, name: str) -> Path:
    """``parent/<name>[~n]``, created: two concurrent runs never share a folder, an earlier one is never reused."""
    parent.mkdir(parents=True, exist_ok=True)
    for suffix in range(10_000):
        folder = parent / (name if suffix == 0 else f"{name}~{suffix}")
        try:
            folder.mkdir()  # atomic
            return folder
        except FileExistsError:
            continue
    raise UsageError(f"{parent}: no fresh folder named {name}[~n] can be made; clean it up")


def run_stamp() -> str:
    """``<YYYYmmdd-HHMMSS>-pid<N>``: when and by which process a results folder was made."""
    return f"{dt.datetime.now().strftime('%Y%m%d-%H%M%S')}-pid{os.getpid()}"


def new_results_dir(case: Case, results_root: Path | None, *, fault: str | None = None) -> Path:
    """``<root>/<case>/<stamp>-pid<N>[-<fault>][~n]``, created."""
    name = run_stamp() + (f"-{fault.replace(':', '_').replace('/', '_')}" if fault else "")
    return fresh_folder(Path(results_root or default_results_root()).resolve() / case.name, name)
