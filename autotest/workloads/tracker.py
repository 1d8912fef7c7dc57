"""The metric log writer, in xtuner's RL layout.

``$WORK_DIR/<YYYYmmddHHMMSS>/logs/exp_tracking/tracker.jsonl``: one JSON object per line,
appended and flushed per call, ``NaN``/``Infinity`` written as literals. The newest
timestamp dir is the current run; the run's config sits beside ``logs/`` as
``config.json``.
"""

from __future__ import annotations

import datetime as _dt
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from autotest.errors import UsageError

TRACKER_RELPATH = Path("logs") / "exp_tracking" / "tracker.jsonl"
TIMESTAMP_FORMAT = "%Y%m%d%H%M%S"


def make_exp_dir(work_dir: Path, now: _dt.datetime | None = None) -> Path:
    """Create and return a fresh ``<work_dir>/<14-digit timestamp>`` dir.

    A second run started within the same second takes the next free second, so the
    newest dir name is always the newest run.
    """
    try:
        work_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"--work-dir {work_dir}: cannot create it ({exc.strerror})") from None
    stamp = now or _dt.datetime.now()
    newest = max((p.name for p in work_dir.iterdir() if p.name.isdigit() and len(p.name) == 14), default="")
    if newest >= stamp.strftime(TIMESTAMP_FORMAT):
        stamp = _dt.datetime.strptime(newest, TIMESTAMP_FORMAT) + _dt.timedelta(seconds=1)
    while True:
        exp_dir = work_dir / stamp.strftime(TIMESTAMP_FORMAT)
        try:
            exp_dir.mkdir()
            return exp_dir
        except FileExistsError:
            stamp += _dt.timedelta(seconds=1)


class JsonlTracker:
    """Appends one metric row per ``write`` to ``tracker.jsonl`` and flushes it."""

    def __init__(self, exp_dir: Path) -> None:
        self.path = exp_dir / TRACKER_RELPATH
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._file = self.path.open("a", encoding="utf-8")

    @staticmethod
    def serialize(row: Mapping[str, Any]) -> str:
        """One row as its JSON line (newline included)."""
        return json.dumps(dict(row), allow_nan=True) + "\n"

    def write(self, row: Mapping[str, Any]) -> None:
        """Append ``row``; it must carry an integer ``step``."""
        assert isinstance(row.get("step"), int), row
        self.write_text(self.serialize(row))

    def write_text(self, text: str) -> None:
        """Append raw text and flush (the fault catalogue uses it to cut a line)."""
        self._file.write(text)
        self._file.flush()

    def close(self) -> None:
        """Close the file."""
        self._file.close()


def write_config(exp_dir: Path, config: Mapping[str, Any]) -> Path:
    """Save the run's config as ``<exp_dir>/config.json`` and return its path."""
    path = exp_dir / "config.json"
    path.write_text(json.dumps(dict(config), indent=2, sort_keys=True) + "\n", encoding="utf-8")
    return path

