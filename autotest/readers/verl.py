"""verl's JSONL file logger → :class:`~autotest.judge.trace.Trace`: ``{"step": N, "data": {metric: value}}``
per line; a key starting ``val`` or ``eval`` makes its step an eval step."""

from __future__ import annotations

from itertools import repeat
from pathlib import Path

from autotest.errors import UsageError
from autotest.judge.trace import Trace
from autotest.readers.jsonl import iter_rows, raise_file_error
from autotest.readers.trace_builder import Builder, step_of


def read_verl(path: Path, keep: frozenset[str] | None = None) -> Trace:
    """verl's JSONL logger: ``{"step": N, "data": {metric: value, ...}}`` per step."""
    builder = Builder(path, "verl", keep)
    rows = iter_rows(path, builder.file_warnings)
    try:
        for number, row, line in rows:
            step = step_of(f"{path}:{number}", row.get("step"))
            data = row.get("data")
            if not isinstance(data, dict):
                raise UsageError(f"{path}:{number}: key 'data' must be an object in verl format")
            if not builder.admit(step, data, number, hash(line.strip())):
                continue
            builder.mark(step, map(str.startswith, data, repeat(("val", "eval"))))
            builder.put_row(step, data, number)
    except UsageError:
        raise_file_error(rows)
        raise
    return builder.build()


def sniff(row: object, line: str | None) -> str | None:
    """verl nests each row's metrics under ``data``."""
    return "verl" if isinstance(row, dict) and isinstance(row.get("data"), dict) else None
