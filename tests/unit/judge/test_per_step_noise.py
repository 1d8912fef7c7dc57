"""Per-step readings in noise sds: where a run first left the golden, its step-to-step roughness, and the noise of a
replicate mean."""

from __future__ import annotations

import math

import pytest

from autotest.judge.per_step_noise import mean_noise_scale, roughness, run_onset, z_onset


def test_an_onset_is_the_first_run_of_steps_off_one_way() -> None:
    steps = list(range(1, 11))
    z = {1: 0.5, 2: 2.5, 3: -2.5, 4: 2.1, 5: 2.2, 6: 3.0, 7: 0.0, 8: 0.0, 9: 0.0, 10: 0.0}
    assert run_onset(z, dict.fromkeys(steps, 0.0), dict.fromkeys(steps, 1.0), steps) == (4, 1)
    assert run_onset({s: 1.9 for s in steps}, dict.fromkeys(steps, 0.0), dict.fromkeys(steps, 1.0), steps) is None
    assert z_onset(z) == (4, 1) and z_onset({}) is None


def test_roughness_is_the_rms_step_to_step_change_and_ignores_a_shared_offset() -> None:
    alternating = {s: (1.0 if s % 2 else -1.0) for s in range(1, 12)}
    assert roughness(alternating) == pytest.approx(2.0)
    assert roughness({s: v + 5.0 for s, v in alternating.items()}) == pytest.approx(2.0)
    assert roughness({s: 0.1 * s for s in range(1, 12)}) == pytest.approx(0.1)  # a steady drift is calm
    assert roughness({s: 1.0 for s in range(1, 5)}) is None  # too few steps to read


def test_a_replicate_means_noise_shrinks_with_the_replicates_and_one_run_is_one() -> None:
    assert mean_noise_scale(1, 10) == 1.0
    assert mean_noise_scale(4, 10) == pytest.approx(math.sqrt((0.25 + 0.1) / 1.1))
    assert mean_noise_scale(8, 10) < mean_noise_scale(4, 10)
