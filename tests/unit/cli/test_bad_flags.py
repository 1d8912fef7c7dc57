"""Bad command-line values: one line naming the flag, exit 2."""

from __future__ import annotations

from pathlib import Path

import pytest

from autotest.cli import main


@pytest.mark.parametrize("value", ["-5", "inf", "nan"])
def test_a_negative_or_infinite_wall_time_is_refused(value: str, tmp_path: Path, capsys) -> None:
    code = main(["compare", "--baseline", str(tmp_path / "b.yaml"), "--current", str(tmp_path), f"--wall-time-s={value}"])
    assert code == 2
    assert capsys.readouterr().err.startswith("rl-autotest: error: --wall-time-s: ")
