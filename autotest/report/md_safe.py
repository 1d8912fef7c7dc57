"""Text from outside (case names, metric names from a log, messages quoting a log line, refs, paths) made
inert for GitHub-flavoured markdown, where the step summary and report.md are read.

A value never starts a new line (no forged ``### case: PASS`` heading or list item), never becomes HTML
(``<img>``, ``<script>``, ``<details>``), a link or image (``[x](url)``, ``![x](url)``) or emphasis, and a
path keeps its own backticks inside a code span. What it says stays readable: the characters are escaped,
not dropped.
"""

from __future__ import annotations

import re

_CONTROL = re.compile(r"[\x00-\x1f\x7f\u2028\u2029]+")
_HTML = {"&": "&amp;", "<": "&lt;", ">": "&gt;"}
_MARKDOWN = re.compile(r"([\\`*_\[\]])")  # with [ ] escaped, no ( ) or ! can make a link or image


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
