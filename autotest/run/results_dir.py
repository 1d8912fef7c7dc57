"""Where results go: one default root, never relative to the current directory, and a fresh folder per run."""

from __future__ import annotations

import datetime as dt
import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from autotest.errors import UsageError, WriteFailed
from autotest.files import MIB, make_folder, require_writable
from autotest.inputs.placeholders import REPO_ROOT
from autotest.inputs.project import find_project

if TYPE_CHECKING:
    from autotest.inputs.case import Case

RESULTS_ENV = "RL_AUTOTEST_RESULTS"
#: free space a run needs on the results disk before it is launched (MiB; 0 turns the check off)
MIN_FREE_ENV = "RL_AUTOTEST_MIN_FREE_MIB"
DEFAULT_MIN_FREE_MIB = 64


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


def min_free_bytes(environ: Mapping[str, str] | None = None) -> int:
    """The free space one run needs: ``$RL_AUTOTEST_MIN_FREE_MIB`` MiB, else 64 MiB (0: no check)."""
    raw = (os.environ if environ is None else environ).get(MIN_FREE_ENV, "").strip()
    if not raw:
        return DEFAULT_MIN_FREE_MIB * MIB
    try:
        mib = float(raw)
    except ValueError:
        mib = -1.0
    if not (mib >= 0 and mib != float("inf")):
        raise UsageError(f"${MIN_FREE_ENV}: {raw!r} is not a size; give the MiB of free space a run needs "
                         f"(default {DEFAULT_MIN_FREE_MIB}; 0 turns the check off)")
    return int(mib * MIB)


def require_room(folder: Path, environ: Mapping[str, str] | None = None, *, runs: int = 1) -> None:
    """Preflight for a results folder: writable (a read-only disk fails even for root) and with
    ``runs`` x :func:`min_free_bytes` free, else one line naming the folder and what to do; nothing is launched."""
    require_writable(Path(folder), "preflight: results folder", min_free_bytes=runs * min_free_bytes(environ),
                     advice=f"pass --results-dir (or set ${RESULTS_ENV}) to a folder on a writable disk with room"
                            f" (${MIN_FREE_ENV} sets the room a run needs); nothing was launched")


def fresh_folder(parent: Path, name: str) -> Path:
    """``parent/<name>[~n]``, created: two concurrent runs never share a folder, an earlier one is never reused."""
    make_folder(parent)
    for suffix in range(10_000):
        folder = parent / (name if suffix == 0 else f"{name}~{suffix}")
        try:
            folder.mkdir()  # atomic
            return folder
        except FileExistsError:
            continue
        except OSError as exc:  # read-only or full since the preflight
            raise WriteFailed(folder, exc) from exc
    raise UsageError(f"{parent}: no fresh folder named {name}[~n] can be made; clean it up")


def run_stamp() -> str:
    """``<YYYYmmdd-HHMMSS>-pid<N>``: when and by which process a results folder was made."""
    return f"{dt.datetime.now().strftime('%Y%m%d-%H%M%S')}-pid{os.getpid()}"


def new_results_dir(case: "Case", results_root: Path | None, *, fault: str | None = None) -> Path:
    """``<root>/<case>/<stamp>-pid<N>[-<fault>][~n]``, created."""
    name = run_stamp() + (f"-{fault.replace(':', '_').replace('/', '_')}" if fault else "")
    return fresh_folder(Path(results_root or default_results_root()).resolve() / case.name, name)
