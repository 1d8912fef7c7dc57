"""Weights & Biases runs → :class:`~autotest.judge.trace.Trace`: an offline run's ``run-*.wandb``, or an exported history.

- **Offline run** (``WANDB_MODE=offline``: ``wandb/offline-run-<time>-<id>/run-<id>.wandb``): the record log
  the W&B service writes and ``wandb sync`` uploads. wandb 0.31 ships no Python reader for it (its service is
  written in Go; the old ``wandb.sdk.internal.datastore`` is gone), so the framing is read here: a 7-byte
  header (``:W&B``, magic ``0xBEE1``, version), then LevelDB-log records in 32 KiB blocks (each chunk: CRC-32
  seeded with its type, length, type FULL/FIRST/MIDDLE/LAST). Each record is a ``wandb.proto`` ``Record``,
  parsed with the ``wandb`` package's own protobuf classes (the ``wandb`` extra): its ``history`` rows are
  the run's logged rows, at their ``_step``.
- **Exported history** (``run.history()`` or ``run.scan_history()`` from the public API, saved as CSV with
  pandas' ``to_csv`` or as JSON lines): one row per step, a ``_step`` column plus one per metric; an empty
  CSV cell is a metric not logged at that step. Needs no extra.

``_step`` is the step; ``_timestamp`` and ``_runtime`` are bookkeeping, not metrics. A value that is not a
number (a histogram, an image: a dict; a list, a bool) is noted as such, never dropped silently. A metric
named ``val*``/``eval*`` makes its step an eval step. Rows at one step merge as :mod:`autotest.readers.merge`
says (a resumed run re-logging a step).
"""

from __future__ import annotations

import csv
import json
import struct
import zlib
from pathlib import Path
from typing import Iterator

from autotest.errors import UsageError
from autotest.judge.trace import Trace
from autotest.readers.jsonl import iter_rows, raise_file_error
from autotest.readers.trace_builder import Builder, step_of

FORMAT = "wandb"
STEP = "_step"
BOOKKEEPING = frozenset({"_timestamp", "_runtime"})
EVAL_PREFIXES = ("val", "eval")
_HEADER = b":W&B"
_MAGIC = 0xBEE1
_BLOCK = 32768
_CHUNK = struct.Struct("<IHB")  # CRC-32, length, type
_FULL, _FIRST, _MIDDLE, _LAST = 1, 2, 3, 4
_CRC_SEED = [zlib.crc32(bytes([kind])) for kind in range(_LAST + 1)]


def _corrupt(path: Path, offset: int, number: int, why: str) -> UsageError:
    return UsageError(f"{path}: W&B run file is corrupt at byte {offset} (record {number + 1} {why}; {number} records "
                      "before it are intact); restore the file or rerun")


