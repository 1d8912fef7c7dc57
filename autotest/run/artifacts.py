"""Keep what a run left behind with its results, whatever happened: the tracker and the saved config."""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from autotest.errors import WriteFailed
from autotest.files import copy_atomic, make_folder
from autotest.inputs.case import Case
from autotest.inputs.log_search import log_for_format
from autotest.inputs.tracker_layout import copy_name, newest_exp_dir, tracker_in, tracker_location
from autotest.readers.registry import get as format_record
from autotest.redaction import mask_file

CONFIG_SUFFIXES = (".py", ".json", ".yaml", ".yml", ".toml", ".sh")


@dataclass(frozen=True)
class Artifacts:
    """What ``collect_artifacts`` found and copied; None/empty when absent."""

    exp_dir: Path | None
    tracker: Path | None  # the copy in results_dir
    tracker_source: Path | None
    run_config: tuple[Path, ...]
    notes: tuple[str, ...]
    #: one line per copy that could not be written (disk full, read-only); no partial copy is left
    unsaved: tuple[str, ...] = ()

    @property
    def judged_tracker(self) -> Path | None:
        """The copy, else (when the copy could not be written) the run's own log it was copied from."""
        if self.tracker is None and self.unsaved and self.tracker_source is not None:
            return self.tracker_source if self.tracker_source.exists() else None
        return self.tracker


def collect_artifacts(work_dir: Path, results_dir: Path, *, tracker_path: Path | None = None,
                      since: float | None = None, fmt: str = "xtuner") -> Artifacts:
    """Copy the run's tracker.jsonl and config files into ``results_dir``, tolerating absence.

    The tracker comes from ``tracker_path`` when given, else the newest exp dir under
    ``work_dir`` (``logs/exp_tracking/tracker.jsonl``, or ``rank0/`` for SFT). Config files
    (py/json/yaml/toml/sh at the top of the exp dir and of the work dir, where run_rl.sh copies
    the config and itself) go to ``run_config/exp_dir/`` and ``run_config/work_dir/``.
    Every copy is whole or absent (:func:`autotest.files.copy_atomic`); one that could not be written is a
    line in ``unsaved`` and the others are still tried.
    """
    results_dir = Path(results_dir)
    make_folder(results_dir)
    notes: list[str] = []
    unsaved: list[str] = []
    exp_dir = newest_exp_dir(work_dir, since) if Path(work_dir).is_dir() else None
    source = tracker_path
    if source is None and exp_dir is not None:
        source = tracker_in(exp_dir, fmt)
    elif source is None:
        source = log_for_format(Path(work_dir), fmt, since)  # no exp dirs: verl, a Hugging Face output_dir, ...
    tracker = None
    record = format_record(fmt)
    try:
        if record.folder and source is not None and Path(source).exists():
            tracker = _copy_folder(Path(source), results_dir / copy_name(fmt, Path(source)), record.copy_glob)
        elif not record.folder and source is not None and Path(source).is_file():
            tracker = copy_atomic(Path(source), results_dir / copy_name(fmt, Path(source)))
    except WriteFailed as exc:
        unsaved.append(str(exc))
    if tracker is None and not unsaved:
        what = record.called or f"{record.name} metric log"
        where = source or (exp_dir and f"{exp_dir}/logs") or f"{work_dir} (no exp dir)"
        notes.append(f"no {what} at {where}")
    if exp_dir is not None and not Path(work_dir).resolve().is_relative_to(results_dir.resolve()):
        # a work dir outside the results folder (a launch script that picks its own) is not uploaded:
        # keep the run's logs (never its checkpoints) with the results
        for args in ((exp_dir / "logs", results_dir / "work_logs" / exp_dir.name, None, False),
                     (Path(work_dir), results_dir / "work_logs", since, True)):
            try:
                _copy_logs(*args)
            except WriteFailed as exc:
                unsaved.append(str(exc))
    copied = []
    for label, folder in (("exp_dir", exp_dir), ("work_dir", Path(work_dir))):
        if folder is None or not folder.is_dir():
            continue
        for path in sorted(folder.iterdir()):
            if path.is_file() and path.suffix in CONFIG_SUFFIXES:
                try:
                    copied.append(copy_atomic(path, results_dir / "run_config" / label / path.name))
                except WriteFailed as exc:
                    unsaved.append(str(exc))
    if not copied:
        notes.append("no config files found")
    return Artifacts(exp_dir=exp_dir, tracker=tracker, tracker_source=Path(source) if source else None,
                     run_config=tuple(copied), notes=tuple(notes), unsaved=tuple(unsaved))


LOG_SUFFIXES = (".log", ".txt", ".jsonl", ".json")


def _copy_folder(source: Path, target: Path, pattern: str) -> Path | None:
    """Copy one file of a folder format (an event file), or every one matching ``pattern`` below a folder
    (keeping sub-folders); None when there is none."""
    files = [source] if source.is_file() else sorted(p for p in source.rglob(pattern) if p.is_file())
    for file in files:
        try:
            copy_atomic(file, target / (file.name if source.is_file() else file.relative_to(source)))
        except WriteFailed:
            shutil.rmtree(target, ignore_errors=True)  # some of the files alone would look like the whole run
            raise
    return target if files else None


def _copy_logs(folder: Path, target: Path, since: float | None = None, top_only: bool = False) -> None:
    """Copy text logs from ``folder`` (all levels, or its top only), those changed since ``since``."""
    if not folder.is_dir():
        return
    for path in (folder.iterdir() if top_only else folder.rglob("*")):
        if not path.is_file() or path.suffix not in LOG_SUFFIXES:
            continue
        if since is not None and path.stat().st_mtime < since:
            continue  # an earlier run's log in a shared work dir
        copy_atomic(path, target / path.relative_to(folder))


def artifacts_for(case: Case, work_dir: Path, results_dir: Path, *, since: float | None = None,
                  environ: Mapping[str, str] | None = None) -> Artifacts:
    """``collect_artifacts`` at the place ``case`` says its tracker appears."""
    folder, explicit = tracker_location(case, work_dir, os.environ if environ is None else environ)
    return collect_artifacts(folder, results_dir, tracker_path=explicit, since=since, fmt=case.tracker.format)


def mask_logs(results_dir: Path) -> list[str]:
    """The run's stdout/stderr (uploaded as CI artifacts) with secret values masked, once the run has ended.

    A log that cannot be masked (no room for the masked copy) is removed rather than uploaded with its
    secrets; the returned lines say so."""
    lost = []
    for log in (*results_dir.glob("logs/*.log"), *results_dir.glob("attempts/*/logs/*.log"),
                *results_dir.glob("resume/logs/*.log"), *results_dir.glob("attempts/*/resume/logs/*.log")):
        try:
            mask_file(log)
        except WriteFailed as exc:
            log.unlink(missing_ok=True)
            lost.append(f"{exc} (the log was removed: its secret values could not be masked)")
    return lost
