"""Where a run's metric log appears: xtuner's ``<work_dir>/<YYYYmmddHHMMSS>/logs/exp_tracking/``.

One place for the layout: the launcher's artifact collection, the live follower and the reader
all resolve the tracker through these functions.
"""

from __future__ import annotations

import re
import time
from collections.abc import Mapping
from pathlib import Path

from autotest.inputs.case import Case
from autotest.inputs.placeholders import expand, placeholder_values
from autotest.readers.registry import BUILTIN, copy_names
from autotest.readers.registry import get as format_record

EXP_DIR_NAME = re.compile(r"^\d{14}$")  # xtuner's exp dirs: <work_dir>/<YYYYmmddHHMMSS>/
TRACKER_RELATIVE = Path("logs") / "exp_tracking" / "tracker.jsonl"
SFT_TRACKER_RELATIVE = Path("logs") / "exp_tracking" / "rank0" / "tracker.jsonl"


def exp_dirs(work_dir: Path) -> list[Path]:
    """The timestamped exp dirs directly under ``work_dir``, oldest first."""
    return sorted(p for p in Path(work_dir).iterdir() if p.is_dir() and EXP_DIR_NAME.match(p.name))


def newest_exp_dir(work_dir: Path, since: float | None = None) -> Path | None:
    """The newest exp dir of this run: named at or after ``since`` (a Unix time), or older but written to since.

    A resumed xtuner run reuses its exp dir and appends to the same tracker, so an exp dir named before
    the launch still belongs to this run when its metric log grew during it; one untouched since is an
    earlier run's and is ignored.
    """
    found = []
    for path in exp_dirs(work_dir) if Path(work_dir).is_dir() else ():
        started = time.mktime(time.strptime(path.name, "%Y%m%d%H%M%S")) if _valid(path.name) else None
        if started is None:
            continue
        if since is None or started >= int(since) - 1 or _written_since(path, since):  # whole seconds, local time
            found.append(path)
    return found[-1] if found else None


def _written_since(exp_dir: Path, since: float) -> bool:
    """Whether the exp dir's metric log (tracker.jsonl or TensorBoard events) changed at or after ``since``."""
    logs = exp_dir / "logs"
    if not logs.is_dir():
        return False
    candidates = [exp_dir / TRACKER_RELATIVE, exp_dir / SFT_TRACKER_RELATIVE, *logs.rglob("*tfevents*")]
    return any(p.is_file() and p.stat().st_mtime >= since for p in candidates)


def _valid(name: str) -> bool:
    try:
        time.strptime(name, "%Y%m%d%H%M%S")
    except ValueError:
        return False
    return True


def tracker_in(exp_dir: Path, fmt: str = "xtuner") -> Path | None:
    """The tracker of one exp dir (RL runs, or ``rank0/`` for SFT), None when absent.

    For a folder format (``tensorboard``) it is the exp dir's ``logs/`` folder when its files lie below it.
    """
    record = format_record(fmt)
    if record.folder:
        logs = exp_dir / "logs"
        return logs if logs.is_dir() and any(p.is_file() for p in logs.rglob(record.copy_glob)) else None
    return next((p for p in (exp_dir / TRACKER_RELATIVE, exp_dir / SFT_TRACKER_RELATIVE) if p.is_file()), None)


def tracker_location(case: Case, work_dir: Path, environ: Mapping[str, str]) -> tuple[Path, Path | None]:
    """(folder where the run's exp dirs appear, explicit tracker file or None)."""
    values = placeholder_values(repo=case.repo_root, work_dir=work_dir)
    if case.tracker.path is not None:
        path = case.resolve(expand(case, "tracker.path", case.tracker.path, values, environ))
        return path.parent, path
    if case.tracker.work_dir is not None:
        return case.resolve(expand(case, "tracker.work_dir", case.tracker.work_dir, values, environ)), None
    return Path(work_dir).resolve(), None


#: what a results folder calls its copy of the run's metric log, one name per kind of log (the built-in
#: formats'; :func:`autotest.readers.registry.copy_names` adds the plugins')
COPY_NAMES = tuple(dict.fromkeys(n for f in BUILTIN for n in f.copy_names))


def copy_name(fmt: str, source: Path) -> str:
    """The name of the copy of ``source`` (a ``fmt`` log) in a results folder (its format's record says)."""
    return format_record(fmt).copy_name(Path(source).suffix)


def tracker_copy(results_dir: Path) -> Path | None:
    """The copy of the run's metric log in a results folder (any format), None when it has none."""
    return next((p for p in (Path(results_dir) / n for n in copy_names()) if p.exists()), None)
