"""What the fuzz suite feeds every reader, and the one property it holds them to.

Two kinds of input: structured-but-wrong (valid JSON/YAML whose values have the wrong type, are missing,
NaN/inf, huge or negative, repeated keys, unicode) and byte-level corruption of a valid file (truncation,
bit flips, deleted or inserted bytes). The property (:func:`verdict_or_one_line`): the reader returns a
result, or raises its documented error with one line that names the file; any other exception is a
traceback a user would see, and fails the property.
"""

from __future__ import annotations

import json
import math
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

from hypothesis import settings, strategies as st

from autotest.errors import UsageError

T = TypeVar("T")

#: numbers a log or a config file can hold that a reader must not trip on
EDGE_NUMBERS = st.sampled_from([0, -1, 1, 2**31, 2**63, -(2**63), 10**30, 1e308, -1e308, 5e-324, 0.5, -0.0,
                                math.nan, math.inf, -math.inf, True, False])
TEXT = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=12)
SCALARS = st.one_of(st.none(), EDGE_NUMBERS, st.integers(), st.floats(allow_nan=True, allow_infinity=True), TEXT)
#: any JSON value, nested a little
JSON = st.recursive(SCALARS, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                     st.dictionaries(TEXT, inner, max_size=4)), max_leaves=12)


def json_text(value: Any) -> str:
    """JSON as Python writes it: NaN and Infinity as the bare literals trackers contain."""
    return json.dumps(value, allow_nan=True)


@st.composite
def corrupted(draw: st.DrawFn, data: bytes) -> bytes:
    """``data`` damaged one to three times: cut short, bits flipped, a stretch deleted or junk inserted."""
    out = bytearray(data)
    for _ in range(draw(st.integers(1, 3))):
        kind = draw(st.sampled_from(["truncate", "flip", "delete", "insert", "zero"]))
        at = draw(st.integers(0, max(len(out) - 1, 0)))
        if kind == "truncate":
            del out[at:]
        elif kind == "flip" and out:
            out[at] ^= 1 << draw(st.integers(0, 7))
        elif kind == "delete":
            del out[at : at + draw(st.integers(1, 64))]
        elif kind == "insert":
            out[at:at] = draw(st.binary(min_size=1, max_size=16))
        elif kind == "zero":
            out[at : at + 8] = bytes(len(out[at : at + 8]))
    return bytes(out)


@st.composite
def mutated(draw: st.DrawFn, value: Any, depth: int = 0) -> Any:
    """``value`` (parsed JSON/YAML) with one part changed: a key deleted, added or its value replaced,
    a list item dropped or replaced, a scalar swapped for another type; nested parts are reached too."""
    if isinstance(value, dict) and value:
        key = draw(st.sampled_from(sorted(value, key=str)))
        action = draw(st.sampled_from(["replace", "delete", "add", "descend", "descend"]))
        out = dict(value)
        if action == "replace":
            out[key] = draw(JSON)
        elif action == "delete":
            del out[key]
        elif action == "add":
            out[draw(TEXT)] = draw(JSON)
        else:
            out[key] = draw(mutated(value[key], depth + 1))
        return out
    if isinstance(value, list) and value:
        at = draw(st.integers(0, len(value) - 1))
        action = draw(st.sampled_from(["replace", "delete", "descend", "descend"]))
        out_list = list(value)
        if action == "replace":
            out_list[at] = draw(JSON)
        elif action == "delete":
            del out_list[at]
        else:
            out_list[at] = draw(mutated(value[at], depth + 1))
        return out_list
    return draw(JSON)


@contextmanager
def scratch() -> Iterator[Path]:
    """A fresh folder per example (hypothesis reruns the test body; pytest's tmp_path is per test)."""
    with tempfile.TemporaryDirectory(prefix="rl-autotest-fuzz-") as folder:
        yield Path(folder)


def verdict_or_one_line(call: Callable[[], T], named: Path | str | tuple[str, ...],
                        errors: tuple[type[Exception], ...] = (UsageError,)) -> T | None:
    """Run ``call``: its result, or None after checking that it raised one of ``errors`` as a single line
    naming ``named`` (a file name, or any of several; an empty tuple: no error is allowed at all).
    Any other exception propagates and fails the property."""
    names = (named.name,) if isinstance(named, Path) else (named,) if isinstance(named, str) else named
    try:
        return call()
    except errors as exc:
        message = str(exc)
        assert names, f"an input that only refines the result failed it: {message!r}"
        assert "\n" not in message and "\r" not in message, f"more than one line: {message!r}"
        assert any(name in message for name in names), f"the message names none of {names}: {message!r}"
        return None


def scaled(fraction: float) -> settings:
    """A fraction of the active profile's examples, for a property whose every example is slow."""
    return settings(max_examples=max(5, int(settings.default.max_examples * fraction)))
