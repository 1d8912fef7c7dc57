"""Find a run's metric log in a work dir, whatever wrote it, and say where it looked.

One place for "where does each framework put its log" (the readers, ``compare --current WORK_DIR``,
the launcher's artifact collection and calibration all ask here). The kinds of log and where each is
looked for are the formats' layouts (:func:`autotest.readers.registry.layouts`), in order of preference:

1. **xtuner tracker.jsonl**: ``<YYYYmmddHHMMSS>/logs/exp_tracking/tracker.jsonl`` in the newest exp dir
   (``rank0/`` for SFT), or ``logs/exp_tracking/tracker.jsonl``, ``exp_tracking/tracker.jsonl``,
   ``tracker.jsonl`` directly in the folder;
2. **other JSONL logs** (verl's file logger, a Hugging Face ``TrainerCallback`` writing ``on_log`` rows, a W&B
   history export): ``*.jsonl`` up to :data:`JSONL_DEPTH` folders down;
3. **Hugging Face trainer_state.json**: at the top (``trainer.save_state()``), else the newest one up to
   :data:`JSONL_DEPTH` folders down (an ``output_dir`` with ``checkpoint-<N>/`` folders: the highest N);
4. **TensorBoard event files** (``events.out.tfevents.*``) below the folder: the folder that holds
   them all (a resumed run's later files beside the first ones);
5. then the later formats' layouts (an MLflow run, a W&B offline run or CSV export, console logs, plugins').

When timestamped exp dirs exist, only the newest is searched (an older one is an earlier run), for the
xtuner tracker and TensorBoard events.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from autotest.inputs.tracker_layout import SFT_TRACKER_RELATIVE, TRACKER_RELATIVE, exp_dirs
from autotest.readers.registry import (
    JSONL_LAYOUT,
    TENSORBOARD_LAYOUT,
    TRAINER_STATE_LAYOUT,
    Layout,
    layouts,
)
from autotest.readers.registry import XTUNER_LAYOUT as _XTUNER
from autotest.readers.registry import find as find_format
from autotest.readers.registry import get as format_record
from autotest.readers.registry import split_option

EVENT_FILE_MARK = "tfevents"
TRAINER_STATE = "trainer_state.json"
#: how deep below the work dir (or the newest exp dir) JSONL logs are looked for
JSONL_DEPTH = JSONL_LAYOUT.depth
_CHECKPOINT = re.compile(r"^checkpoint-(\d+)$")

#: kinds of log, by how they are found (a JSONL log's format is told from its rows by the reader)
XTUNER_LAYOUT, JSONL, TRAINER_STATE_KIND, TENSORBOARD = _XTUNER.kind, JSONL_LAYOUT.kind, TRAINER_STATE_LAYOUT.kind, \
    TENSORBOARD_LAYOUT.kind
#: folders holding the harness's own copies of a run's logs, never searched
_SKIPPED = ("work_logs",)


def looked_for() -> tuple[str, ...]:
    """Where each kind is looked for, as every "not found" message says it."""
    return tuple(layout.looked_for for layout in layouts())


@dataclass(frozen=True)
class FoundLog:
    """A metric log found in a work dir: the file (or, for TensorBoard, the folder) and its kind."""

    path: Path
    kind: str

    def describe(self, root: Path) -> str:
        try:
            shown = self.path.relative_to(root)
        except ValueError:
            shown = self.path
        return f"{shown or '.'} ({self.kind})"


def is_event_file(path: Path) -> bool:
    return path.is_file() and EVENT_FILE_MARK in path.name


def _limited(folder: Path, pattern: str, depth: int) -> list[Path]:
    found: list[Path] = []
    for level in range(depth + 1):
        found += sorted(p for p in folder.glob("/".join(["*"] * level + [pattern])) if p.is_file())
    return found


def _common_folder(files: list[Path]) -> Path:
    parts = [f.parent.parts for f in files]
    common = []
    for level in zip(*parts):
        if len(set(level)) != 1:
            break
        common.append(level[0])
    return Path(*common)


def _checkpoint_number(path: Path) -> int:
    match = _CHECKPOINT.match(path.parent.name)
    return int(match.group(1)) if match else -1


def _skipped(path: Path, root: Path) -> bool:
    return any(part in _SKIPPED for part in path.relative_to(root).parts)


def _output_dir(path: Path) -> Path:
    """The folder a run wrote ``path`` into (a checkpoint's parent for ``checkpoint-<N>/trainer_state.json``)."""
    return path.parent.parent if _checkpoint_number(path) >= 0 else path.parent


def _newest(root: Path, layout: Layout) -> Path | None:
    """The file at the top, else the newest below; of several output dirs the one written last is this
    run's, and in it the highest checkpoint."""
    top = next((root / p for p in layout.patterns if (root / p).is_file()
                and (layout.beside is None or (root / layout.beside).exists())), None)
    if top is not None:
        return top
    files = [p for pattern in layout.patterns for p in _limited(root, pattern, layout.depth) if not _skipped(p, root)
             and (layout.beside is None or (p.parent / layout.beside).exists())]
    newest_write: dict[Path, int] = {}
    for path in files:
        out = _output_dir(path)
        newest_write[out] = max(newest_write.get(out, 0), path.stat().st_mtime_ns)
    return max(files, key=lambda p: (newest_write[_output_dir(p)], _checkpoint_number(p)), default=None)


def _found(root: Path, layout: Layout, taken: set[Path]) -> list[Path]:
    """The logs of one layout in ``root`` (a folder for "folder" layouts)."""
    if layout.pick == "first":
        return [p for p in (root / pattern for pattern in layout.patterns) if p.is_file()][:1]
    if layout.pick == "each":
        return [p for pattern in layout.patterns for p in _limited(root, pattern, layout.depth)
                if p not in taken and not _skipped(p, root)]
    if layout.pick == "newest":
        newest = _newest(root, layout)
        return [] if newest is None else [newest if layout.beside is None else newest.parent]
    files = sorted(p for pattern in layout.patterns for p in root.rglob(pattern) if p.is_file())
    return [_common_folder(files)] if files else []


def find_logs(work_dir: Path, fmt: str = "auto") -> list[FoundLog]:
    """Every metric log in ``work_dir``, most preferred first (see the module doc); [] when none.

    A kind not searched by default (console logs) is searched when ``fmt`` reads it."""
    root = Path(work_dir)
    dirs = exp_dirs(root)
    if dirs:  # an xtuner work dir: the newest exp dir is the run, and xtuner writes JSONL or TensorBoard
        newest = dirs[-1]
        found = [FoundLog(p, XTUNER_LAYOUT) for p in (newest / TRACKER_RELATIVE, newest / SFT_TRACKER_RELATIVE)
                 if p.is_file()][:1]
        events = _found(newest / "logs", TENSORBOARD_LAYOUT, set()) if (newest / "logs").is_dir() else []
        return found + [FoundLog(p, TENSORBOARD) for p in events]
    found: list[FoundLog] = []
    asked = () if fmt == "auto" else kinds_of_format(fmt)
    for layout in layouts():
        if layout.always or layout.kind in asked:
            found += [FoundLog(p, layout.kind) for p in _found(root, layout, {f.path for f in found})]
    return found


def not_found_message(work_dir: Path, fmt: str = "auto") -> str:
    """One line: nothing (of ``fmt``) found in ``work_dir``, every place looked, and what is there."""
    root = Path(work_dir)
    what = "no metric log" if fmt == "auto" else f"no {fmt} metric log"
    dirs = exp_dirs(root)
    if dirs:
        newest = dirs[-1]
        listed = sorted(str(p.relative_to(root)) for p in newest.rglob("*") if p.is_file()
                        and (p.suffix == ".jsonl" or EVENT_FILE_MARK in p.name))[:10]
        return (f"{root}: {what} in the newest exp dir {newest.name} (an older one is an earlier run); looked "
                f"for {TRACKER_RELATIVE} (or rank0/ for SFT) and TensorBoard event files below logs/ (found: "
                f"{', '.join(listed) or 'no .jsonl or event files'}); is exp_tracker set to jsonl or tensorboard?")
    listing = sorted(p.name + ("/" if p.is_dir() else "") for p in root.iterdir())[:10]
    return (f"{root}: {what} found; looked for: {'; '.join(looked_for())}; entries: "
            f"{', '.join(listing) or 'empty'}; pass the log itself, or check the run's logger settings")


def kinds_of_format(fmt: str) -> tuple[str, ...]:
    """Which found kinds a ``fmt`` log can be (its record's layouts; ``fmt`` with or without its option)."""
    record = find_format(split_option(fmt)[0]) or format_record(fmt)  # an unknown name: one line
    return record.layouts_kinds


def _written_since(found: FoundLog, since: float | None) -> bool:
    if since is None:
        return True
    files = [p for p in found.path.rglob("*") if p.is_file()] if found.path.is_dir() else [found.path]
    return any(p.stat().st_mtime >= since for p in files)


def log_for_format(work_dir: Path, fmt: str, since: float | None = None) -> Path | None:
    """The first log in ``work_dir`` of a kind ``fmt`` can be, written at or after ``since``; None when none.

    For a run launched by the harness: a log left in a shared work dir by an earlier run is not this run's.
    """
    if not Path(work_dir).is_dir():
        return None
    kinds = kinds_of_format(fmt)
    return next((f.path for f in find_logs(work_dir, fmt) if f.kind in kinds and _written_since(f, since)), None)


def log_signature(path: Path) -> tuple:
    """What changes when a log grows: a file's size and mtime; for a folder (event files, an MLflow run), each file's."""
    path = Path(path)
    if path.is_dir():
        return tuple((str(p), p.stat().st_size, p.stat().st_mtime_ns) for p in sorted(path.rglob("*")) if p.is_file())
    stat = path.stat()
    return (str(path), stat.st_size, stat.st_mtime_ns)
