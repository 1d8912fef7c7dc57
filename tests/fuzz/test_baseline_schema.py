"""Every declared baseline key, fuzzed from its declaration (autotest.inputs.baseline_schema): a bad value of its
kind (wrong type, below its minimum, at or above its bound, outside its choices, an empty list where one is required)
written into a complete, valid baseline is refused with one line naming that key. The strategies are built from
``KEYS``, so a key declared tomorrow is fuzzed tomorrow, with no edit here."""

from __future__ import annotations

import copy
import math
import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, strategies as st

from autotest.errors import UsageError
from autotest.inputs.baseline import load_baseline
from autotest.inputs.baseline_schema import KEYS, RULES, Key
from autotest.scopes import BUILTIN, scope_kind
from tests.fuzz.strategies import scaled, scratch

#: a baseline with every declared section present (so every key has a place to go bad in)
VALID: dict[str, Any] = {
    "schema_version": 1, "name": "fuzzed", "description": "every section present",
    "golden": {"table": {"m": {1: 0.5, 2: 0.5, 3: 0.5}, "n": {1: 0.1, 2: 0.1, 3: 0.1}}, "format": "xtuner",
               "noise": {"m": {1: 0.01, 2: 0.01, 3: 0.01}}, "roughness": {"m": 0.5}},
    "metric_aliases": {"m": "m"}, "short_names": {"mm": "m"}, "preset": "xtuner", "roles": {"m": "reward"},
    "steps": {"expected": 3, "exact": False}, "calibrated_range": [1, 3],
    "wall_time": {"max_s": 600, "overrides": [{"hardware": {"gpu": "H200"}, "max_s": 300}]},
    "calibration": {"runs": 3, "margin": 1.5, "relative_floor": 0.01, "binomial_z": 2.0, "false_alarm_budget": 0.05,
                    "floor_headroom": 1000, "floors": {"m": 0.001}, "eval_set_size": {"n": 100}},
    "checks": [{"metric": "m", "method": "absolute", "operator": "<", "threshold": 0.1, "scope": "stepwise",
                "severity": "gate", "relative_floor": 1e-12, "measured_max_deviation": 0.05, "derivation": "seed",
                "overrides": [{"hardware": {"gpu": "H200"}, "threshold": 0.2}]},
               {"metric": "n", "method": "absolute", "operator": "<", "threshold": 0.1, "severity": "reference"}],
    "paired": {"pairs": 2, "perturbation": "natural", "seeds": [0, 1], "false_alarm_budget": 0.05,
               "relative_floor": 0.01,
               "windows": [{"metric": "m", "steps": [1, 3], "noise": 0.01, "level": 0.5, "floor": 0.0}]},
    "provenance": {"produced_by": "tests/fuzz"},
}

WRONG_TYPES = [None, "x", True, [1], {"a": 1}]
#: a well-formed counted nudge (threads:N, optimizer-ulp:N), written here independently of the parser
_GOOD_COUNT = re.compile(r"(threads|optimizer-ulp):[1-9][0-9]{0,5}")


def bad_values(key: Key) -> st.SearchStrategy[Any]:
    """Values ``key``'s declaration refuses: another type, or its own type outside the declared bounds."""
    if key.kind == "integer":
        bad = [v for v in WRONG_TYPES if v is not True] + [True, 1.5, "3"]
        if key.minimum is not None:
            bad += [int(key.minimum) - 1, int(key.minimum) - 10**6]
        return st.sampled_from(bad)
    if key.kind == "number":
        bad = [v for v in WRONG_TYPES if v != "x" or key.also is None] + [math.inf, -math.inf, math.nan]
        if key.minimum is not None:
            bad += [key.minimum - 0.5, key.minimum - 1e9]
        if key.positive:
            bad += [0, -1e-9]
        if key.below is not None:
            bad += [key.below, key.below * 10]
        return st.sampled_from(bad)
    if key.kind == "boolean":
        return st.sampled_from([None, 1, 0, "true", "yes", [True]])
    if key.kind == "choice":
        return st.one_of(st.sampled_from([None, 5, [key.choices[0]], {"a": 1}]),
                         st.text(min_size=1, max_size=8).filter(lambda t: t not in key.choices))
    if key.kind == "text":
        return st.sampled_from([5, 1.5, True, "", [], ["a"], {"a": "b"}] + ([None] if key.shown is None else []))
    if key.kind == "nudge":  # the text kinds, and text outside the grammar (autotest.inputs.aa_nudge)
        return st.one_of(st.sampled_from([5, 1.5, True, "", None, [], {"a": "b"}, "threads:0", "threads:",
                                          "optimizer-ulp:x", "=1", "1X=2", "Natural"]),
                         st.text(alphabet="abcdefghijklmnopqrstuvwxyz:-_ 0", min_size=1, max_size=12).filter(
                             lambda t: t.strip() != "natural" and not _GOOD_COUNT.fullmatch(t.strip())))
    if key.kind == "steps":
        return st.sampled_from([5, "x", [1], [3, 1], ["a", "b"], [1, 2, 3], {"a": 1}])
    if key.kind == "list":
        return st.sampled_from([5, "x", {"a": 1}] + ([[]] if key.required else []))
    return st.sampled_from([5, "x", [1], True])  # section, mapping


