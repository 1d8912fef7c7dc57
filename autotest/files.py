"""Atomic writes: a reader (or a second writer) never sees half a results file, and a full or read-only
disk is one line (:class:`~autotest.errors.WriteFailed`) naming the path, with no partial file left behind."""

from __future__ import annotations

import functools
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any, Callable

from autotest.errors import UsageError, WriteFailed
from autotest.redaction import mask_known

MIB = 1024 * 1024


@functools.lru_cache(maxsize=1)
def new_file_mode() -> int:
    """The mode ``open()`` gives a new file under this process's umask (0644 under the usual 022)."""
    try:  # Linux states the umask without changing it (os.umask would, for every thread, for a moment)
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return 0o666 & ~int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return 0o666 & ~mask


def write_atomic(path: Path, text: str) -> None:
    """Write text via a temp file and rename, so a reader never sees half a file; secret values are masked."""
    write_bytes_atomic(path, text.encode("utf-8"))


def write_bytes_atomic(path: Path, data: bytes, *, durable: bool = False,
                       check: Callable[[Path], Any] | None = None) -> None:
    """Write bytes via a temp file in the same folder and rename: two concurrent writers leave one whole file.

    Registered secret values (``autotest.redaction``) are masked in UTF-8 text.
    ``durable`` also fsyncs the file and its folder, so a power loss leaves the old or the new file
    (for files that are the record, like a promoted baseline). ``check`` reads the written temp file back (a
    loader): a :class:`UsageError` from it leaves the file at ``path`` as it was and is one line naming ``path``.
    """
    path = Path(path)
    try:  # every text file the harness writes passes here: mask secret values once, at the writer
        data = mask_known(data.decode("utf-8")).encode("utf-8")
    except UnicodeDecodeError:
        pass  # binary (a PNG plot)
    make_folder(path.parent, for_file=path)
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    except OSError as exc:
        raise WriteFailed(path, exc) from exc
    try:
        os.fchmod(fd, new_file_mode())  # mkstemp's 0600 would make every results file private to this user
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()  # ENOSPC surfaces here at the latest, before the rename
            if durable:
                os.fsync(handle.fileno())
        if check is not None:
            try:
                check(Path(tmp))
            except UsageError as exc:
                raise UsageError(f"{path}: not written: the new file would not load ({str(exc).replace(tmp, str(path))}"
                                 "); the file there is unchanged") from None
        os.replace(tmp, path)
    except BaseException as exc:
        Path(tmp).unlink(missing_ok=True)
        if isinstance(exc, OSError):
            raise WriteFailed(path, exc) from exc
        raise
    if durable:
        try:
            folder = os.open(path.parent, os.O_RDONLY)
            try:
                os.fsync(folder)
            finally:
                os.close(folder)
        except OSError as exc:
            raise WriteFailed(path, exc) from exc


def copy_atomic(source: Path, target: Path) -> Path:
    """Copy ``source`` to ``target`` via a temporary name in the target's folder and rename.

    A copy that fails midway (disk full) is removed, never left under the target's name looking like the
    whole file; the failure is :class:`WriteFailed` naming ``target``. A source that cannot be read raises
    its own ``OSError``.
    """
    target = Path(target)
    make_folder(target.parent, for_file=target)
    with open(source, "rb") as src:
        try:
            fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".partial", dir=target.parent)
        except OSError as exc:
            raise WriteFailed(target, exc) from exc
        try:
            with os.fdopen(fd, "wb") as dst:
                shutil.copyfileobj(src, dst, 1024 * 1024)
                dst.flush()
            shutil.copymode(source, tmp)
            os.replace(tmp, target)
        except BaseException as exc:
            Path(tmp).unlink(missing_ok=True)
            if isinstance(exc, OSError):
                raise WriteFailed(target, exc) from exc
            raise
    return target


def append_text(path: Path, text: str) -> None:
    """Append ``text`` to ``path`` (a shared log such as the CI step summary) all or nothing: an append that
    fails midway is cut back to the file's previous length, then :class:`WriteFailed` names the path."""
    path = Path(path)
    data = memoryview(text.encode("utf-8"))
    try:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    except OSError as exc:
        raise WriteFailed(path, exc) from exc
    try:
        before = os.lseek(fd, 0, os.SEEK_END)
        try:
            while data:
                data = data[os.write(fd, data):]
        except OSError:
            os.ftruncate(fd, before)
            raise
    except OSError as exc:
        raise WriteFailed(path, exc) from exc
    finally:
        os.close(fd)


def make_folder(path: Path, *, for_file: Path | None = None) -> Path:
    """``path`` created with its parents; a failure is :class:`WriteFailed` naming ``for_file`` (or the folder)."""
    path = Path(path)
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise WriteFailed(for_file or path, exc) from exc
    return path


def require_writable(path: Path, what: str, *, min_free_bytes: int = 0, advice: str = "write elsewhere") -> None:
    """``path`` is a folder (or can be made one) that this process can write into, on a disk with at least
    ``min_free_bytes`` available: checked before any work whose result would be written there.

    The check writes and removes a probe file in the nearest existing folder (a read-only filesystem or a
    missing permission fails it even for root, where permission bits alone would not), and reads that
    filesystem's free space. Nothing is created when the check fails.
    """
    path = Path(path)
    require_folder(path, what)
    existing = next((p for p in (path, *path.parents) if p.exists()), None)
    if existing is None:  # pragma: no cover - the filesystem root always exists
        return
    try:
        fd, probe = tempfile.mkstemp(prefix=".rl-autotest-probe.", dir=existing)
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        reason = f"[Errno {exc.errno}] {exc.strerror}" if exc.errno else str(exc)
        raise UsageError(f"{what}: {path}: cannot write in {existing}: {reason}; {advice}") from exc
    if min_free_bytes > 0:
        free = shutil.disk_usage(existing).free
        if free < min_free_bytes:
            raise UsageError(f"{what}: {path}: only {free / MIB:.1f} MiB free on its disk, below the "
                             f"{min_free_bytes / MIB:g} MiB needed; {advice}")


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
