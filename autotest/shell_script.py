"""Shell scripts the harness writes for a person to run (a batch recalibration's ``recalibrate.sh``).

A script is built from argument lists, never by pasting text: every word is ``shlex.quote``-d, so a recorded
value (an image tag, a package version, a case name: whatever a run's ``preflight.json`` or the history holds)
is one literal word, never ``$(...)``, a backtick, a ``;`` or a second line. A comment holds text for the
reader; its control characters are escaped (:func:`autotest.terminal.printable`), so a newline in a recorded
value cannot end the comment and start a command.
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from pathlib import Path

from autotest.files import write_atomic
from autotest.terminal import printable


def comment(text: str) -> str:
    """One comment line: ``# text``, the text's control characters escaped."""
    return f"# {printable(text)}"


def command(argv: Sequence[str]) -> str:
    """One command line: each word of ``argv`` quoted."""
    if not argv:
        raise ValueError("a script line needs a command")
    return shlex.join(str(word) for word in argv)


def script_text(commands: Sequence[Sequence[str]], *, comments: Sequence[str] = (),
                interpreter: str = "/bin/sh") -> str:
    """A script: the interpreter line, the comments, ``set -e`` (the first failing command stops it), the commands."""
    return "\n".join([f"#!{interpreter}", *(comment(c) for c in comments), "set -e",
                      *(command(argv) for argv in commands)]) + "\n"


def write_script(path: Path, commands: Sequence[Sequence[str]], *, comments: Sequence[str] = ()) -> Path:
    """Write :func:`script_text` to ``path`` atomically; returns ``path``."""
    write_atomic(path, script_text(commands, comments=comments))
    return path
