"""Small helpers to validate YAML documents into typed objects with one-line errors.

Every error names the file and the dotted key, and says what is expected.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any, Iterable

from autotest.errors import UsageError

_ENV_PATTERN = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


def load_yaml(path: Path) -> dict[str, Any]:
    import yaml

    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise UsageError(f"{path}: cannot read ({exc.strerror}); check the path") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f":{mark.line + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise UsageError(f"{path}{where}: invalid YAML ({problem}); fix the syntax") from None
    if not isinstance(data, dict):
        raise UsageError(f"{path}: the document must be a mapping of keys, got {type(data).__name__}")
    return data


class Section:
    """A mapping being validated; remembers its file and dotted location for error messages."""

    def __init__(self, data: Any, path: Path, key: str = "") -> None:
        self.path = path
        self.key = key
        if not isinstance(data, dict):
            raise self.error(f"must be a mapping, got {type(data).__name__}")
        self.data: dict[str, Any] = data

    def dotted(self, name: str) -> str:
        return f"{self.key}.{name}" if self.key else name

    def error(self, message: str, name: str | None = None) -> UsageError:
        where = self.dotted(name) if name is not None else (self.key or "<top>")
        return UsageError(f"{self.path}: {where}: {message}")

    def reject_unknown(self, allowed: Iterable[str]) -> None:
        allowed = set(allowed)
        for name in self.data:
            if name not in allowed:
                raise self.error(f"unknown key; expected one of: {', '.join(sorted(allowed))}", str(name))

    def has(self, name: str) -> bool:
        return name in self.data

    def raw(self, name: str, default: Any = None) -> Any:
        return self.data.get(name, default)

    def required(self, name: str) -> Any:
        if name not in self.data or self.data[name] is None:
            raise self.error("is required", name)
        return self.data[name]

    def section(self, name: str, required: bool = False) -> "Section | None":
        if name not in self.data or self.data[name] is None:
            if required:
                raise self.error("is required", name)
            return None
        return Section(self.data[name], self.path, self.dotted(name))

    def string(self, name: str, default: str | None = None, choices: Iterable[str] | None = None) -> str:
        value = self.data.get(name, default)
        if value is None:
            raise self.error("is required", name)
        if not isinstance(value, str):
            raise self.error(f"must be a string, got {value!r}", name)
        if choices is not None and value not in set(choices):
            raise self.error(f"{value!r} is not one of: {', '.join(sorted(choices))}", name)
        return value

    def number(self, name: str, default: float | None = None) -> float:
        value = self.data.get(name, default)
        if value is None:
            raise self.error("is required", name)
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise self.error(f"must be a number, got {value!r}", name)
        return float(value)

    def integer(self, name: str, default: int | None = None) -> int:
        value = self.data.get(name, default)
        if value is None:
            raise self.error("is required", name)
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.error(f"must be an integer, got {value!r}", name)
        return value

    def boolean(self, name: str, default: bool | None = None) -> bool:
        value = self.data.get(name, default)
        if not isinstance(value, bool):
            raise self.error(f"must be true or false, got {value!r}", name)
        return value

    def string_map(self, name: str) -> dict[str, str]:
        value = self.data.get(name) or {}
        if not isinstance(value, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
            raise self.error("must be a mapping of strings to strings", name)
        return dict(value)


def expand_env(text: str, where: str, env: dict[str, str] | None = None) -> str:
    """Expand ``${VAR}``; an unset variable is an error naming it and where it was used."""
    environ = os.environ if env is None else env

    def substitute(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in environ:
            raise UsageError(f"{where}: environment variable {name} is not set; export it first")
        return environ[name]

    return _ENV_PATTERN.sub(substitute, text)
