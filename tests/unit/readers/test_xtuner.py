"""The xtuner reader's row kinds (decided once per key layout) against an oracle that reads each line on its own.

Fuzzed: rows written the ways a logger may write them (NaN/Infinity literals, nested values, escaped key names,
spaces around ``:`` and ``,``, keys in any order, a duplicated key), read with and without ``keep`` (a comparison
reads only its checked metrics). The oracle is the module docstring's rule applied to ``json.loads`` of each line
of the whole text: which steps are training and eval steps, the kept numeric series, the values that are not
numbers, and the one error line of a row with a key written twice.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st

from autotest.errors import UsageError
from autotest.readers.xtuner import read_xtuner

KEYS = ("response/rewards/mean", "loss", "eval/acc", "eval/f1", "time/eval", "train_metrics/lr", "a:b", "evalx")
VALUES = st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.integers(-10**6, 10**6), st.none(),
                   st.just({"nested": 1.0}), st.just([1, 2]), st.text(max_size=5))


def _key(key: str, escaped: bool) -> str:
    if not escaped:
        return json.dumps(key)
    return '"' + "".join(f"\\u{ord(c):04x}" if c in "el/" else c for c in key) + '"'


def _value(value: object) -> str:
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else "Infinity" if value > 0 else "-Infinity"
    return json.dumps(value)


@st.composite
def logs(draw) -> tuple[str, list[list[tuple[str, object]]]]:
    """(the file's text, each row's (key, value) pairs as written, ``step`` first)."""
    lines, rows = [], []
    step = draw(st.integers(0, 3))
    for _ in range(draw(st.integers(1, 6))):
        step += draw(st.integers(1, 3))
        keys = draw(st.lists(st.sampled_from(KEYS), min_size=1, max_size=5, unique=True))
        if all(k.startswith("train_metrics/") for k in keys):
            keys.append("loss")  # a mini-batch row belongs to another step: not this oracle's rule
        pairs = [(k, draw(VALUES)) for k in keys]
        if draw(st.integers(0, 9)) == 0:
            pairs.append((pairs[0][0], 1.0))  # a key written twice
        pairs.insert(draw(st.integers(0, len(pairs))), ("step", step))
        colon, comma = draw(st.sampled_from([(": ", ", "), (":", ","), (" : ", " ,\t")]))
        escaped = draw(st.booleans())
        lines.append("{" + comma.join(f"{_key(k, escaped)}{colon}{_value(v)}" for k, v in pairs) + "}")
        rows.append(pairs)
    return "\n".join(lines) + draw(st.sampled_from(["", "\n", "\r\n"])), rows


def _oracle(path: Path, text: str, keep: frozenset[str] | None) -> dict:
    train, evals, series, non_numeric = [], [], {}, set()
    for number, line in enumerate(text.splitlines(), 1):
        pairs = json.loads(line, object_pairs_hook=list)
        keys = [k for k, _ in pairs]
        duplicate = next((k for i, k in enumerate(keys) if k in keys[:i]), None)
        if duplicate is not None:
            return {"error": f"{path}:{number}: key {duplicate!r} appears twice in one row (the JSON reader would "
                             "keep the last value silently); fix the logger"}
        row = dict(pairs)
        step = row.pop("step")
        eval_keys = [k for k in row if k.startswith("eval/")]
        eval_only = bool(eval_keys) and all(k.startswith("eval/") or k == "time/eval" for k in row)
        if not eval_only:
            train.append(step)
        if eval_keys:
            evals.append(step)
        for key, value in row.items():
            if keep is not None and key not in keep:
                continue
            if type(value) in (int, float) or value is None:
                series.setdefault(key, {})[step] = math.nan if value is None else float(value)
            else:
                non_numeric.add(key)
    return {"train": train, "eval": evals, "series": series, "non_numeric": non_numeric}


def _same(a: dict[int, float], b: dict[int, float]) -> bool:
    return a.keys() == b.keys() and all(x == y or math.isnan(x) and math.isnan(y) for x, y in zip(a.values(),
                                                                                                   b.values()))


@settings(max_examples=150, deadline=None)
@given(log=logs(), keep=st.one_of(st.none(), st.frozensets(st.sampled_from(KEYS))))
def test_row_kinds_and_kept_values_are_the_oracles(tmp_path_factory: pytest.TempPathFactory, log, keep) -> None:
    text, _ = log
    path = tmp_path_factory.mktemp("log") / "tracker.jsonl"
    path.write_bytes(text.encode("utf-8"))
    expected = _oracle(path, text, keep)
    if "error" in expected:
        with pytest.raises(UsageError) as info:
            read_xtuner(path, keep)
        assert str(info.value) == expected["error"]
        return
    trace = read_xtuner(path, keep)
    assert list(trace.train_steps) == expected["train"]
    assert list(trace.eval_steps) == expected["eval"]
    assert set(trace.non_numeric) == expected["non_numeric"]
    assert set(trace.series) == set(expected["series"])
    for key, values in expected["series"].items():
        assert _same(dict(trace.series[key]), values), key


def test_an_escaped_eval_key_makes_an_eval_row(tmp_path: Path) -> None:
    path = tmp_path / "tracker.jsonl"
    path.write_text('{"step": 1, "loss": 0.5}\n{"step": 1, "\\u0065val/acc": 0.25}\n'
                    '{"step": 2, "loss": 0.4, "eval\\/acc": 0.5}\n')
    trace = read_xtuner(path, frozenset({"eval/acc"}))
    assert trace.train_steps == (1, 2) and trace.eval_steps == (1, 2)
    assert dict(trace.series["eval/acc"]) == {1: 0.25, 2: 0.5}
