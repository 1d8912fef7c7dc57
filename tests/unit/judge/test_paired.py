"""Paired A/B judgement on synthetic traces: windows, A/A noise, thresholds, power, and what cannot be judged."""

from __future__ import annotations

import math
import random
from types import MappingProxyType

import pytest

from autotest.inputs.baseline import load_baseline
from autotest.inputs.baseline_model import PairedSpec, PairedWindow
from autotest.inputs.baseline_writer import baseline_yaml
from autotest.judge.model import ERROR, FAIL, PASS
from autotest.judge.paired import (
    bitwise_pairs,
    judge_paired,
    measure_paired,
    metric_windows,
    paired_mde,
    paired_metrics,
    paired_threshold,
    window_difference,
)
from autotest.judge.trace import Trace
from tests.helpers import write_yaml

STEPS = range(1, 31)
BASELINE = """\
name: t
golden:
  table:
    reward: {%s}
    time/step: {%s}
checks:
  - {metric: reward, method: absolute, operator: "<", threshold: 0.1}
  - {metric: time/step, method: relative, operator: "<", threshold: 0.5}
roles: {reward: reward, time/step: step_time}
calibration: {runs: 3, floors: {reward: 0.001}}
""" % (", ".join(f"{s}: 0.5" for s in STEPS), ", ".join(f"{s}: 1.0" for s in STEPS))


def trace(values: dict[int, float], metric: str = "reward") -> Trace:
    return Trace("t", MappingProxyType({metric: MappingProxyType(values)}), train_steps=tuple(values))


def noisy(seed: int, shift: float = 0.0, sd: float = 0.02) -> Trace:
    rng = random.Random(seed)
    return trace({s: 0.5 + shift + rng.gauss(0, sd) for s in STEPS})


@pytest.fixture
def baseline(tmp_path):
    return load_baseline(write_yaml(tmp_path / "t.yaml", BASELINE))


def test_windows_split_the_logged_steps_into_early_middle_late():
    assert metric_windows(range(1, 46)) == [(1, 15), (16, 30), (31, 45)]
    assert metric_windows([0, 15, 30, 45]) == [(0, 15), (30, 30), (45, 45)]
    assert metric_windows([7]) == [(7, 7)]


def test_the_difference_uses_only_steps_both_runs_logged():
    base = trace({1: 1.0, 2: 2.0, 3: math.nan})
    head = trace({2: 2.5, 3: 9.0, 4: 9.0})
    assert window_difference(base, head, "reward", (1, 4)) == pytest.approx(0.5)
    assert window_difference(base, head, "reward", (5, 9)) is None


def test_machine_metrics_are_not_paired(baseline):
    assert paired_metrics(baseline) == ["reward"]


def test_aa_noise_is_the_rms_of_the_pair_differences(baseline):
    pairs = [(0, trace({s: 0.5 for s in STEPS}), trace({s: 0.51 for s in STEPS})),
             (1, trace({s: 0.5 for s in STEPS}), trace({s: 0.47 for s in STEPS}))]
    spec = measure_paired(baseline, trace({s: 0.5 for s in STEPS}), pairs, "natural").spec
    assert [w.gate_id for w in spec.windows] == ["reward[paired 1-10]", "reward[paired 11-20]", "reward[paired 21-30]"]
    assert spec.windows[0].noise == pytest.approx(math.sqrt((0.01 ** 2 + 0.03 ** 2) / 2))
    assert spec.windows[0].floor == 0.001  # the declared floor travels with the window
    assert spec.pairs == 2 and spec.seeds == (0, 1)


def test_bitwise_equal_pairs_are_found_and_fall_to_the_floor(baseline):
    same = trace({s: 0.5 for s in STEPS})
    moved = trace({s: 0.5 if s != 30 else 0.5000001 for s in STEPS})
    assert bitwise_pairs(baseline, [(0, same, same), (1, same, moved), (2, same, trace({s: 0.5 for s in STEPS}))]) \
        == [0, 2]
    measured = measure_paired(baseline, same, [(0, same, same), (1, same, same)], "X=1")
    window = measured.spec.windows[0]
    assert paired_threshold(measured.spec, window, 1) == pytest.approx(0.01 * 0.5)


def test_one_pair_is_not_enough(baseline):
    with pytest.raises(ValueError, match="at least two"):
        measure_paired(baseline, noisy(0), [(0, noisy(0), noisy(1))], "natural")


def spec_with(noise: float, pairs: int = 10, windows: int = 1) -> PairedSpec:
    return PairedSpec(pairs=pairs, perturbation="natural",
                      windows=tuple(PairedWindow("reward", 1 + 10 * i, 10 + 10 * i, noise, 0.5)
                                    for i in range(windows)))


def test_threshold_narrows_with_seeds_and_widens_with_more_gates():
    one, many = spec_with(0.02), spec_with(0.02, windows=3)
    w = one.windows[0]
    assert paired_threshold(one, w, 4) == pytest.approx(paired_threshold(one, w, 1) / 2)
    assert paired_threshold(many, many.windows[0], 1) > paired_threshold(one, w, 1)
    assert paired_mde(one, w, 1) > paired_threshold(one, w, 1)


def test_a_shift_beyond_the_noise_fails_and_an_aa_pair_passes():
    spec = spec_with(0.02 * math.sqrt(2 / 10), windows=3)  # two runs' 10-step means of sd 0.02, differenced
    clean = judge_paired(spec, [(s, noisy(s), noisy(100 + s)) for s in range(3)], "calibrate")
    assert clean.status == PASS, [r.message for r in clean.results]
    shifted = judge_paired(spec, [(s, noisy(s), noisy(100 + s, shift=0.06)) for s in range(3)], "calibrate")
    assert shifted.status == FAIL
    assert all(r.status == FAIL for r in shifted.results)
    assert "3 of 3 the same sign" in shifted.results[0].message


def test_a_downward_change_fails_like_an_upward_one():
    spec = spec_with(0.01)
    down = judge_paired(spec, [(0, noisy(0, sd=0), noisy(0, shift=-0.2, sd=0))], "calibrate")
    assert down.status == FAIL and down.results[0].mean_difference == pytest.approx(-0.2)


def test_no_paired_noise_is_an_error_naming_the_fix():
    verdict = judge_paired(None, [(0, noisy(0), noisy(1))], "run `rl-autotest calibrate t --paired`")
    assert verdict.status == ERROR and "calibrate t --paired" in verdict.reason


def test_a_window_neither_side_logged_is_an_error_not_a_pass():
    verdict = judge_paired(spec_with(0.01), [(0, trace({40: 1.0}), trace({40: 1.0}))], "calibrate")
    assert verdict.status == ERROR and "no seed's base and head" in verdict.results[0].message


def test_paired_section_round_trips_through_the_writer(baseline, tmp_path):
    pairs = [(s, noisy(s), noisy(50 + s)) for s in range(3)]
    spec = measure_paired(baseline, noisy(0), pairs, "RL_AUTOTEST_AA_PERTURB=1").spec
    from dataclasses import replace

    written = write_yaml(tmp_path / "w.yaml", baseline_yaml(replace(baseline, paired=spec)))
    again = load_baseline(written).paired
    assert again.perturbation == spec.perturbation and again.seeds == (0, 1, 2)
    assert [(w.gate_id, w.floor) for w in again.windows] == [(w.gate_id, w.floor) for w in spec.windows]
    assert [w.noise for w in again.windows] == pytest.approx([w.noise for w in spec.windows], rel=1e-3)
