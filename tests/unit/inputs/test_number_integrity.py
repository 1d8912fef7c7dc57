"""Numbers in case and baseline files: 5e-3 is a number, infinity is not a threshold, huge values stay short."""

from __future__ import annotations

from pathlib import Path

import pytest

from autotest.errors import UsageError
from autotest.inputs.schema import Section, show


def section(data: dict) -> Section:
    return Section(data, Path("b.yaml"), "checks[0]", doc="")


@pytest.mark.parametrize("text, value", [("5e-3", 0.005), ("1E6", 1e6), ("-2.5e+1", -25.0)])
def test_yaml11_exponents_without_a_dot_are_numbers(text: str, value: float) -> None:
    assert section({"threshold": text}).number("threshold") == value


@pytest.mark.parametrize("value", [float("inf"), float("-inf")])
def test_infinite_numbers_are_refused(value: float) -> None:
    with pytest.raises(UsageError, match=r"^b.yaml: checks\[0\].threshold: -?inf is not finite; write a number"):
        section({"threshold": value}).number("threshold")


def test_show_never_builds_a_huge_repr() -> None:
    bomb: list = ["x"] * 9
    for _ in range(30):  # 9**30 leaves if expanded
        bomb = [bomb] * 9
    assert len(show(bomb)) <= 60
