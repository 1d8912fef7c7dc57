"""Fuzz the project table: ``[tool.rl-autotest]`` in pyproject.toml and the same keys in rl-autotest.toml,
changed key by key (wrong types, missing or unknown keys, paths outside the project, unicode) or corrupted
byte by byte; then a case looked up by name through the project it names.

Property: a Project (or None), or one UsageError line naming the file; a case by name is a Case or one line.
"""

from __future__ import annotations

import json
import math
import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from hypothesis import given, strategies as st

from autotest.inputs.case import load_case
from autotest.inputs.project import PROJECT_ENV, find_project
from tests.fuzz.strategies import corrupted, mutated, scratch, verdict_or_one_line
from tests.helpers import DATA

TABLE = {"cases": ["accuracy/cases"], "baselines": "accuracy/baselines", "results": "accuracy/results",
         "history": "sqlite:///accuracy/results/history.sqlite", "framework": "."}


def toml_value(value: Any) -> str:
    """A TOML value for parsed JSON (TOML has no null: it becomes an empty string)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf") if math.isinf(value) else repr(value)
    if isinstance(value, list):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{json.dumps(str(k))} = {toml_value(v)}" for k, v in value.items()) + "}"
    return json.dumps("" if value is None else value)  # TOML basic strings take JSON's escapes


def toml_table(table: Any, header: str | None) -> str:
    lines = [f"[{header}]"] if header else []
    if isinstance(table, dict):
        lines += [f"{json.dumps(str(k))} = {toml_value(v)}" for k, v in table.items()]
    else:  # a table of the wrong type: the key holds it directly
        return f'[tool]\n"rl-autotest" = {toml_value(table)}\n' if header else f"x = {toml_value(table)}\n"
    return "\n".join(lines) + "\n"


def _project(folder: Path) -> Path:
    """A framework repository's layout: a case folder with the scripted case, an empty baselines folder."""
    (folder / "accuracy" / "baselines").mkdir(parents=True)
    (folder / "accuracy" / "cases").mkdir()
    shutil.copy(DATA / "cases" / "scripted.yaml", folder / "accuracy" / "cases" / "scripted.yaml")
    return folder


@contextmanager
def project_env(path: Path) -> Iterator[None]:
    before = os.environ.get(PROJECT_ENV)
    os.environ[PROJECT_ENV] = str(path)
    try:
        yield
    finally:
        if before is None:
            del os.environ[PROJECT_ENV]
        else:
            os.environ[PROJECT_ENV] = before


def judge(folder: Path, path: Path) -> None:
    found = verdict_or_one_line(lambda: find_project(folder / "accuracy"), path)
    if found is not None:
        with project_env(path):
            verdict_or_one_line(lambda: load_case("scripted"), ("scripted", path.name))


def test_the_seed_table_is_a_project() -> None:
    with scratch() as folder:
        path = _project(folder) / "pyproject.toml"
        path.write_text("[project]\nname = 'x'\n\n" + toml_table(TABLE, "tool.rl-autotest"), encoding="utf-8")
        project = find_project(folder / "accuracy")
        assert project is not None and project.cases == (folder.resolve() / "accuracy" / "cases",)
        with project_env(path):
            assert load_case("scripted").source.resolve() == (folder / "accuracy" / "cases" / "scripted.yaml").resolve()


@given(data=st.data(), own_file=st.booleans())
def test_project_table_structured(data: st.DataObject, own_file: bool) -> None:
    table: Any = TABLE
    for _ in range(data.draw(st.integers(1, 3))):
        table = data.draw(mutated(table))
    with scratch() as folder:
        name = "rl-autotest.toml" if own_file else "pyproject.toml"
        text = toml_table(table, None if own_file else "tool.rl-autotest")
        (_project(folder) / name).write_text(text, encoding="utf-8", errors="surrogatepass")
        judge(folder, folder / name)


@given(data=st.data())
def test_project_table_bytes(data: st.DataObject) -> None:
    seed = ("[project]\nname = 'x'\n\n" + toml_table(TABLE, "tool.rl-autotest")).encode()
    with scratch() as folder:
        path = _project(folder) / "pyproject.toml"
        path.write_bytes(data.draw(corrupted(seed)))
        judge(folder, path)
