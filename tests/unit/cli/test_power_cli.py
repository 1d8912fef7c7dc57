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
    # reached wherever the change acts: the hardest window, the pooled reward gate over steps 16-30, has MDE 0.17 at
    # K = 1 and 0.097 at K = 4 (baselines/tiny-grpo.yaml); the early window's 0.012 at K = 4 does not answer for it
    extra = "detect: {response/rewards/mean: 0.1}\n" + (f"replicates: {replicates}\n" if replicates else "")
    assert main(["power", str(_case(tmp_path, extra))]) == code
    out = capsys.readouterr().out
    assert ("- reached: response/rewards/mean 0.1" in out) == (code == 0), out
    assert ("over steps 16-30 (response/rewards/mean[pooled 16-30]), not the 0.1" in out) == (code == 1), out
    assert (f"(verdicts on {replicates} replicates)" in out.splitlines()[0]) == bool(replicates)


def test_power_steps_prints_the_mde_of_every_gate_by_run_length(tmp_path: Path, capsys) -> None:
    # 0.2: reached in every reward window (the hardest, steps 16-30, at ±0.17), once a reward gate is judged
    case = _case(tmp_path, "detect: {response/rewards/mean: 0.2}\n")
    assert main(["power", str(case)]) == 0
    assert "by run length" not in capsys.readouterr().out
    assert main(["power", str(case), "--steps"]) == 0
    out = capsys.readouterr().out
    table = out[out.index("Minimum detectable effect by run length"):].splitlines()
    head = table[2].strip("| ").split(" | ")
    assert head[0] == "steps" and head[-1] == "detect:"
    rows = {line.split(" | ")[0].strip("| "): line.strip("| ").split(" | ") for line in table[4:] if line.startswith("|")}
    assert list(rows) == ["1 of 45", "15 of 45", "30 of 45", "45 of 45"]
    late = head.index("`response/rewards/mean[pooled 31-45]`")
    assert [rows[r][late] for r in rows] == ["not judged"] * 3 + [rows["45 of 45"][late]]
    assert rows["45 of 45"][late].startswith("±0.086")
    assert [rows[r][-1] for r in rows] == ["missed 1 of 1", "reached", "reached", "reached"]
    # the case's declared tier, as its verdict will state it
    assert "- tier pr: pr tier, 30 of 45 steps: not judged: response/rewards/mean[percentile], " in out
