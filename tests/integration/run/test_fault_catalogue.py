"""--fault is checked against the embedded workload's catalogue (its --list-faults, a real process) before launch."""

from __future__ import annotations

from pathlib import Path

import pytest

from autotest.cli import main
from tests.unit.cli.test_bad_flags import _one_error_line


@pytest.mark.parametrize("case, listed", [("tiny-grpo", "unsynced-layer"), ("tiny-mopd", "teacher-swap")])
def test_an_unknown_fault_is_refused_before_launch_with_the_catalogue(case: str, listed: str, tmp_path: Path,
                                                                       capsys) -> None:
    code = main(["run", case, "--yes", "--no-history", "--results-dir", str(tmp_path), "--fault", "bogus:3"])
    assert code == 2
    line = _one_error_line(capsys)
    assert line.startswith(f"rl-autotest: error: --fault: 'bogus:3' is not a fault of {case}; choose one of ")
    assert listed in line and line.endswith("--list-faults describes them)")
    assert not any(tmp_path.iterdir())  # nothing prepared, nothing launched
