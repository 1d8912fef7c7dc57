"""A percentile gate is decided on a prefix of the run exactly when no completion of it can pass."""

from __future__ import annotations

import math

import pytest

from autotest.inputs.baseline_model import CheckSpec
from autotest.judge.checks import decide_early
from autotest.judge.model import FAIL
from tests.unit.judge.test_checks import baseline, check, trace


def _decided(golden: dict, current: dict, **spec):
    c = CheckSpec(**{"metric": "m", "method": "absolute", "operator": "<", "threshold": 0.1, "scope": "percentile",
                     **spec})
    return decide_early(c, baseline(c), trace({"m": golden}), trace({"m": current}), True)


def test_a_percentile_is_decided_once_the_steps_to_come_cannot_bring_it_back():
    golden = {s: 0.0 for s in range(1, 46)}
    # p50 of 45 steps interpolates at rank 22: 23 breaching steps fill ranks 22-44 whatever steps 24-45 hold
    assert _decided(golden, {s: 1.0 for s in range(1, 23)}, percentile=50) is None
    r = _decided(golden, {s: 1.0 for s in range(1, 24)}, percentile=50)
    assert r.status == FAIL and r.first_breach_step == 1 and r.observed == 1.0
    assert r.message == ("m: p50 of per-step absolute error over 45 steps is at least 1 whatever the 22 steps not "
                         "logged yet hold, not < 0.1 (23 of the first 23 steps breach)")
    # the judge of the stopped run (the logged prefix alone) fails it too
    assert check(golden, {s: 1.0 for s in range(1, 24)}, scope="percentile", percentile=50).status == FAIL
    # p80 of 45 interpolates between ranks 35 and 36 (weight 0.2 on 36): 8 breaches leave both to the passing
    # steps, 9 put 1.0 at rank 36 and the bound at 0.2, whenever they came
    eight = {s: (1.0 if s <= 8 else 0.0) for s in range(1, 31)}
    assert _decided(golden, eight, percentile=80) is None
    r = _decided(golden, {**eight, 30: 1.0}, percentile=80)
    assert r.status == FAIL and r.observed == pytest.approx(0.2)
    assert _decided(golden, {s: 0.0 for s in range(1, 46) if s != 45}, percentile=50) is None
    # complete, nothing left to decide early: the ordinary check does
    assert _decided(golden, {s: 1.0 for s in range(1, 46)}, percentile=50) is None


def test_a_percentile_that_must_stay_above_its_threshold_is_decided_from_the_low_end():
    golden = {s: 0.0 for s in range(1, 11)}
    low = {s: 0.0 for s in range(1, 4)}  # error 0, the check wants > 0.5: each logged step breaches
    assert _decided(golden, low, percentile=20, operator=">", threshold=0.5).status == FAIL  # rank 1.8: ranks 1, 2
    assert _decided(golden, {1: 0.0, 2: 0.0}, percentile=20, operator=">", threshold=0.5) is None


@pytest.mark.parametrize("operator", ["<", "<=", ">", ">="])
def test_a_decided_percentile_fails_every_completion_and_the_stopped_prefix(operator):
    import random

    rng = random.Random(operator)
    decided = 0
    for _ in range(400):
        n = rng.randint(1, 12)
        golden = {s: 0.0 for s in range(1, n + 1)}
        logged = rng.randint(0, n - 1)
        prefix = {s: rng.choice([0.0, 0.5, 1.0, 1.5, rng.uniform(0, 2)]) for s in range(1, logged + 1)}
        spec = dict(percentile=rng.choice([0, 10, 25, 50, 80, 95, 100]), operator=operator, threshold=1.0)
        result = _decided(golden, prefix, **spec)
        if result is None:
            continue
        decided += 1
        assert check(golden, prefix, scope="percentile", **spec).status == FAIL, (prefix, spec)
        for rest in ([0.0], [2.0], [1.0], None):
            tail = {s: (rng.uniform(0, 2) if rest is None else rest[0]) for s in range(logged + 1, n + 1)}
            assert check(golden, {**prefix, **tail}, scope="percentile", **spec).status == FAIL, (prefix, tail, spec)
    assert decided > 20


def test_nothing_is_decided_early_for_a_value_check_or_a_broken_baseline():
    assert _decided({1: 0.0, 2: 0.0, 3: 0.0}, {1: 5.0, 2: 5.0}, method="value", percentile=0) is None
    assert _decided({1: math.nan, 2: 0.0, 3: 0.0}, {1: 5.0, 2: 5.0}, percentile=0) is None


def test_a_percentile_row_and_message_say_what_share_of_steps_breached():
    from autotest.scopes import scope_kind

    golden = {s: 0.0 for s in range(1, 46)}
    current = {s: (1.0 if s % 2 == 0 else 0.0) for s in range(1, 46)}  # every other step far off
    result = check(golden, current, threshold=0.5, scope="percentile", percentile=50)
    assert result.status != FAIL  # the median reads a clean step
    assert result.message.endswith("p50 = 0; 22/45 steps (49%) breach the threshold; every 2nd step (steps = 0 mod "
                                   "2: 2, 4, 6, ...; 22/22 of them breach, 0 off them))")
    assert scope_kind("percentile").table_cells(result, "0", "0.5", "2") == (
        "p50 = 0; 22/45 steps breach", "0.5", "worst 2")
    failed = check(golden, {s: 1.0 for s in range(1, 46)}, threshold=0.5, scope="percentile", percentile=50)
    assert failed.status == FAIL and "45/45 steps (100%) breach the threshold)" in failed.message
