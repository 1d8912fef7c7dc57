"""Mask secrets in anything the harness writes down: launch records, cards, results, logs.

``redact`` masks by name (HF_TOKEN, --api-key), by shape (ghp_..., sk-..., JWTs, URL
credentials) and by value: ``collect_secrets`` (called once at startup by the CLI and the pytest
plugin) registers the values of secret-named environment variables, of the names listed in
``$RL_AUTOTEST_SECRET_NAMES`` and of secret-looking flags, and ``mask_known`` masks those values
wherever they appear — also under a non-secret name (``MY_OPT=<token>``, ``--fault x:<token>``).
The writers apply it once: ``files.write_atomic``, the step-summary appender, the launch record,
the CLI's output streams and, after a run, the run's own logs (``mask_file``).
``json_ready`` reduces an object to JSON types after redacting it.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, TextIO

from autotest.errors import WriteFailed

MASK = "***"

_SECRET_PARTS = {"TOKEN", "KEY", "APIKEY", "AUTH", "AUTHORIZATION", "COOKIE", "PASS"}
_SECRET_INFIXES = ("PASSWORD", "PASSWD", "SECRET", "CREDENTIAL")
# a name ending like these holds a path or a switch, not the secret itself
_NOT_SECRET_LAST = {"FILE", "PATH", "DIR", "MODE", "TYPE"}
_VALUE_PATTERNS = [re.compile(p) for p in (
    r"(?<![A-Za-z0-9_])gh[pousr]_[A-Za-z0-9]{20,}",
    r"(?<![A-Za-z0-9_])github_pat_[A-Za-z0-9_]{20,}",
    r"(?<![A-Za-z0-9_])hf_[A-Za-z0-9]{20,}",
    r"(?<![A-Za-z0-9_-])sk-[A-Za-z0-9][A-Za-z0-9_-]{15,}",
    r"(?<![A-Z0-9])(?:AKIA|ASIA)[A-Z0-9]{16}(?![A-Z0-9])",
    r"(?<![A-Za-z0-9_])xox[abprs]-[A-Za-z0-9-]{10,}",
    r"(?<![A-Za-z0-9_])glpat-[A-Za-z0-9_-]{20,}",
    r"(?<![A-Za-z0-9_])eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}",
)]
_URL_CREDENTIALS = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*://[^\s:/@]+):[^\s@/]+@")
_AUTH_HEADER = re.compile(r"(?i)\b(bearer|basic)(\s+)[A-Za-z0-9._~+/=-]{6,}")
_ASSIGNMENT = re.compile(r"(?<![A-Za-z0-9_-])([A-Za-z_][A-Za-z0-9_]*)=(\"[^\"]*\"|'[^']*'|[^\s;&|'\"]+)")
_FLAG = re.compile(r"(?<![\w-])(--?[A-Za-z][A-Za-z0-9_-]*)(=|\s+)(\"[^\"]*\"|'[^']*'|[^\s\"'-][^\s]*)")
_JSON_PAIR = re.compile(r"(\"([^\"]+)\"\s*:\s*)\"[^\"]*\"")


def secret_name(name: str) -> bool:
    """Does a variable, flag or key name say its value is a secret (HF_TOKEN, --api-key)?"""
    spaced = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", name).upper()
    parts = [p for p in re.split(r"[^A-Z0-9]+", spaced) if p]
    if not parts or parts[-1] in _NOT_SECRET_LAST:
        return False
    return any(p in _SECRET_PARTS or p.endswith(("TOKEN", "APIKEY", "ACCESSKEY"))
               or any(s in p for s in _SECRET_INFIXES) for p in parts)


#: names of further secret variables, comma-separated (their values are masked like HF_TOKEN's)
SECRET_NAMES_ENV = "RL_AUTOTEST_SECRET_NAMES"
#: a shorter value ("1", "true", a port) would mask ordinary text everywhere
MIN_SECRET_CHARS = 6

_known: set[str] = set()
_known_pattern: re.Pattern[str] | None = None


def register_secret(value: str) -> None:
    """Mask ``value`` wherever it appears from now on (values shorter than MIN_SECRET_CHARS are ignored)."""
    global _known_pattern
    value = value.strip()
    if len(value) >= MIN_SECRET_CHARS and value != MASK and value not in _known:
        _known.add(value)
        # longest first: a secret that contains another is masked whole
        _known_pattern = re.compile("|".join(map(re.escape, sorted(_known, key=len, reverse=True))))


def collect_secrets(environ: Mapping[str, str] | None = None, argv: Iterable[str] = ()) -> None:
    """Register the secret values of ``environ`` (default: the process environment) and ``argv``."""
    environ = os.environ if environ is None else environ
    declared = {n.strip() for n in environ.get(SECRET_NAMES_ENV, "").split(",") if n.strip()}
    for name, value in environ.items():
        if secret_name(name) or name in declared:
            register_secret(value)
    args = list(argv)
    for i, arg in enumerate(args):
        flag, eq, value = arg.partition("=")
        if flag.startswith("-") and secret_name(flag):
            if eq:
                register_secret(value)
            elif i + 1 < len(args) and not args[i + 1].startswith("-"):
                register_secret(args[i + 1])
        elif eq and not flag.startswith("-") and secret_name(flag):
            register_secret(value)


def forget_secrets() -> None:
    """Empty the registry (tests)."""
    global _known_pattern
    _known.clear()
    _known_pattern = None


def mask_known(text: str) -> str:
    """``text`` with every registered secret value replaced by the mask."""
    return text if _known_pattern is None else _known_pattern.sub(MASK, text)


def mask_file(path: Path) -> bool:
    """Mask registered values in a (log) file in place, line by line; True when something was masked."""
    if _known_pattern is None or not Path(path).is_file():
        return False
    changed = False
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{Path(path).name}.", dir=Path(path).parent)
    except OSError as exc:
        raise WriteFailed(path, exc) from exc
    try:
        with open(path, encoding="utf-8", errors="surrogateescape", newline="") as src, \
                os.fdopen(fd, "w", encoding="utf-8", errors="surrogateescape", newline="") as dst:
            for line in src:
                masked = _known_pattern.sub(MASK, line)
                changed = changed or masked != line
                dst.write(masked)
        if changed:
            shutil.copymode(path, tmp)  # the log keeps its own mode, not mkstemp's 0600
            os.replace(tmp, path)
    except OSError as exc:  # a full or read-only disk: the caller decides what becomes of the unmasked log
        raise WriteFailed(path, exc) from exc
    finally:
        Path(tmp).unlink(missing_ok=True)
    return changed


class MaskedStream:
    """A text stream that masks registered secret values in everything written to it (the CLI's output)."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        self._stream.write(mask_known(text))
        return len(text)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def secret_shapes(text: str) -> list[str]:
    """The token-shaped substrings of ``text`` (ghp_…, hf_…, sk-…, JWTs): what ``redact`` masks by shape."""
    return [m.group(0) for pattern in _VALUE_PATTERNS for m in pattern.finditer(text)]


def _redact_text(text: str) -> str:
    text = mask_known(text)
    for pattern in _VALUE_PATTERNS:
        text = pattern.sub(MASK, text)
    text = _URL_CREDENTIALS.sub(rf"\1:{MASK}@", text)
    text = _AUTH_HEADER.sub(rf"\1\2{MASK}", text)
    text = _ASSIGNMENT.sub(lambda m: f"{m.group(1)}={MASK}" if secret_name(m.group(1))
                           else m.group(0), text)
    text = _FLAG.sub(lambda m: f"{m.group(1)}{m.group(2)}{MASK}" if secret_name(m.group(1))
                     else m.group(0), text)
    return _JSON_PAIR.sub(lambda m: f'{m.group(1)}"{MASK}"' if secret_name(m.group(2))
                          else m.group(0), text)


def _redact_argv(argv: list[str]) -> list[str]:
    out: list[str] = []
    for i, arg in enumerate(argv):
        prev = argv[i - 1] if i else ""
        if prev.startswith("-") and "=" not in prev and secret_name(prev) and not arg.startswith("-"):
            out.append(MASK)
        else:
            out.append(_redact_text(arg))
    return out


def redact(obj: Any) -> Any:
    """A copy of ``obj`` with secrets masked: env dicts, argv lists, command lines and text.

    Masked: values under secret-looking keys (TOKEN, SECRET, KEY, PASSWORD, CREDENTIAL, AUTH,
    ...), the argument after a secret-looking flag, ``NAME=value`` with a secret NAME, token
    shapes (ghp_, github_pat_, hf_, sk-, AKIA/ASIA, xox?-, glpat-, JWT), bearer/basic
    credentials and the password in ``scheme://user:pass@host``.
    """
    if isinstance(obj, Mapping):
        return {k: MASK if isinstance(k, str) and secret_name(k) and isinstance(v, (str, int, float))
                and not isinstance(v, bool) else redact(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        if all(isinstance(x, str) for x in obj):
            out = _redact_argv(list(obj))
        else:
            out = [redact(x) for x in obj]
        return type(obj)(out) if isinstance(obj, tuple) else out
    if isinstance(obj, str):
        return _redact_text(obj)
    if isinstance(obj, Path):
        return Path(_redact_text(str(obj)))
    return obj


def json_ready(obj: Any) -> Any:
    """``obj`` redacted and reduced to JSON types (tuples become lists, paths strings)."""
    return json.loads(json.dumps(redact(obj), default=str))
