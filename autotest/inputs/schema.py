"""The validating YAML reader behind case files and baselines.

Every mistake is one ``UsageError("<file>: <dotted.key>: <problem>; <what to do>")``. An
unknown key is an error with a did-you-mean (a typo must not pass silently), and so is a
duplicate key (PyYAML would silently keep the last one). ``load_section`` reads a file into a
``Section``, whose methods read typed values; ``expand_env`` substitutes ``${NAME}``.
"""

from __future__ import annotations

import difflib
import math
import os
import re
import reprlib
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, NoReturn

from autotest.errors import UsageError
from autotest.terminal import printable  # noqa: F401 - re-exported: the one escape of stored text

#: ``${...}``; only a NAME inside is ours to expand, other forms (``${X:-d}``) belong to bash
ENV = re.compile(r"\$\{([^{}]*)\}")
NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")

_MISSING = object()


def fail(path: Path, key: str, problem: str, fix: str) -> NoReturn:
    raise UsageError(f"{path}: {printable(key)}: {problem}; {fix}")


# numbers YAML 1.1 leaves as strings: an exponent without a dot (5e-3, 1E6)
_YAML11_MISSED_FLOAT = re.compile(r"[-+]?[0-9]+(?:\.[0-9]*)?[eE][-+]?[0-9]+")


_SHORT = reprlib.Repr()  # attributes, not keywords: Python 3.11
_SHORT.maxlevel, _SHORT.maxlist, _SHORT.maxdict, _SHORT.maxtuple, _SHORT.maxset = 2, 4, 4, 4, 4
_SHORT.maxstring = _SHORT.maxother = 60


def show(value: Any) -> str:
    """A value as the user wrote it in YAML, short enough for one line."""
    if value is None or isinstance(value, bool):
        return "null" if value is None else str(value).lower()
    if isinstance(value, (list, dict, tuple, set)) and len(value) > _SHORT.maxlist:
        return f"a {type(value).__name__}"
    text = _SHORT.repr(value)  # bounded: never builds the repr of a huge (alias-expanded) value
    return text if len(text) <= 40 else f"a {type(value).__name__}"


def load_yaml(path: Path) -> Any:
    """Parse one YAML file; unreadable files, bad syntax and duplicate keys are one-line errors."""
    from autotest.inputs.yaml_load import load_yaml as parse  # PyYAML only when a file is read

    return parse(path)


def load_document(path: Path, what: str = "file") -> Any:
    """A JSON (by suffix) or YAML document; a missing file or bad syntax is one line with its line number."""
    path = Path(path)
    if not path.is_file():
        raise UsageError(f"{path}: {what} not found")
    if path.suffix != ".json":
        return load_yaml(path)
    import json

    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise UsageError(f"{path}: line {exc.lineno}: not valid JSON ({exc.msg})") from None


def load_section(path: Path, *, what: str, doc: str, required: tuple[str, ...] = (),
                 optional: tuple[str, ...] = ()) -> Section:
    """The top-level mapping of one YAML file. ``what`` names the document ("a case"), ``doc``
    where its keys are documented (both for the fix hints)."""
    data = load_yaml(path)
    if data is None:
        fail(path, "(file)", "the file is empty", f"write {what} (see {doc})")
    return Section(data, path, "", doc=doc, required=required, optional=optional)


