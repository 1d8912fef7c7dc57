"""Fuzz the case and baseline YAML loaders: the scripted case and baseline changed key by key (wrong types,
missing or unknown keys, NaN/inf, huge or negative numbers, unicode), raw YAML that a hand might write
(duplicate keys, aliases, tags, tabs), and byte corruption of the real files.

Property: a Case / Baseline, or one UsageError line naming the file; a baseline that loads judges the golden
run with a verdict or one line, and never PASSes without a gate to judge it by.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import yaml
from hypothesis import given, strategies as st

from autotest.inputs.baseline import load_baseline
from autotest.inputs.case import load_case
from autotest.judge.model import PASS
from autotest.judge.verdict import compare_paths
from tests.fuzz.strategies import corrupted, mutated, scaled, scratch, verdict_or_one_line
from tests.fuzz.test_metric_logs import _lines, xtuner_rows
from tests.helpers import DATA, ROOT

CASE = DATA / "cases" / "scripted.yaml"
BASELINE = DATA / "baselines" / "scripted.yaml"
CALIBRATED = ROOT / "baselines" / "tiny-grpo.yaml"

#: YAML a person might write by mistake, spliced into a valid file
RAW_YAML = st.sampled_from([
    "name: a\nname: b\n", "x: &a [1, 2]\ny: *a\n", "x: !!python/object:os.system ls\n", "\tname: tab\n",
    "checks: *undefined\n", "? [complex, key]\n: 1\n", "x: !!binary aGVsbG8=\n", "x: !!float nan\n",
    "%YAML 1.1\n---\n", "---\n...\n---\n", "x: 0x1F\n", "x: 1_000\n", "x: 2001-12-14t21:59:43.10-05:00\n",
    "a: &x {b: *x}\n", "x: [" * 30 + "]" * 30 + "\n", "x: \"\\ud800\"\n", "x: '\u202e\u0000'\n",
])


def _dump(value: Any) -> str:
    return yaml.dump(value, Dumper=getattr(yaml, "CSafeDumper", yaml.SafeDumper), allow_unicode=True, sort_keys=False)


@functools.cache
def _parsed(seed: Path) -> Any:
    return yaml.safe_load(seed.read_text(encoding="utf-8"))


@st.composite
def yaml_texts(draw: st.DrawFn, seed: Path) -> str:
    """The seed file's document with one to three parts changed, sometimes with a raw YAML line spliced in."""
    doc: Any = _parsed(seed)
    for _ in range(draw(st.integers(1, 3))):
        doc = draw(mutated(doc))
    text = _dump(doc)
    if draw(st.booleans()):
        lines = text.splitlines(keepends=True)
        lines.insert(draw(st.integers(0, len(lines))), draw(RAW_YAML))
        text = "".join(lines)
    return text


def _write(folder: Path, name: str, data: str | bytes) -> Path:
    path = folder / name
    if isinstance(data, str):
        path.write_text(data, encoding="utf-8", errors="surrogatepass")
    else:
        path.write_bytes(data)
    return path


def test_the_seeds_load() -> None:
    assert load_case(CASE).name == "scripted"
    assert load_baseline(BASELINE).checks and load_baseline(CALIBRATED).checks


@given(text=yaml_texts(CASE))
def test_case_yaml_structured(text: str) -> None:
    with scratch() as folder:
        path = _write(folder, CASE.name, text)  # the name must stay the file's stem
        verdict_or_one_line(lambda: load_case(path), path)


@given(data=corrupted(CASE.read_bytes()))
def test_case_yaml_bytes(data: bytes) -> None:
    with scratch() as folder:
        path = _write(folder, CASE.name, data)
        verdict_or_one_line(lambda: load_case(path), path)


def judge_with(baseline: Path) -> None:
    """Load ``baseline``; if it loads, judge the golden run with it (never a PASS without a gate)."""
    loaded = verdict_or_one_line(lambda: load_baseline(baseline), baseline)
    if loaded is None:
        return
    tracker = baseline.parent / "tracker.jsonl"
    tracker.write_text(_lines(xtuner_rows()), encoding="utf-8")
    comparison = verdict_or_one_line(lambda: compare_paths(baseline, tracker, fmt="xtuner"), baseline.name)
    if comparison is not None and comparison.verdict.status == PASS:
        gates = [c for c in loaded.checks if c.severity != "reference"]
        assert gates, "PASS from a baseline with no gate"


@given(text=yaml_texts(BASELINE))
def test_baseline_yaml_structured(text: str) -> None:
    with scratch() as folder:
        judge_with(_write(folder, BASELINE.name, text))


@given(data=corrupted(BASELINE.read_bytes()))
def test_baseline_yaml_bytes(data: bytes) -> None:
    with scratch() as folder:
        judge_with(_write(folder, BASELINE.name, data))


@scaled(0.4)  # a 276-line file per example: fewer examples, the same kinds of damage
@given(text=yaml_texts(CALIBRATED))
def test_calibrated_baseline_yaml_structured(text: str) -> None:
    """A calibrated baseline (noise, provenance, pooled checks) holds more keys to get wrong."""
    with scratch() as folder:
        path = _write(folder, CALIBRATED.name, text)
        verdict_or_one_line(lambda: load_baseline(path), path)