def _place(doc: dict[str, Any], path: str, value: Any) -> str:
    """Write ``value`` at ``path`` (``[]``: the first item); the dotted key an error must name."""
    parts = path.replace("[]", ".[0]").split(".")
    node: Any = doc
    for part in parts[:-1]:
        node = node[0] if part == "[0]" else node[part]
    node[parts[-1]] = value
    return path.replace("[]", "[0]")


def _alternatives_dropped(doc: dict[str, Any], key: Key) -> None:
    """A key that is one of several alternatives is tried without the others (golden.tracker without the table)."""
    for rule in RULES:
        if rule.one_of and key.path in rule.keys:
            for other in rule.keys:
                if other != key.path:
                    section, _, name = other.rpartition(".")
                    (doc[section] if section else doc).pop(name, None)


def test_the_valid_baseline_loads(tmp_path: Path) -> None:
    path = tmp_path / "fuzzed.yaml"
    path.write_text(yaml.safe_dump(VALID, sort_keys=False))
    assert load_baseline(path).paired is not None


def test_every_declared_key_has_a_place_in_the_valid_baseline() -> None:
    for key in KEYS:  # a key declared without a valid value here would be fuzzed nowhere
        doc = copy.deepcopy(VALID)
        parts = key.path.replace("[]", ".[0]").split(".")
        node: Any = doc
        for part in parts[:-1]:
            node = node[0] if part == "[0]" else node[part]
        assert isinstance(node, dict), key.path


@pytest.mark.parametrize("key", KEYS, ids=[k.path for k in KEYS])
@scaled(0.3)
@given(data=st.data())
def test_a_bad_value_of_any_declared_key_is_one_line_naming_it(key: Key, data: st.DataObject) -> None:
    value = data.draw(bad_values(key), label=key.path)
    doc = copy.deepcopy(VALID)
    _alternatives_dropped(doc, key)
    named = _place(doc, key.path, value)
    with scratch() as folder:
        path = folder / "fuzzed.yaml"
        path.write_text(yaml.safe_dump(doc, sort_keys=False, allow_unicode=True), encoding="utf-8")
        with pytest.raises(UsageError) as info:
            load_baseline(path)
    message = str(info.value)
    assert "\n" not in message and message.startswith(str(path)), message
    assert f" {named}" in message or f" {named}[" in message or f" {named}." in message, message


KIND_KEYS = [(kind, key) for kind in BUILTIN for key in scope_kind(kind).keys]


@pytest.mark.parametrize("kind, key", KIND_KEYS, ids=[f"{k}.{key}" for k, key in KIND_KEYS])
@scaled(0.3)
@given(value=st.sampled_from([None, "x", True, {"a": 1}, -1, [-1, "a"]]))
def test_a_bad_value_of_a_check_kinds_own_key_is_one_line_naming_it(kind: str, key: str, value: Any) -> None:
    """The keys a kind declares (autotest.scopes) go bad the same way, whichever kind declares them."""
    doc = copy.deepcopy(VALID)
    doc["checks"][0]["scope"] = kind
    doc["checks"][0][key] = value
    with scratch() as folder:
        path = folder / "fuzzed.yaml"
        path.write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")
        with pytest.raises(UsageError) as info:
            load_baseline(path)
    assert "\n" not in str(info.value) and f" checks[0].{key}" in str(info.value), str(info.value)
