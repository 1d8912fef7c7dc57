"""Seeds and counts are bounded from one declaration (autotest.inputs.run_limits), and every command that takes
one refuses a value out of bounds with one line before anything runs."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from autotest.cli import main
from autotest.errors import UsageError
from autotest.inputs.run_limits import COUNTS, SEED_LIMIT, check_count, check_seed, parse_seeds


def test_the_declared_bounds_hold_at_their_edges() -> None:
    assert check_seed(0, "--seed") == 0 and check_seed(SEED_LIMIT - 1, "--seed") == SEED_LIMIT - 1
    for bad in (-1, SEED_LIMIT, 10**20):
        with pytest.raises(UsageError, match=r"^--seed: "):
            check_seed(bad, "--seed")
    for flag, limit in COUNTS.items():
        assert check_count(flag, limit.minimum) == limit.minimum and check_count(flag, limit.maximum) == limit.maximum
        with pytest.raises(UsageError, match=rf"^{flag}: {limit.minimum - 1} is below {limit.minimum}"):
            check_count(flag, limit.minimum - 1)
        with pytest.raises(UsageError, match=rf"^{flag}: {limit.maximum + 1} is above the cap of {limit.maximum};"):
            check_count(flag, limit.maximum + 1)
    assert parse_seeds("3,1, 2", "--seeds", 3) == (3, 1, 2)


@pytest.mark.parametrize("argv, line", [
    (["run", "tiny-grpo", "--yes", "--seed", str(2**32)], "--seed: 4294967296 is not below 2**32"),
    (["run", "tiny-grpo", "--yes", "--seed=-1"], "--seed: -1 is below 0; give a seed >= 0"),
    (["bisect", "tiny-grpo", "--good", "a", "--bad", "b", "--seed", str(10**20)], f"--seed: {10**20} is not below"),
    (["bisect", "tiny-grpo", "--good", "a", "--bad", "b", "--max-runs", "100000"],
     "--max-runs: 100000 is above the cap of 200"),
    (["bisect", "tiny-grpo", "--good", "a", "--bad", "b", "--jobs", "0"], "--jobs: 0 is below 1"),
    (["calibrate", "tiny-grpo", "--runs", "1000000"], "--runs: 1000000 is above the cap of 64"),
    (["calibrate", "tiny-grpo", "--paired", "--runs", "1000000"], "--runs: 1000000 is above the cap of 64"),
    (["calibrate", "tiny-grpo", "--paired", "--runs", "1"],
     "--runs: 1 is below 2; run-to-run noise needs at least two runs"),
    (["calibrate", "tiny-grpo", "--jobs", "1000"], "--jobs: 1000 is above the cap of 64"),
])
def test_every_command_bounds_its_seeds_and_counts_before_any_run(argv, line, tmp_path: Path, capsys) -> None:
    results = tmp_path / "results"
    results.mkdir()
    assert main([*argv, "--results-dir", str(results)]) == 2
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err and len(captured.err.strip().splitlines()) == 1, captured.err
    assert captured.err.startswith(f"rl-autotest: error: {line}")
    assert not any(results.iterdir())


@pytest.mark.parametrize("seed, key", [("{default: 4294967296, env: SEED}", "seed.default"),
                                       ("{calibration: [0, 1, 100000000000000000000], env: SEED}",
                                        "seed.calibration[2]")])
def test_a_case_file_seed_has_the_same_bound(seed: str, key: str, tmp_path: Path) -> None:
    from autotest.inputs.case import load_case
    from tests.unit.inputs.test_case import write_case

    path = write_case(tmp_path, command='["true"]', tail=f"seed: {seed}\n")
    with pytest.raises(UsageError, match=rf"^{re.escape(str(path))}: {re.escape(key)}: \d+ is not below 2\*\*32; write a whole number from 0 "):
        load_case(path)
