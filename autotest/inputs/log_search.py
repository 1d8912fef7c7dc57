"""Find a run's metric log in a work dir, whatever wrote it, and say where it looked.

One place for "where does each framework put its log" (the readers, ``compare --current WORK_DIR``,
the launcher's artifact collection and calibration all ask here). In order of preference:

1. **xtuner tracker.jsonl**: ``<YYYYmmddHHMMSS>/logs/exp_tracking/tracker.jsonl`` in the newest exp dir
   (``rank0/`` for SFT), or ``logs/exp_tracking/tracker.jsonl``, ``exp_tracking/tracker.jsonl``,
   ``tracker.jsonl`` directly in the folder;
2. **other JSONL logs** (verl's file logger, a Hugging Face ``TrainerCallback`` writing ``on_log`` rows):
   ``*.jsonl`` up to :data:`JSONL_DEPTH` folders down;
3. **Hugging Face trainer_state.json**: at the top (``trainer.save_state()``), else the newest one up to
   :data:`JSONL_DEPTH` folders down (an ``output_dir`` with ``checkpoint-<N>/`` folders: the highest N);
4. **TensorBoard event files** (``events.out.tfevents.*``) below the folder: the folder that holds
   them all (a resumed run's later files beside the first ones).

When timestamped exp dirs exist, only the newest is searched (an older one is an earlier run).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from autotest.inputs.tracker_layout import SFT_TRACKER_RELATIVE, TRACKER_RELATIVE, exp_dirs

EVENT_FILE_MARK = "tfevents"
TRAINER_STATE = "trainer_state.json"
#: how deep below the work dir (or the newest exp dir) JSONL logs are looked for
JSONL_DEPTH = 3
_CHECKPOINT = re.compile(r"^checkpoint-(\d+)$")

#: kinds of log, by how they are found (a JSONL log's format is told from its rows by the reader)
XTUNER_LAYOUT, JSONL, TRAINER_STATE_KIND, TENSORBOARD = "xtuner tracker", "JSONL log", "trainer_state.json", \
    "TensorBoard events"

#: where each kind is looked for, as every "not found" message says it
LOOKED_FOR = (
    f"xtuner tracker (<14-digit timestamp>/{TRACKER_RELATIVE}, {TRACKER_RELATIVE}, tracker.jsonl)",
    f"JSONL logs of verl or a Hugging Face TrainerCallback (*.jsonl up to {JSONL_DEPTH} levels down)",
    f"Hugging Face {TRAINER_STATE} (at the top, else the newest up to {JSONL_DEPTH} levels down, e.g. "
    "<output_dir>/checkpoint-<N>/)",
    "TensorBoard event files (events.out.tfevents.* below it)",
)


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


def _trainer_state(root: Path) -> Path | None:
    """The top trainer_state.json, else the newest below (a TRL/HF ``output_dir`` inside the work dir)."""
    if (root / TRAINER_STATE).is_file():
        return root / TRAINER_STATE
    states = [p for p in _limited(root, TRAINER_STATE, JSONL_DEPTH) if "work_logs" not in p.relative_to(root).parts]
    # of several output dirs the one written last is this run's; in it, the highest checkpoint
    newest_write: dict[Path, int] = {}
    for path in states:
        out = path.parent.parent if _checkpoint_number(path) >= 0 else path.parent
        newest_write[out] = max(newest_write.get(out, 0), path.stat().st_mtime_ns)

    def rank(path: Path) -> tuple[int, int]:
        out = path.parent.parent if _checkpoint_number(path) >= 0 else path.parent
        return newest_write[out], _checkpoint_number(path)

    return max(states, key=rank, default=None)


def find_logs(work_dir: Path) -> list[FoundLog]:
    """Every metric log in ``work_dir``, most preferred first (see the module doc); [] when none."""
    root = Path(work_dir)
    dirs = exp_dirs(root)
    if dirs:  # an xtuner work dir: the newest exp dir is the run, and xtuner writes JSONL or TensorBoard
        newest = dirs[-1]
        found = [FoundLog(p, XTUNER_LAYOUT) for p in (newest / TRACKER_RELATIVE, newest / SFT_TRACKER_RELATIVE)
                 if p.is_file()][:1]
        events = sorted(p for p in (newest / "logs").rglob(f"*{EVENT_FILE_MARK}*") if p.is_file()) \
            if (newest / "logs").is_dir() else []
        return found + ([FoundLog(_common_folder(events), TENSORBOARD)] if events else [])
    found = [FoundLog(p, XTUNER_LAYOUT) for p in
             (root / TRACKER_RELATIVE, root / "exp_tracking" / "tracker.jsonl", root / "tracker.jsonl")
             if p.is_file()][:1]
    taken = {f.path for f in found}
    for path in _limited(root, "*.jsonl", JSONL_DEPTH):
        if path not in taken and "work_logs" not in path.relative_to(root).parts:  # the harness's log copies
            found.append(FoundLog(path, JSONL))
    state = _trainer_state(root)
    if state is not None:
        found.append(FoundLog(state, TRAINER_STATE_KIND))
    events = sorted(p for p in root.rglob(f"*{EVENT_FILE_MARK}*") if p.is_file())
    if events:
        found.append(FoundLog(_common_folder(events), TENSORBOARD))
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
    return (f"{root}: {what} found; looked for: {'; '.join(LOOKED_FOR)}; entries: "
            f"{', '.join(listing) or 'empty'}; pass the log itself, or check the run's logger settings")


#: which found kinds a case's ``tracker.format`` can read
KINDS_OF_FORMAT = {"xtuner": (XTUNER_LAYOUT, JSONL), "verl": (JSONL,), "hf-trainer": (TRAINER_STATE_KIND, JSONL),
                   "tensorboard": (TENSORBOARD,)}


def _written_since(found: FoundLog, since: float | None) -> bool:
    if since is None:
        return True
    files = [p for p in found.path.rglob(f"*{EVENT_FILE_MARK}*") if p.is_file()] if found.path.is_dir() \
        else [found.path]
    return any(p.stat().st_mtime >= since for p in files)


def log_for_format(work_dir: Path, fmt: str, since: float | None = None) -> Path | None:
    """The first log in ``work_dir`` of a kind ``fmt`` can be, written at or after ``since``; None when none.

    For a run launched by the harness: a log left in a shared work dir by an earlier run is not this run's.
    """
    if not Path(work_dir).is_dir():
        return None
    kinds = KINDS_OF_FORMAT.get(fmt, ())
    return next((f.path for f in find_logs(work_dir) if f.kind in kinds and _written_since(f, since)), None)


def log_signature(path: Path) -> tuple:
    """What changes when a log grows: a file's size and mtime; for a folder of event files, each file's."""
    path = Path(path)
    if path.is_dir():
        return tuple((str(p), p.stat().st_size, p.stat().st_mtime_ns)
                     for p in sorted(path.rglob(f"*{EVENT_FILE_MARK}*")) if p.is_file())
    stat = path.stat()
    return (str(path), stat.st_size, stat.st_mtime_ns)
