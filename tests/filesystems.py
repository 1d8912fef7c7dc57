"""Real small filesystems for the full-disk and read-only tests: a tmpfs mounted with mount(2) (no process
is launched, so unit tests may use it), filled to the byte, or remounted read-only.

A chmod'ed folder is no test for root (root writes through permission bits); a read-only mount and a full
tmpfs are what CI runners and shared disks actually do. Where mounting is not permitted (an unprivileged
user, a container without CAP_SYS_ADMIN) the tests using these skip, saying why.
"""

from __future__ import annotations

import ctypes
import errno
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

MS_RDONLY = 1
MS_REMOUNT = 32
MNT_DETACH = 2
PAGE = os.sysconf("SC_PAGE_SIZE")

_libc = ctypes.CDLL(None, use_errno=True)


def _mount(target: Path, flags: int, options: str) -> None:
    if _libc.mount(b"tmpfs", os.fsencode(target), b"tmpfs", flags, options.encode()) != 0:
        code = ctypes.get_errno()
        if code in (errno.EPERM, errno.EACCES):
            pytest.skip(f"mounting a tmpfs is not permitted here ({os.strerror(code)}): the full- and "
                        "read-only-disk tests need root or CAP_SYS_ADMIN")
        raise OSError(code, os.strerror(code), str(target))


@contextmanager
def tmpfs(target: Path, size_kib: int = 1024) -> Iterator[Path]:
    """A fresh tmpfs of ``size_kib`` at ``target`` (created), unmounted afterwards."""
    target.mkdir(parents=True, exist_ok=True)
    _mount(target, 0, f"size={size_kib}k,mode=0755")
    try:
        yield target
    finally:
        _libc.umount2(os.fsencode(target), MNT_DETACH)


def read_only(target: Path) -> None:
    """Remount the tmpfs at ``target`` read-only (what is in it stays readable)."""
    _mount(target, MS_REMOUNT | MS_RDONLY, "")


def free_bytes(target: Path) -> int:
    stats = os.statvfs(target)
    return stats.f_bavail * stats.f_frsize


def fill(target: Path, leave_bytes: int = 0) -> Path:
    """Fill the filesystem at ``target`` with one file until ``leave_bytes`` (whole pages) stay free."""
    filler = target / "filler.bin"
    want = max(0, free_bytes(target) - leave_bytes)
    chunk = memoryview(b"\0" * (256 * PAGE))
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        while want > 0:
            try:
                want -= os.write(fd, chunk[:want])
            except OSError as exc:
                if exc.errno != errno.ENOSPC:
                    raise
                break
    finally:
        os.close(fd)
    return filler


def leftovers(folder: Path) -> list[str]:
    """Temporary or partial files a failed write left behind (they must not exist)."""
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*")
                  if p.name.startswith(".") or p.name.endswith((".partial", ".tmp")))