def _records(path: Path, warnings: list[str]) -> Iterator[tuple[int, bytes]]:
    """(record number, payload) of each record of a ``.wandb`` file; one error line for a corrupt one, a warning
    for a cut-short last one (a killed run), which is dropped."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise UsageError(f"{path}: cannot read metric log ({exc.strerror}); check the path") from None
    if len(data) < 7 or data[:4] != _HEADER or struct.unpack("<H", data[4:6])[0] != _MAGIC:
        raise UsageError(f"{path}: not a W&B run file (no ':W&B' header); pass an offline run's run-<id>.wandb")
    offset, number, pending = 7, 0, b""
    while offset + _CHUNK.size <= len(data):
        if _BLOCK - offset % _BLOCK < _CHUNK.size:
            offset += _BLOCK - offset % _BLOCK  # the block's tail is padding
            continue
        crc, length, kind = _CHUNK.unpack_from(data, offset)
        payload = data[offset + _CHUNK.size:offset + _CHUNK.size + length]
        if kind == 0 and length == 0 and crc == 0:
            if data[offset:].strip(b"\0"):  # zeros, then data again: not a file's unwritten tail
                raise _corrupt(path, offset, number, "is a zeroed header with data after it")
            break  # zero padding at the end of a file still being written
        if offset % _BLOCK + _CHUNK.size + length > _BLOCK:  # a chunk never crosses its block: the length is bad
            raise _corrupt(path, offset, number, f"declares {length} bytes, past the end of its 32 KiB block")
        if len(payload) < length:  # the file ends inside this chunk's own block: the run was killed mid-write
            warnings.append(f"{path}: truncated final record dropped at byte {offset} (the run was probably killed)")
            return
        if kind > _LAST or zlib.crc32(payload, _CRC_SEED[kind]) != crc:
            raise _corrupt(path, offset, number, "fails its checksum")
        offset += _CHUNK.size + length
        pending = payload if kind in (_FULL, _FIRST) else pending + payload
        if kind in (_FULL, _LAST):
            number += 1
            yield number, pending
            pending = b""
    else:  # the data ran out: a header cut short, or a record whose last chunk was never written
        if pending or data[offset:].strip(b"\0"):
            warnings.append(f"{path}: truncated final record dropped at byte {offset} (the run was probably killed)")


def _offline_rows(path: Path, warnings: list[str]) -> Iterator[tuple[int, dict]]:
    try:
        from wandb.proto import wandb_internal_pb2
    except ImportError:
        raise UsageError("reading a W&B offline run needs the wandb package: pip install 'rl-autotest[wandb]' (or "
                         "export the run's history to CSV and read that)") from None
    for number, payload in _records(path, warnings):
        record = wandb_internal_pb2.Record()
        try:
            record.ParseFromString(payload)
        except Exception:  # noqa: BLE001 - protobuf's DecodeError; name the record
            raise UsageError(f"{path}: record {number} is not a W&B record (a newer wandb format?); read an "
                             "exported history instead") from None
        if record.WhichOneof("record_type") != "history":
            continue
        row: dict[str, object] = {}
        media: dict[str, dict] = {}  # a histogram or an image: its fields under the key it was logged as
        for item in record.history.item:
            value = json.loads(item.value_json) if item.value_json else None
            path = [item.key] if item.key else list(item.nested_key)
            if len(path) > 1:
                media.setdefault(path[0], {})[".".join(path[1:])] = value
            else:
                row[path[0]] = value
        for key, fields in media.items():
            if "_type" in fields:
                row[key] = fields
            else:  # a nested dict of numbers: W&B shows each leaf as "outer.inner"
                row.update({f"{key}.{inner}": value for inner, value in fields.items()})
        yield number, row


def _csv_number(text: str) -> object:
    if text == "":
        return _ABSENT
    if text in ("True", "False"):  # pandas writes a bool so
        return text == "True"
    try:
        return json.loads(text)
    except ValueError:
        try:
            return float(text)  # nan, inf as pandas writes them
        except ValueError:
            return text


_ABSENT = object()


def _csv_rows(path: Path) -> Iterator[tuple[int, dict]]:
    try:
        with path.open(encoding="utf-8", newline="") as handle:
            reader = csv.reader(handle)
            header = next(reader, None)
            if header is None or STEP not in header:
                raise UsageError(f"{path}: CSV has no {STEP} column (header: {', '.join((header or [])[:6])}); "
                                 "export the W&B history with its _step (run.history() keeps it)")
            seen: dict[str, int] = {}
            for column, name in enumerate(header, 1):
                if name and name in seen:  # csv would keep the last column's value silently
                    raise UsageError(f"{path}:1: column {name!r} appears twice in the header (columns {seen[name]} "
                                     f"and {column}); export the history again, or rename one")
                seen.setdefault(name, column)
            for number, cells in enumerate(reader, 2):
                if len(cells) != len(header):
                    raise UsageError(f"{path}:{number}: {len(cells)} cells for {len(header)} columns; is the "
                                     "export complete?")
                values = {k: _csv_number(v) for k, v in zip(header, cells) if k}
                yield number, {k: v for k, v in values.items() if v is not _ABSENT}
    except OSError as exc:
        raise UsageError(f"{path}: cannot read metric log ({exc.strerror}); check the path") from None


def read_wandb(path: Path, keep: frozenset[str] | None = None) -> Trace:
    """Read an offline run (``*.wandb``), a CSV export or a JSON-lines export (see the module doc)."""
    path = Path(path)
    offline = path.suffix == ".wandb"
    builder = Builder(path, FORMAT, keep, ignored=BOOKKEEPING,
                      label="record {}".format if offline else "line {}".format)
    if offline:
        rows: Iterator = ((n, r, b"") for n, r in _offline_rows(path, builder.file_warnings))
    elif path.suffix == ".csv":
        rows = ((n, r, b"") for n, r in _csv_rows(path))
    else:
        rows = iter_rows(path, builder.file_warnings)
    label = "record {}" if offline else "line {}"
    try:
        for number, row, line in rows:
            where = f"{path}: {label.format(number)}" if offline else f"{path}:{number}"
            step = step_of(where, row.pop(STEP, None))
            values = {k: v for k, v in row.items() if k not in BOOKKEEPING}
            if not values or not builder.admit(step, values, number, hash(line.strip() or repr(values))):
                continue
            builder.mark(step, (k.startswith(EVAL_PREFIXES) for k in values))
            builder.put_row(step, values, number)
    except UsageError:
        if not offline and path.suffix != ".csv":
            raise_file_error(rows)
        raise
    return builder.build()


def sniff(row: object, line: str | None) -> str | None:
    """A JSON-lines export: rows carry ``_step`` (a ``.wandb`` or ``.csv`` file is told by its name)."""
    return FORMAT if isinstance(row, dict) and STEP in row else None
