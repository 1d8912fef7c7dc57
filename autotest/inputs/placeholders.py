"""Placeholders and ${ENV} in case fields: what a case may write, and how a field is expanded for a run.

``{python}``, ``{repo}``, ``{work_dir}``, ``{seed}``, ``{fault}`` are the harness's placeholders;
``${NAME}`` is read from the environment when the case runs (a missing one is a one-line error).
"""

from __future__ import annotations

import difflib
import re
import shlex
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Protocol

from autotest.inputs.schema import ENV, NAME, Section, expand_env

REPO_ROOT = Path(__file__).resolve().parents[2]
_BRACES = re.compile(r"(?<!\$)\{([^{}]*)\}")
_BARE_ENV = re.compile(r"\$([A-Za-z_][A-Za-z0-9_]*)")


class FromFile(Protocol):
    """What expansion needs of a case: the file it came from, for the error message."""

    source: Path


def check_template(sec: Section, key: str, text: str, allowed: tuple[str, ...], *,
                    shell: bool) -> None:
    """Reject unknown placeholders and env syntax the harness would not expand."""
    for match in _BRACES.finditer(text):
        word = match.group(1)
        if not NAME.fullmatch(word):
            continue  # JSON or bash brace expansion in a string command, not a placeholder
        if word not in allowed:
            close = difflib.get_close_matches(word, allowed, n=1)
            hint = f"did you mean {{{close[0]}}}? " if close else ""
            known = ", ".join(f"{{{p}}}" for p in allowed)
            sec.fail(key, f"unknown placeholder {{{word}}}", f"{hint}known here: {known}")
    if shell:
        return
    for match in ENV.finditer(text):
        if not NAME.fullmatch(match.group(1)):
            sec.fail(key, f"{match.group(0)!r} is not supported", "write ${NAME} only")
    rest = ENV.sub("", text)
    if "${" in rest:
        sec.fail(key, f"{text!r} has '${{' without a closing '}}'", "write ${NAME}")
    bare = _BARE_ENV.search(rest)
    if bare:
        sec.fail(key, f"{bare.group(0)!r} is not expanded (no shell runs here)",
                 f"write ${{{bare.group(1)}}}")


def unset_variables(text: str, environ: Mapping[str, str]) -> list[str]:
    """The ${NAME} variables in ``text`` that are unset or empty in ``environ``."""
    return [m.group(1) for m in ENV.finditer(text)
            if NAME.fullmatch(m.group(1)) and not environ.get(m.group(1))]


def expand(case: FromFile, key: str, text: str, values: Mapping[str, str],
           environ: Mapping[str, str], *, shell: bool = False) -> str:
    """Substitute ${ENV} and {placeholders} in one field of ``case``.

    ``key`` is the dotted key, for the error message. With ``shell`` the substituted values
    are shell-quoted, since the result is bash source.
    """
    quote = shlex.quote if shell else str

    def placeholder(match: re.Match[str]) -> str:
        word = match.group(1)
        return quote(values[word]) if word in values else match.group(0)

    text = expand_env(text, f"{case.source}: {key}", environ, quote=quote, when="before running the case")
    return _BRACES.sub(placeholder, text)


def placeholder_values(*, repo: Path = REPO_ROOT, work_dir: Path | None = None, seed: int | None = None,
                       fault: str | None = None) -> dict[str, str]:
    """``{repo}`` is the case's repository: the project's root, or the harness checkout for a demo case."""
    values = {"python": sys.executable, "repo": str(repo), "fault": fault or ""}
    if work_dir is not None:
        values["work_dir"] = str(Path(work_dir).resolve())
    if seed is not None:
        values["seed"] = str(seed)
    return values
