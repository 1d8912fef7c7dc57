"""Text from outside (case names, metric names from a log, messages quoting a log line, refs, paths) made
inert for GitHub-flavoured markdown, where the step summary and report.md are read.

A value never starts a new line (no forged ``### case: PASS`` heading or list item), never becomes HTML
(``<img>``, ``<script>``, ``<details>``), a link or image (``[x](url)``, ``![x](url)``, ``[x][ref]``) or a
code span, and a path keeps its own backticks inside a code span. Only what could act is escaped, so a
message such as ``[Errno 28] No space left on device`` or ``rewards[points]`` reads as written (a bare
``[x]`` is no link: a reference definition would have to start a line, and a value never does).
Emphasis (``*a*``) is left alone: it changes how text looks, not what it does.
"""

from __future__ import annotations

import re

_CONTROL = re.compile(r"[\x00-\x1f\x7f\u2028\u2029]+")
_HTML = {"&": "&amp;", "<": "&lt;", ">": "&gt;"}
_MARKDOWN = re.compile(r"([\\`]|\](?=[(\[]))")  # a backslash, a backtick, a ] that would close a link


def md_text(value: object) -> str:
    """``value`` as one line of literal markdown text."""
    text = _CONTROL.sub(" ", str(value))
    text = "".join(_HTML.get(c, c) for c in text)
    return _MARKDOWN.sub(r"\\\1", text)


def md_code(value: object) -> str:
    """``value`` as one inline code span (a path, a command): fenced with more backticks than it holds."""
    text = _CONTROL.sub(" ", str(value))
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if text.startswith("`") or text.endswith("`") or not text.strip() else ""
    return f"{fence}{pad}{text}{pad}{fence}"
