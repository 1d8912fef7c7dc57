"""Stored text shown on a terminal: one function escapes it, one prints it.

A value the harness did not write itself (a case or check name, a recorded image or package version, a
``--force`` or ``--why`` reason, a path) can hold a terminal escape (``ESC[2J``, a title change, a hyperlink)
or a line break that forges the next line. Every console line quoting such a value goes through :func:`echo`
(or :func:`printable`, where a message is built for another writer: a one-line error, a comment in a written
file), so the escape is shown as ``\\x1b``, never obeyed. Markdown has :mod:`autotest.report.md_safe`, HTML the
dashboard's renderer (``html.escape`` over :func:`printable`).
"""

from __future__ import annotations

import sys
from typing import TextIO


def printable(text: str) -> str:
    """``text`` with control characters escaped (a key named "\\r" must not break the one-line error)."""
    return text if text.isprintable() else "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def echo(*lines: object, file: TextIO | None = None) -> None:
    """Print each of ``lines`` as one console line, its control characters (a newline too) escaped; flushed, so
    progress lines reach a CI log as they happen."""
    out = sys.stdout if file is None else file
    for line in lines:
        print(printable(str(line)), file=out)
    out.flush()
