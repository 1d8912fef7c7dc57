"""Where results go: one default root, never relative to the current directory, and a fresh folder per run."""

from __future__ import annotations

import datetime as dt
import os
from pathlib import Path

from autotest.errors import UsageError
from autotest.inputs.case import REPO_ROOT, Case

RESULTS_ENV = "RL_AUTOTEST_RESULTS"


def default_results_root() -> Path:
    """``$RL_AUTOTEST_RESULTS`` when set, else ``results/`` in the harness checkout."""
    configured = os.environ.get(RESULTS_ENV)
    return Path(configured).expanduser().resolve() if configured else REPO_ROOT / "results"


DEFAULT_ROOT_HELP = f"${RESULTS_ENV}, else {REPO_ROOT / 'results'}"


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
