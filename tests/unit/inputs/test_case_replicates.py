"""A case's ``replicates``: a whole number >= 1 (default 1), at most the platform's cap, > 1 only for a launch
that takes the seed; anything else is one line naming the file and key."""

from __future__ import annotations

from pathlib import Path

import pytest

from autotest.errors import UsageError
from autotest.inputs.case import load_case
from autotest.inputs.replicate_limits import REPLICATE_CAPS
from tests.unit.inputs.test_case import write_case

SEEDED = '["{python}", -c, "print(1)", "{seed}"]'


def test_replicates_default_to_one_and_load_when_declared(tmp_path: Path) -> None:
    assert load_case(write_case(tmp_path, "plain")).replicates == 1
    assert load_case(write_case(tmp_path, "three", command=SEEDED, tail="replicates: 3\n")).replicates == 3
    cap = REPLICATE_CAPS["cpu"]
    assert load_case(write_case(tmp_path, "cap", command=SEEDED, tail=f"replicates: {cap}\n")).replicates == cap


@pytest.mark.parametrize("count", [REPLICATE_CAPS["cpu"] + 1, 100000])
def test_a_count_above_the_cap_is_refused_naming_the_cap_and_force(tmp_path: Path, count: int) -> None:
    path = write_case(tmp_path, command=SEEDED, tail=f"replicates: {count}\n")
    with pytest.raises(UsageError) as info:
        load_case(path)
    assert str(info.value) == (f"{path}: replicates: {count} is above the cap of {REPLICATE_CAPS['cpu']} "
                               f"replicates for a CPU case; lower it, or run --replicates {count} --force-replicates")


def test_a_gpu_case_has_its_own_cap(tmp_path: Path) -> None:
    gpu = REPLICATE_CAPS["gpu"]
    path = write_case(tmp_path, command=SEEDED, tail=f"replicates: {gpu + 1}\n")
    path.write_text(path.read_text().replace("markers: [grpo]", "markers: [grpo, gpu]")
                    .replace("gpus: 0", "gpus: 1"))
    with pytest.raises(UsageError, match=f"above the cap of {gpu} replicates for a GPU case"):
        load_case(path)


def test_replicates_of_a_launch_without_a_seed_are_refused(tmp_path: Path) -> None:
    path = write_case(tmp_path, tail="replicates: 2\n")
    with pytest.raises(UsageError) as info:
        load_case(path)
    assert str(info.value) == (f"{path}: replicates: 2 replicates of a launch that takes no seed would be 2 copies "
                               "of one seed; use {seed} in launch.command or set seed.env, or run 1 replicate")
    # the seed in an env var is a seed the launch takes
    seeded_env = write_case(tmp_path, "env", tail="replicates: 2\nseed: {env: SEED}\n")
    assert load_case(seeded_env).replicates == 2


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