class Section:
    """One mapping of a YAML file; every read names the dotted key in its error."""

    def __init__(self, data: Any, path: Path, where: str, *, doc: str, required: tuple[str, ...] = (),
                 optional: tuple[str, ...] = ()) -> None:
        self.path, self.where, self.doc = path, where, doc
        if not isinstance(data, dict):
            fail(path, where or "(file)", f"{show(data)} is not a mapping", "write key: value lines")
        self.data: dict[str, Any] = data
        if required or optional:
            self.check_keys(required=required, optional=optional)

    def key(self, name: str) -> str:
        return f"{self.where}.{name}" if self.where else name

    def fail(self, name: str, problem: str, fix: str) -> NoReturn:
        fail(self.path, self.key(name), problem, fix)

    def fail_at_line(self, name: str, problem: str, fix: str) -> NoReturn:
        """:meth:`fail` with the line of ``name`` in the file (``<file>:<line>: <key>: ...``), as a syntax error has."""
        from autotest.inputs.yaml_load import line_of

        key = self.key(name)
        parts: list[str | int] = []
        for piece in key.split("."):
            head, _, rest = piece.partition("[")
            parts.append(head)
            parts += [int(i) for i in rest.rstrip("]").split("][") if i.isdigit()] if rest else []
        line = line_of(self.path, parts)
        raise UsageError(f"{self.path}{f':{line}' if line else ''}: {printable(key)}: {problem}; {fix}")

    def check_keys(self, *, required: tuple[str, ...], optional: tuple[str, ...]) -> None:
        # unknown keys first: a typo also makes the real key look missing
        allowed = required + optional
        for name in self.data:
            if name not in allowed:
                close = difflib.get_close_matches(str(name), allowed, n=1)
                fix = f"did you mean {close[0]!r}?" if close else f"allowed: {', '.join(allowed)}"
                self.fail(str(name), "unknown key", fix)
        for name in required:
            self.get(name)

    def get(self, name: str, default: Any = _MISSING) -> Any:
        if name in self.data:
            return self.data[name]
        if default is _MISSING:
            self.fail(name, "required key is missing", f"add it (see {self.doc})")
        return default

    def section(self, name: str, *, optional: bool = False) -> Section | None:
        value = self.get(name, None if optional else _MISSING)
        return None if value is None and optional else Section(value, self.path, self.key(name), doc=self.doc)

    def text(self, name: str, default: Any = _MISSING, *, nullable: bool = False) -> Any:
        if name not in self.data and default is not _MISSING:
            return default  # not validated: a default may be None or ""
        value = self.get(name)
        if value is None and (nullable or default is None):
            return None
        if not isinstance(value, str) or not value.strip():
            self.fail(name, f"{show(value)} is not a non-empty text", "write a quoted string")
        return value

    def integer(self, name: str, *, minimum: int | None = None, fix: str = "write a whole number",
                default: Any = _MISSING) -> int:
        value = self.get(name, default)
        if isinstance(value, bool) or not isinstance(value, int):
            self.fail(name, f"{show(value)} is not a whole number", fix)
        if minimum is not None and value < minimum:
            self.fail(name, f"{value} is below {minimum}", fix)
        return value

    def number(self, name: str, *, fix: str = "write a number", positive: bool = False,
               minimum: float | None = None, default: Any = _MISSING) -> Any:
        value = self.get(name, default)
        if value is None and default is None:
            return None
        if isinstance(value, str) and _YAML11_MISSED_FLOAT.fullmatch(value.strip()):
            value = float(value)  # YAML 1.1 reads 5e-3 (no dot) as a string; the user wrote a number
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value != value:
            self.fail(name, f"{show(value)} is not a number", fix)
        if not math.isfinite(value):
            self.fail(name, f"{value} is not finite", fix + " (a finite one)")
        if positive and value <= 0:
            self.fail(name, f"{value:g} is not above 0", fix)
        if minimum is not None and value < minimum:
            self.fail(name, f"{value:g} is below {minimum:g}", fix)
        return float(value)

    def boolean(self, name: str, *, default: Any = _MISSING) -> bool:
        value = self.get(name, default)
        if not isinstance(value, bool):
            self.fail(name, f"{show(value)} is not true or false", "write true or false")
        return value

    def choice(self, name: str, choices: tuple[str, ...], default: Any = _MISSING) -> str:
        value = self.get(name, default)
        if value not in choices:
            self.fail(name, f"{show(value)} is not one of {', '.join(choices)}",
                      f"write one of {', '.join(choices)} (quote it)")
        return value

    def str_list(self, name: str, default: Any = _MISSING) -> tuple[str, ...]:
        return self._items(name, default, str, "a non-empty text", "quote it")

    def int_list(self, name: str, default: Any = _MISSING) -> tuple[int, ...]:
        return self._items(name, default, int, "a whole number >= 0", "write e.g. 0")

    def _items(self, name: str, default: Any, kind: type, what: str, fix: str) -> tuple:
        value = self.get(name, default)
        if not isinstance(value, (list, tuple)):
            self.fail(name, f"{show(value)} is not a list", "write [a, b] or one '- a' line each")
        for i, item in enumerate(value):
            if isinstance(item, bool) or not isinstance(item, kind) or (
                    item == "" if kind is str else item < 0):
                self.fail(f"{name}[{i}]", f"{show(item)} is not {what}", fix)
        return tuple(value)

    def str_map(self, name: str, default: Any = _MISSING, *, env_values: bool = False) -> dict[str, str]:
        value = self.get(name, default)
        if value is None:
            value = {}
        if not isinstance(value, dict):
            self.fail(name, f"{show(value)} is not a mapping", "write key: value lines")
        out: dict[str, str] = {}
        for key, item in value.items():
            if not isinstance(key, str) or not key:
                self.fail(name, f"key {show(key)} is not a name", "use a text key")
            # env values may be written as numbers (STEPS: 25); a boolean is ambiguous
            if env_values and isinstance(item, (int, float)) and not isinstance(item, bool):
                item = str(item)
            if not isinstance(item, str) or not item:
                fix = 'quote it ("1" or "true")' if isinstance(item, bool) else "write a non-empty text"
                self.fail(f"{name}.{key}", f"{show(item)} is not a text", fix)
            out[key] = item
        return out


def expand_env(text: str, where: str, environ: Mapping[str, str] | None = None, *,
               quote: Callable[[str], str] = str, when: str = "first") -> str:
    """Substitute ``${NAME}`` from ``environ`` (default: the process environment), each value
    passed through ``quote``. An unset or empty variable is an error naming ``where`` (file and
    key); ``${X:-d}`` and other forms stay as written."""
    env = os.environ if environ is None else environ

    def substitute(match: re.Match[str]) -> str:
        name = match.group(1)
        if not NAME.fullmatch(name):
            return match.group(0)
        if not env.get(name):  # an empty value would silently turn ${ROOT}/x into /x
            raise UsageError(f"{where}: ${{{name}}} is not set; export {name} {when}")
        return quote(env[name])

    return ENV.sub(substitute, text)
