"""Atomic writes: a reader (or a second writer) never sees half a results file."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

from autotest.errors import UsageError
from autotest.redaction import mask_known


def write_atomic(path: Path, text: str) -> None:
    """Write text via a temp file and rename, so a reader never sees half a file; secret values are masked."""
    write_bytes_atomic(path, text.encode("utf-8"))


def write_bytes_atomic(path: Path, data: bytes, *, durable: bool = False) -> None:
    """Write bytes via a temp file in the same folder and rename: two concurrent writers leave one whole file.

    Registered secret values (``autotest.redaction``) are masked in UTF-8 text.
    ``durable`` also fsyncs the file and its folder, so a power loss leaves the old or the new file
    (for files that are the record, like a promoted baseline).
    """
    path = Path(path)
    try:  # every text file the harness writes passes here: mask secret values once, at the writer
        data = mask_known(data.decode("utf-8")).encode("utf-8")
    except UnicodeDecodeError:
        pass  # binary (a PNG plot)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            if durable:
                handle.flush()
                os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    if durable:
        folder = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(folder)
        finally:
            os.close(folder)


def require_folder(path: Path, what: str) -> None:
    """``path`` is a folder, or can be made one: checked before any work that would write into it."""
    path = Path(path)
    for parent in (path, *path.parents):
        if parent.exists() or parent.is_symlink():
            if not parent.is_dir():
                named = "" if parent == path else f" ({parent} is not a folder)"
                raise UsageError(f"{what}: {path} is not a directory{named}; pass a folder")
            return


def portable(value: Any, folder: Path) -> Any:
    """``value`` (JSON data) with every path string inside ``folder`` made relative to it (``.`` for itself).

    A results folder is uploaded and downloaded on another runner: links into it must survive the move.
    Paths outside it (the framework checkout, a share) stay absolute; text that merely contains a path does too.
    """
    root = str(folder)
    if isinstance(value, dict):
        return {k: portable(v, folder) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [portable(v, folder) for v in value]
    if isinstance(value, str) and (value == root or value.startswith(root + os.sep)):
        return os.path.relpath(value, root)
    return value


def recorded_path(folder: Path, value: str) -> Path:
    """A path read from a results folder's JSON: relative to the folder, or absolute as older files wrote it."""
    path = Path(value)
    return path if path.is_absolute() else Path(folder) / path
