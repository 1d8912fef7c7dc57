"""Mask secrets in anything the harness writes down: launch records, cards, results, logs.

``redact`` masks by name (HF_TOKEN, --api-key) and by shape (ghp_..., sk-..., JWTs, URL
credentials); ``json_ready`` reduces an object to JSON types after redacting it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

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


def _redact_text(text: str) -> str:
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
