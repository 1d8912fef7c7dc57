"""A case's ``replicates``: a whole number >= 1 (default 1); anything else is one line naming the file and key."""

from __future__ import annotations

from pathlib import Path

import pytest

from autotest.errors import UsageError
from autotest.inputs.case import load_case
from tests.unit.inputs.test_case import write_case


def test_replicates_default_to_one_and_load_when_declared(tmp_path: Path) -> None:
    assert load_case(write_case(tmp_path, "plain")).replicates == 1
    assert load_case(write_case(tmp_path, "three", tail="replicates: 3\n")).replicates == 3


@pytest.mark.parametrize("value, problem", [
    ("0", "0 is below 1"),
    ("-1", "-1 is below 1"),
    ('"two"', "'two' is not a whole number"),
    ("1.5", "1.5 is not a whole number"),
    ("true", "true is not a whole number"),
])
def test_a_bad_replicate_count_is_one_line_naming_file_and_key(tmp_path: Path, value: str, problem: str) -> None:
    path = write_case(tmp_path, tail=f"replicates: {value}\n")
    with pytest.raises(UsageError) as info:
        load_case(path)
    assert str(info.value) == (f"{path}: replicates: {problem}; write how many seeds to run and average, "
                               "a whole number >= 1")
