"""A failed A/B gets the golden triage's next step, read on the paired differences (issue 44): one test per next-step
class with base and head traces built here, and one per class where its claim is false."""

from __future__ import annotations

import math
import random
from pathlib import Path
from types import MappingProxyType

import pytest

from autotest.inputs.baseline_model import Baseline, CheckSpec, PairedSpec, PairedWindow
from autotest.judge.model import FAIL
from autotest.judge.paired import judge_paired
from autotest.judge.paired_triage import paired_inputs
from autotest.judge.trace import Trace

STEPS = tuple(range(1, 31))
EVALS = (0, 10, 20, 30)
SEEDS = (11, 12, 13)
REWARD, ENTROPY, LENGTH = "response/rewards/mean", "entropy/mean", "response/response_len/mean"
EVAL, MISMATCH = "eval/accuracy", "mismatch/mismatch_k3_kl"
#: metric -> (level at step s, seed noise per step, A/A noise of a window mean)
SHAPES = {
    REWARD: (lambda s: 0.1 + 0.025 * s, 0.02, 0.002),
    ENTROPY: (lambda s: 2.0 - 0.03 * s, 0.02, 0.002),
    LENGTH: (lambda s: 5.0 - 0.05 * s + 0.3 * math.sin(s), 0.1, 0.01),  # zig-zags: a step's lag is far off
    EVAL: (lambda s: 0.1 + 0.025 * s, 0.03, 0.005),
    MISMATCH: (lambda s: 1e-14, 0.0, 1e-15),
}


def _windows(metric: str) -> list[tuple[int, int]]:
    return [(0, 10), (20, 20), (30, 30)] if metric == EVAL else [(1, 10), (11, 20), (21, 30)]


def _baseline() -> Baseline:
    windows = tuple(PairedWindow(m, a, b, noise=aa, level=abs(level((a + b) / 2)), floor=1e-4 if m == MISMATCH else 0.0)
                    for m, (level, _, aa) in SHAPES.items() for a, b in _windows(m))
    noise = {m: MappingProxyType({s: sd for s in (EVALS if m == EVAL else STEPS)})
             for m, (_, sd, _) in SHAPES.items() if sd}
    return Baseline("t", Path("t.yaml"), tuple(CheckSpec(m, "absolute", "<", 1.0) for m in SHAPES),
                    noise_table=MappingProxyType(noise), paired=PairedSpec(pairs=4, perturbation="natural",
                                                                           windows=windows))


def _trace(series: dict[str, dict[int, float]]) -> Trace:
    return Trace("t", MappingProxyType({m: MappingProxyType(v) for m, v in series.items()}), train_steps=STEPS,
                 eval_steps=EVALS)


def _base(seed: int) -> dict[str, dict[int, float]]:
    rng = random.Random(seed)
    return {m: {s: level(s) + rng.gauss(0, sd / 2) for s in (EVALS if m == EVAL else STEPS)}
            for m, (level, sd, _) in SHAPES.items()}


def _judge(effects: dict[str, object], bitwise: tuple[str, ...] = ()):
    """Base and head on three seeds: the head is the base plus ``effects[metric](step, value)`` and a noise of the A/A
    size (a metric of ``bitwise`` unchanged to the bit)."""
    pairs = []
    for seed in SEEDS:
        base, rng = _base(seed), random.Random(seed + 100)
        head = {}
        for metric, series in base.items():
            effect = effects.get(metric)
            head[metric] = {s: (effect(s, v) if effect else v) + (0.0 if metric in bitwise else
                                                                  rng.gauss(0, SHAPES[metric][2] / 2))
                            for s, v in series.items()}
        pairs.append((seed, _trace(base), _trace(head)))
    baseline = _baseline()
    return judge_paired(baseline.paired, pairs, "calibrate", baseline)


def _from(step: int, slope: float):
    return lambda s, v: v + slope * max(0, s - step + 1)


def _primary(verdict) -> str:
    assert verdict.status == FAIL
    return verdict.triage[0].rule


# logging


def test_one_metric_a_constant_factor_off_beside_a_training_in_its_noise_is_logging():
    verdict = _judge({LENGTH: lambda s, v: 2 * v})
    assert _primary(verdict) == "logging-units"
    assert "2 x golden" in verdict.next_step and "changed training" not in verdict.next_step


def test_a_factor_beside_a_training_that_moved_is_not_logging():
    verdict = _judge({LENGTH: lambda s, v: 2 * v, ENTROPY: _from(5, -0.02), REWARD: _from(8, -0.01)})
    assert _primary(verdict) != "logging-units"
    assert not any(m.holds for m in verdict.measured if m.hypothesis == "logging/units")


def test_one_metric_logged_a_step_late_beside_a_bitwise_training_is_logging_alone():
    verdict = _judge({LENGTH: lambda s, v: v - 0.3 * math.sin(s) + 0.3 * math.sin(s - 1)},
                     bitwise=tuple(SHAPES))
    assert [f.rule for f in verdict.triage] == ["logging-units"]
    assert verdict.next_step.startswith("logging, not training: response/response_len/mean moved while the 4 other")


# loss term


