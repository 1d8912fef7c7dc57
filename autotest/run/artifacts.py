"""Keep what a run left behind with its results, whatever happened: the tracker and the saved config."""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from autotest.inputs.case import Case
from autotest.inputs.log_search import log_for_format
from autotest.inputs.tracker_layout import copy_name, newest_exp_dir, tracker_in, tracker_location

CONFIG_SUFFIXES = (".py", ".json", ".yaml", ".yml", ".toml", ".sh")


@dataclass(frozen=True)
class Artifacts:
    """What ``collect_artifacts`` found and copied; None/empty when absent."""

    exp_dir: Path | None
    tracker: Path | None  # the copy in results_dir
    tracker_source: Path | None
    run_config: tuple[Path, ...]
    notes: tuple[str, ...]


def collect_artifacts(work_dir: Path, results_dir: Path, *, tracker_path: Path | None = None,
                      since: float | None = None, fmt: str = "xtuner") -> Artifacts:
    """Copy the run's tracker.jsonl and config files into ``results_dir``, tolerating absence.

    The tracker comes from ``tracker_path`` when given, else the newest exp dir under
    ``work_dir`` (``logs/exp_tracking/tracker.jsonl``, or ``rank0/`` for SFT). Config files
    (py/json/yaml/toml/sh at the top of the exp dir and of the work dir, where run_rl.sh copies
    the config and itself) go to ``run_config/exp_dir/`` and ``run_config/work_dir/``.
    """
    results_dir = Path(results_dir)
    results_dir.mkdir(parents=True, exist_ok=True)
    notes = []
    exp_dir = newest_exp_dir(work_dir, since) if Path(work_dir).is_dir() else None
    source = tracker_path
    if source is None and exp_dir is not None:
        source = tracker_in(exp_dir, fmt)
    elif source is None:
        source = log_for_format(Path(work_dir), fmt, since)  # no exp dirs: verl, a Hugging Face output_dir, ...
    tracker = None
    if fmt == "tensorboard" and source is not None and Path(source).exists():
        tracker = _copy_event_files(Path(source), results_dir / "tensorboard")
    elif fmt != "tensorboard" and source is not None and Path(source).is_file():
        tracker = results_dir / copy_name(fmt, Path(source))
        shutil.copyfile(source, tracker)
    if tracker is None:
        what = {"tensorboard": "TensorBoard event files", "xtuner": "tracker.jsonl"}.get(fmt, f"{fmt} metric log")
        where = source or (exp_dir and f"{exp_dir}/logs") or f"{work_dir} (no exp dir)"
        notes.append(f"no {what} at {where}")
    if exp_dir is not None and not Path(work_dir).resolve().is_relative_to(results_dir.resolve()):
        # a work dir outside the results folder (a launch script that picks its own) is not uploaded:
        # keep the run's logs (never its checkpoints) with the results
        _copy_logs(exp_dir / "logs", results_dir / "work_logs" / exp_dir.name)
        _copy_logs(Path(work_dir), results_dir / "work_logs", since=since, top_only=True)
    copied = []
    for label, folder in (("exp_dir", exp_dir), ("work_dir", Path(work_dir))):
        if folder is None or not folder.is_dir():
            continue
        for path in sorted(folder.iterdir()):
            if path.is_file() and path.suffix in CONFIG_SUFFIXES:
                target = results_dir / "run_config" / label / path.name
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(path, target)
                copied.append(target)
    if not copied:
        notes.append("no config files found")
    return Artifacts(exp_dir=exp_dir, tracker=tracker, tracker_source=Path(source) if source else None,
                     run_config=tuple(copied), notes=tuple(notes))


LOG_SUFFIXES = (".log", ".txt", ".jsonl", ".json")


def _copy_event_files(source: Path, target: Path) -> Path | None:
    """Copy one event file, or every one below a folder (keeping sub-folders); None when there is none."""
    files = [source] if source.is_file() else sorted(p for p in source.rglob("*tfevents*") if p.is_file())
    for file in files:
        dest = target / (file.name if source.is_file() else file.relative_to(source))
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(file, dest)
    return target if files else None


def _copy_logs(folder: Path, target: Path, *, since: float | None = None, top_only: bool = False) -> None:
    """Copy text logs from ``folder`` (all levels, or its top only), those changed since ``since``."""
    if not folder.is_dir():
        return
    for path in (folder.iterdir() if top_only else folder.rglob("*")):
        if not path.is_file() or path.suffix not in LOG_SUFFIXES:
            continue
        if since is not None and path.stat().st_mtime < since:
            continue  # an earlier run's log in a shared work dir
        dest = target / path.relative_to(folder)
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, dest)


def artifacts_for(case: Case, work_dir: Path, results_dir: Path, *, since: float | None = None,
                  environ: Mapping[str, str] | None = None) -> Artifacts:
    """``collect_artifacts`` at the place ``case`` says its tracker appears."""
    folder, explicit = tracker_location(case, work_dir, os.environ if environ is None else environ)
    return collect_artifacts(folder, results_dir, tracker_path=explicit, since=since, fmt=case.tracker.format)
