"""Keep what a run left behind with its results, whatever happened: the tracker and the saved config."""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from autotest.inputs.case import Case
from autotest.inputs.tracker_layout import newest_exp_dir, tracker_in, tracker_location

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
                      since: float | None = None) -> Artifacts:
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
        source = tracker_in(exp_dir)
    tracker = None
    if source is not None and Path(source).is_file():
        tracker = results_dir / "tracker.jsonl"
        shutil.copyfile(source, tracker)
    else:
        where = source or (exp_dir and f"{exp_dir}/logs/exp_tracking") or f"{work_dir} (no exp dir)"
        notes.append(f"no tracker.jsonl at {where}")
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


def artifacts_for(case: Case, work_dir: Path, results_dir: Path, *, since: float | None = None,
                  environ: Mapping[str, str] | None = None) -> Artifacts:
    """``collect_artifacts`` at the place ``case`` says its tracker appears."""
    folder, explicit = tracker_location(case, work_dir, os.environ if environ is None else environ)
    return collect_artifacts(folder, results_dir, tracker_path=explicit, since=since)
