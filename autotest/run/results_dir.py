"""Where results go: one default root, never relative to the current directory, and a fresh folder per run."""

from __future__ import annotations

import datetime as dt
import os
from pathlib import Path

from autotest.inputs.case import REPO_ROOT, Case

RESULTS_ENV = "RL_AUTOTEST_RESULTS"


def default_results_root() -> Path:
    """``$RL_AUTOTEST_RESULTS`` when set, else ``results/`` in the harness checkout."""
    configured = os.environ.get(RESULTS_ENV)
    return Path(configured).expanduser().resolve() if configured else REPO_ROOT / "results"


DEFAULT_ROOT_HELP = f"${RESULTS_ENV}, else {REPO_ROOT / 'results'}"


def new_results_dir(case: Case, results_root: Path | None, *, fault: str | None = None, label: str = "") -> Path:
    """``<root>/<case>/<stamp>-pid<N>[-<fault>][-<label>][~n]``, created; an earlier run's folder is never reused."""
    stamp = dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    parts = [stamp, f"pid{os.getpid()}"]
    if fault:
        parts.append(fault.replace(":", "_").replace("/", "_"))
    if label:
        parts.append(label)
    parent = Path(results_root or default_results_root()).resolve() / case.name
    parent.mkdir(parents=True, exist_ok=True)
    base = "-".join(parts)
    for suffix in range(10_000):
        folder = parent / (base if suffix == 0 else f"{base}~{suffix}")
        try:
            folder.mkdir()  # atomic: two concurrent runs never share a folder
            return folder
        except FileExistsError:
            continue
    raise FileExistsError(f"{parent}: no fresh results folder for {base}")
