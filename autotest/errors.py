"""The one user-facing error type: a mistake in input, reported as a single line."""

from __future__ import annotations

import errno
from pathlib import Path


class UsageError(ValueError):
    """A user mistake (bad file, key, value or path). The CLI prints it as one line and exits 2."""


#: what to do, by the errno a write failed with
_ADVICE = {
    errno.ENOSPC: "free space on that disk or write elsewhere",
    errno.EDQUOT: "free space under your quota or write elsewhere",
    errno.EROFS: "the filesystem is read-only; write elsewhere",
    errno.EACCES: "give this user write permission there or write elsewhere",
    errno.EPERM: "give this user write permission there or write elsewhere",
}


class WriteFailed(UsageError):
    """A file the harness had to write could not be written (disk full, read-only, no permission...).

    One line naming the path and the error; the writer has removed its partial file.
    """

    def __init__(self, path: Path | str, error: OSError) -> None:
        self.path = Path(path)
        self.error = error
        advice = _ADVICE.get(error.errno or 0, "write elsewhere")
        reason = f"[Errno {error.errno}] {error.strerror}" if error.errno else str(error)
        super().__init__(f"cannot write {self.path}: {reason}; {advice}")
