"""Replicate seeds and folders: replicate 1 is the single run's seed, the others stay out of the calibration set."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from autotest.inputs.case import load_case
from autotest.run.replicates import replicate_folder, replicate_seeds, side_by_side


def test_replicate_one_runs_the_runs_seed_and_the_others_skip_calibration_seeds() -> None:
    case = load_case("tiny-grpo")  # calibration seeds 0-9
    assert replicate_seeds(case, 1, 0) == (0,)
    assert replicate_seeds(case, 3, 0) == (0, 10, 11)
    assert replicate_seeds(case, 2, 3) == (3, 10)  # --seed 3: itself first, then out of sample
    assert replicate_seeds(case, 2, 40) == (40, 41)


def test_a_case_that_takes_no_seed_has_one_seed_only() -> None:
    case = load_case("tiny-grpo")
    fixed = replace(case, launch=replace(case.launch, command=("{python}", "-c", "pass"), fault_args=()),
                    seed=replace(case.seed, calibration=()))
    assert replicate_seeds(fixed, 1, 0) == (0,)
    with pytest.raises(ValueError, match="3 replicates of a launch that takes no seed"):
        replicate_seeds(fixed, 3, 0)  # the pipeline refuses it first (tests/unit/cli/test_replicate_limits.py)


def test_each_replicate_has_its_own_folder() -> None:
    assert replicate_folder(Path("/res/run"), 2, 5) == Path("/res/run/replicates/r2-seed5")


def test_side_by_side_keeps_task_order() -> None:
    assert side_by_side([lambda i=i: i * i for i in range(5)], jobs=2) == [0, 1, 4, 9, 16]
