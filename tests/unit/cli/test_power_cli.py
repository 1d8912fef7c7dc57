"""``rl-autotest power``: judged at the case's own replicates, and a ``detect:`` typo is an unknown metric."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from autotest.cli import main
from tests.helpers import ROOT


def _case(tmp_path: Path, extra: str) -> Path:
    """tiny-grpo with ``extra`` appended, its baseline copied beside it."""
    (tmp_path / "baselines").mkdir()
    shutil.copyfile(ROOT / "baselines" / "tiny-grpo.yaml", tmp_path / "baselines" / "tiny-grpo.yaml")
    case = tmp_path / "tiny-grpo.yaml"
    case.write_text((ROOT / "autotest" / "cases" / "tiny-grpo.yaml").read_text() + extra)
    return case


def test_a_detect_typo_is_an_unknown_metric_with_the_closest_checked_name(tmp_path: Path, capsys) -> None:
    case = _case(tmp_path, "detect: {response/reward/mean: 0.1}\n")
    assert main(["power", str(case)]) == 2
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err and captured.out == ""
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"rl-autotest: error: {case}: detect.response/reward/mean: not a "
                                                   f"metric {tmp_path / 'baselines' / 'tiny-grpo.yaml'} checks (")
    assert lines[0].endswith("did you mean 'response/rewards/mean'? name a checked metric, or add a check for it")


@pytest.mark.parametrize("replicates, code", [(None, 1), (4, 0)])
def test_power_judges_the_targets_at_the_case_s_own_replicates(tmp_path: Path, capsys, replicates, code) -> None:
    # the pooled reward gate: MDE 0.021 at K = 1, 0.012 at K = 4 (baselines/tiny-grpo.yaml)
    extra = "detect: {response/rewards/mean: 0.015}\n" + (f"replicates: {replicates}\n" if replicates else "")
    assert main(["power", str(_case(tmp_path, extra))]) == code
    out = capsys.readouterr().out
    assert ("- reached: response/rewards/mean 0.015" in out) == (code == 0), out
    assert (f"(verdicts on {replicates} replicates)" in out.splitlines()[0]) == bool(replicates)
