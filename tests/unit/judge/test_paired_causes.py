"""An A/B whose training is bitwise the base's beside one moved metric is logging, never "training changed"
(issue 44); a moved metric beside a moved training keeps the changed-training line."""

from __future__ import annotations

import math
import random
from types import MappingProxyType

from autotest.inputs.baseline_model import PairedSpec, PairedWindow
from autotest.judge.model import FAIL
from autotest.judge.paired import judge_paired
from autotest.judge.trace import Trace

STEPS = range(1, 31)
METRICS = ("reward", "entropy", "length")


def _run(seed: int) -> dict[str, dict[int, float]]:
    rng = random.Random(seed)
    # the length zig-zags from step to step, so a value from the previous step is far off
    return {"reward": {s: 0.5 + 0.01 * s + rng.gauss(0, 0.02) for s in STEPS},
            "entropy": {s: 2.0 - 0.02 * s + rng.gauss(0, 0.02) for s in STEPS},
            "length": {s: 40 + 10 * math.sin(s) + rng.gauss(0, 0.5) for s in STEPS}}


def _trace(series: dict[str, dict[int, float]]) -> Trace:
    return Trace("t", MappingProxyType({m: MappingProxyType(v) for m, v in series.items()}), train_steps=tuple(STEPS))


def _spec() -> PairedSpec:
    windows = tuple(PairedWindow(m, a, b, noise, level) for m, noise, level in
                    (("reward", 0.005, 0.6), ("entropy", 0.005, 1.7), ("length", 0.2, 40.0))
                    for a, b in ((1, 10), (11, 20), (21, 30)))
    return PairedSpec(pairs=4, perturbation="natural", windows=windows)


def _late(series: dict[int, float]) -> dict[int, float]:
    return {s: series.get(s - 1, v) for s, v in series.items()}


def _pairs(change) -> list[tuple[int, Trace, Trace]]:
    out = []
    for seed in (1, 2, 3):
        base = _run(seed)
        out.append((seed, _trace(base), _trace(change({m: dict(v) for m, v in base.items()}))))
    return out


def test_one_metric_logged_from_the_previous_step_beside_a_bitwise_training_is_logging():
    def late_length(run):
        run["length"] = _late(run["length"])
        return run
    verdict = judge_paired(_spec(), _pairs(late_length), "calibrate")
    assert verdict.status == FAIL and {r.metric for r in verdict.failed} == {"length"}
    assert verdict.next_step.startswith("logging, not training: length moved while the 2 other paired metrics "
                                        "(entropy, reward) are bitwise equal between base and head at every step on "
                                        "all 3 seeds")
    assert "the head's value is the base's 1 step earlier (the head logged from the previous step)" in verdict.next_step
    assert "changed training" not in verdict.next_step


def test_one_metric_moved_beside_a_training_that_moved_too_is_not_read_as_logging():
    def scaled_length_and_entropy(run):
        run["length"] = {s: v * 1.2 for s, v in run["length"].items()}
        run["entropy"] = {s: v + 1e-4 for s, v in run["entropy"].items()}  # under its paired gate, not bitwise
        return run
    verdict = judge_paired(_spec(), _pairs(scaled_length_and_entropy), "calibrate")
    assert verdict.status == FAIL and {r.metric for r in verdict.failed} == {"length"}
    assert verdict.next_step == ""  # the changed-training line stands