def test_a_training_role_that_leads_the_scores_steadily_is_a_loss_term():
    verdict = _judge({ENTROPY: _from(2, -0.012), REWARD: _from(12, -0.01), EVAL: _from(12, -0.01)})
    assert _primary(verdict) == "loss-term"
    reading = next(m for m in verdict.measured if m.hypothesis == "loss term")
    assert reading.holds and reading.values["metric"] == ENTROPY and int(reading.values["lead"]) >= 5


def test_a_training_role_that_moves_with_the_scores_is_not_a_loss_term():
    verdict = _judge({ENTROPY: _from(6, -0.012), REWARD: _from(6, -0.01), EVAL: _from(6, -0.01)})
    assert _primary(verdict) != "loss-term"
    assert not next(m for m in verdict.measured if m.hypothesis == "loss term").holds


# training loop


def test_every_role_moving_together_after_the_start_is_the_training_loop():
    verdict = _judge({ENTROPY: _from(6, -0.012), REWARD: _from(6, -0.01), EVAL: _from(6, -0.01),
                      LENGTH: _from(6, 0.03)})
    assert _primary(verdict) == "gradual"
    assert "training loop" in verdict.next_step


def test_only_eval_moving_is_the_eval_path_not_the_training_loop():
    verdict = _judge({EVAL: lambda s, v: v - 0.1 * (s > 0)})
    assert _primary(verdict) == "eval-path"
    assert all(f.rule != "gradual" for f in verdict.triage)


# sampling


def test_a_length_off_at_the_first_step_with_the_entropy_the_bases_is_the_sampler():
    verdict = _judge({LENGTH: lambda s, v: v + 0.5, REWARD: _from(8, -0.01)})
    assert _primary(verdict) == "sampling-changed"
    first = next(m for m in verdict.measured if m.hypothesis == "first step")
    assert first.holds and first.values["entropy"] == "no" and "response_length" in first.values["moved"]


def test_a_length_and_an_entropy_off_at_the_first_step_are_not_the_sampler_alone():
    verdict = _judge({LENGTH: lambda s, v: v + 0.5, ENTROPY: lambda s, v: v + 0.1, REWARD: _from(8, -0.01)})
    assert _primary(verdict) != "sampling-changed"
    assert next(m for m in verdict.measured if m.hypothesis == "first step").values["entropy"] == "yes"


# data


def test_training_scores_up_while_eval_down_is_other_training_data():
    verdict = _judge({REWARD: _from(8, 0.01), EVAL: lambda s, v: v - 0.1 * (s >= 10)})
    assert _primary(verdict) == "training-data"
    assert next(m for m in verdict.measured if m.hypothesis == "train against eval").holds
    # read on the seeds' mean, and on each seed's pair alone
    assert verdict.triage[0].evidence.endswith(
        "each seed's own primary: 11 training-data, 12 training-data, 13 training-data")


def test_training_and_eval_scores_one_way_is_not_other_data():
    verdict = _judge({REWARD: _from(8, 0.01), EVAL: lambda s, v: v + 0.1 * (s >= 10)})
    assert _primary(verdict) != "training-data"
    assert not next(m for m in verdict.measured if m.hypothesis == "train against eval").holds


# mismatch


def test_a_mismatch_metric_moved_is_the_mismatch_rule():
    verdict = _judge({MISMATCH: lambda s, v: v + 1e-3 * (s >= 5)})
    assert _primary(verdict) == "mismatch"


def test_a_mismatch_metric_under_its_floor_is_not_the_mismatch_rule():
    verdict = _judge({MISMATCH: lambda s, v: v + 1e-6, ENTROPY: _from(6, -0.012), REWARD: _from(6, -0.01)})
    assert all(f.rule != "mismatch" for f in verdict.triage)


# the inputs the readings are given


def test_the_readings_see_the_base_mean_as_the_golden_and_the_larger_of_a_a_and_seed_noise():
    baseline = _baseline()
    pairs = [(s, _trace(_base(s)), _trace(_base(s + 50))) for s in SEEDS]
    spec = baseline.paired
    gates = [(w, 0.3) for w in spec.windows if w.metric == REWARD]
    paired, base, head = paired_inputs(baseline, pairs, gates, 10.0)
    assert base.get(REWARD)[5] == pytest.approx(sum(_base(s)[REWARD][5] for s in SEEDS) / 3)
    assert head.get(REWARD)[5] == pytest.approx(sum(_base(s + 50)[REWARD][5] for s in SEEDS) / 3)
    assert paired.golden_table[REWARD] == base.get(REWARD)
    # the A/A threshold over q (0.03) is above a parted pair's sqrt(2/3) x 0.02 = 0.0163
    assert paired.noise_table[REWARD][5] == pytest.approx(0.03)
    assert [c.scope for c in paired.checks] == ["window"] * 3 and paired.roughness is None
    # under it: one seed's noise of a 3-seed mean before the first update, two parted seeds' after it
    low = paired_inputs(baseline, pairs, [(w, 0.01) for w in spec.windows if w.metric == REWARD], 10.0)[0]
    assert low.noise_table[REWARD][1] == pytest.approx(math.sqrt(1 / 3) * 0.02)
    assert low.noise_table[REWARD][5] == pytest.approx(math.sqrt(2 / 3) * 0.02)
