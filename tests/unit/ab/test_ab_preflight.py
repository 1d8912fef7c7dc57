"""What ``rl-autotest ab`` refuses before its first run: bad seeds, counts above the cap, an environment variable
name that is not one, and a baseline without the paired section. Each is one line, exit 2, and no results folder."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from autotest.ab.ab_preflight import ab_env, ab_seeds
from autotest.cli import main
from autotest.errors import UsageError
from autotest.inputs.case import load_case
from autotest.inputs.replicate_limits import REPLICATE_CAPS
from tests.helpers import ROOT

CAP = REPLICATE_CAPS["cpu"]


def _ab(tmp_path: Path, *extra: str) -> list[str]:
    return ["ab", "tiny-grpo", "--base", "clean", "--head", "clean", "--results-dir", str(tmp_path / "results"),
            "--no-plots", *extra]


def _one_error_line(capsys) -> str:
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err + captured.out
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1, captured.err
    return lines[0]


@pytest.mark.parametrize("extra, line", [
    (["--seeds=-1"], "--seeds: -1 is below 0; give a seed >= 0"),
    (["--seeds", str(10**20)], f"--seeds: {10**20} is not below 2**32 (random generators take 32-bit seeds); give a "
                               "whole number from 0 to 4294967295"),
    (["--seeds", "11,x"], "--seeds: '11,x' is not a comma-separated list of whole numbers; give distinct whole numbers, e.g. 11,12,13"),
    (["--seeds", "11,11"], "--seeds: '11,11': give distinct seeds, e.g. 11,12,13"),
    (["--seeds", ",".join(str(s) for s in range(11, 12 + CAP))],
     f"--seeds: {CAP + 1} seeds is above the cap of {CAP} runs per side; give at most {CAP}"),
    (["--replicates", "1000000"], "--replicates: 1000000 is above 256"),  # the flag table's bound, where parsed
    (["--replicates", str(CAP + 1)], f"--replicates: {CAP + 1} is above the cap of {CAP}; give at most {CAP} (a typo "
                                     "here would start that many trainings)"),  # the platform's, before any run
    (["--replicates", "0"], "--replicates: 0 is below 1; give the number of seeds to run and average"),
    (["--env", "A;touch X=1"], "--env 'A;touch X=1': give KEY=VALUE; KEY a variable name (letters, digits, '_')"),
    (["--env", "1A=2"], "--env '1A=2': give KEY=VALUE; KEY a variable name"),
    (["--env", " A=1"], "--env ' A=1': give KEY=VALUE; KEY a variable name"),
    (["--env", "=1"], "--env '=1': give KEY=VALUE"),
])
def test_a_bad_seed_count_or_variable_is_one_line_before_any_run(extra, line, tmp_path: Path, capsys) -> None:
    assert main(_ab(tmp_path, *extra)) == 2
    assert _one_error_line(capsys).startswith(f"rl-autotest: error: {line}")
    assert not (tmp_path / "results").exists()


def test_a_baseline_without_paired_noise_is_refused_before_any_run(tmp_path: Path, capsys) -> None:
    baselines = tmp_path / "baselines"
    baselines.mkdir()
    spec = yaml.safe_load((ROOT / "baselines" / "tiny-grpo.yaml").read_text())
    spec.pop("paired", None)  # the committed baseline has one
    (baselines / "tiny-grpo.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
    assert main(_ab(tmp_path, "--seeds", "11", "--baselines-dir", str(baselines))) == 2
    line = _one_error_line(capsys)
    assert line.startswith(f"rl-autotest: error: {baselines / 'tiny-grpo.yaml'}: paired: missing")
    assert "rl-autotest calibrate tiny-grpo --paired" in line
    assert not (tmp_path / "results").exists()


def test_the_seeds_and_environment_that_pass() -> None:
    case = load_case("tiny-grpo")
    assert ab_seeds(case, None, None) == (11, 12, 13)
    assert ab_seeds(case, None, CAP) == tuple(range(11, 11 + CAP))
    assert ab_seeds(case, "0, 4294967295", None) == (0, 2**32 - 1)
    assert ab_env(["A_1=x=y", "_B="]) == {"A_1": "x=y", "_B": ""}
    with pytest.raises(UsageError, match="give one"):
        ab_seeds(case, "11", 2)
