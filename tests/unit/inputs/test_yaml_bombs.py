"""YAML alias expansion is bounded: a billion-laughs baseline or case is refused fast, before any value is built."""

from __future__ import annotations

import time
import tracemalloc
from pathlib import Path

import pytest

from autotest.errors import UsageError
from autotest.inputs.baseline import load_baseline
from autotest.inputs.case import load_case
from autotest.inputs.schema import load_yaml

LAUGHS = ['a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]'] + [
    f"{name}: &{name} [{', '.join(['*' + prev] * 9)}]" for prev, name in zip("abcdefgh", "bcdefghi")]


def test_billion_laughs_in_a_baseline_fails_in_under_a_second(tmp_path: Path) -> None:
    path = tmp_path / "b.yaml"
    path.write_text("\n".join(LAUGHS) + "\ngolden: {table: {}}\nchecks: *i\n", encoding="utf-8")
    tracemalloc.start()
    start = time.process_time()  # CPU seconds: an expanded bomb costs minutes of them, and load does not stretch them
    with pytest.raises(UsageError, match=rf"^{path}:\d+: aliases expand to more than 1,000,000 values \(an alias "
                                         r"bomb\?\); write the values out instead of repeating aliases$"):
        load_baseline(path)
    elapsed = time.process_time() - start
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert elapsed < 1.0 and peak < 50 * 2**20


def test_a_case_file_bomb_is_refused_too(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text("\n".join(LAUGHS) + "\nname: c\n", encoding="utf-8")
    with pytest.raises(UsageError, match=r"aliases expand to more than"):
        load_case(path)


def test_many_aliases_and_recursive_aliases_are_refused(tmp_path: Path) -> None:
    many = tmp_path / "many.yaml"
    many.write_text("a: &a 1\nb: [" + ", ".join(["*a"] * 1001) + "]\n", encoding="utf-8")
    with pytest.raises(UsageError, match=rf"^{many}:2: more than 1000 aliases"):
        load_yaml(many)
    loop = tmp_path / "loop.yaml"
    loop.write_text("a: &a [1, *a]\n", encoding="utf-8")
    with pytest.raises(UsageError, match=rf"^{loop}:1: an alias refers to a value that contains it"):
        load_yaml(loop)


def test_ordinary_aliases_still_load(tmp_path: Path) -> None:
    path = tmp_path / "ok.yaml"
    path.write_text("base: &b {x: 1}\nother: *b\nlist: [*b, *b]\n", encoding="utf-8")
    assert load_yaml(path) == {"base": {"x": 1}, "other": {"x": 1}, "list": [{"x": 1}, {"x": 1}]}
