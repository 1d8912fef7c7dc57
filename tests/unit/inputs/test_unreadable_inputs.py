"""Inputs the fuzz suite (tests/fuzz) found unreadable in no useful way: one line naming the file, never a
traceback or a message broken over lines."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from autotest.errors import UsageError
from autotest.inputs.baseline import load_baseline
from autotest.inputs.case import load_case
from autotest.inputs.project import find_project


@pytest.mark.parametrize("load", [load_case, load_baseline])
def test_a_control_character_names_its_line(tmp_path: Path, load) -> None:
    path = tmp_path / "x.yaml"
    path.write_text("name: x\ndescription: a\x00b\n", encoding="utf-8")
    with pytest.raises(UsageError, match=rf"^{re.escape(str(path))}:2: character #x0000 is not allowed in YAML "
                                         r"\(a binary or corrupt file\?\); remove it$"):
        load(path)


@pytest.mark.parametrize("load", [load_case, load_baseline])
def test_a_list_as_a_key_names_its_line(tmp_path: Path, load) -> None:
    path = tmp_path / "x.yaml"
    path.write_text("name: x\n? [complex, key]\n: 1\n", encoding="utf-8")
    with pytest.raises(UsageError, match=rf"^{re.escape(str(path))}:2: a key is a list or a mapping, not a name; "
                                         "fix the YAML syntax$"):
        load(path)


def test_a_key_with_a_control_character_stays_on_one_line(tmp_path: Path) -> None:
    path = tmp_path / "x.yaml"
    path.write_text('name: x\n"bad\\rkey": 1\n', encoding="utf-8")
    with pytest.raises(UsageError) as err:
        load_baseline(path)
    assert str(err.value).startswith(f"{path}: bad\\rkey: unknown key; ")
    assert "\r" not in str(err.value)


def test_a_project_table_that_is_not_utf8_is_one_line(tmp_path: Path) -> None:
    path = tmp_path / "pyproject.toml"
    path.write_bytes(b"[tool.rl-autotest]\ncases = [\"\x80\"]\n")
    with pytest.raises(UsageError, match=rf"^{re.escape(str(path))}: not UTF-8 text \(byte 29\); TOML files are UTF-8$"):
        find_project(tmp_path)

