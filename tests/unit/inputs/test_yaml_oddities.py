"""YAML that parses in no useful way, found by the fuzz suite: one line naming the file and line, never a traceback."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from autotest.errors import UsageError
from autotest.inputs.baseline import load_baseline
from autotest.inputs.case import load_case


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
