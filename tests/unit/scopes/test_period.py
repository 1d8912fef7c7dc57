"""The period of breaching steps (autotest.scopes.period): periods 2 and 5 named, none for random or sustained
breaches, a stray breach off the period and a missed step on it tolerated."""

from __future__ import annotations

import random

from autotest.scopes.period import breach_period

STEPS = range(1, 46)


def test_every_other_step_is_period_two():
    found = breach_period(STEPS, [s for s in STEPS if s % 2 == 0])
    assert (found.period, found.phase, found.on_period, found.period_steps, found.off_period) == (2, 0, 22, 22, 0)
    assert found.describe().startswith("every 2nd step (steps = 0 mod 2: 2, 4, 6, ...; 22/22 of them breach")


def test_every_fifth_step_is_period_five_not_its_multiples():
    found = breach_period(STEPS, [s for s in STEPS if s % 5 == 1])
    assert (found.period, found.phase, found.on_period) == (5, 1, 9)
    assert "every 5th step" in found.describe()


def test_a_fault_at_the_edge_of_the_bound_breaches_on_some_of_its_steps():
    # the case: the stepwise gate caught 11 of the 22 alternate steps, never an odd one
    evens = [s for s in STEPS if s % 2 == 0]
    assert breach_period(STEPS, evens[::2] + evens[1::4]).period == 2


def test_a_stray_breach_off_the_period_is_noise():
    found = breach_period(STEPS, [s for s in STEPS if s % 5 == 0] + [7])
    assert (found.period, found.off_period) == (5, 1)


def test_no_period_in_random_breaches():
    for seed in range(20):
        rng = random.Random(seed)
        breached = [s for s in STEPS if rng.random() < 0.3]
        assert breach_period(STEPS, breached) is None, (seed, breached)


def test_no_period_in_a_sustained_fault_or_a_few_breaches():
    assert breach_period(STEPS, list(STEPS)) is None
    assert breach_period(STEPS, list(range(10, 46))) is None  # from step 10 on: an onset, not a period
    assert breach_period(STEPS, [4, 8]) is None  # too few to call a period
    assert breach_period([1, 2, 3, 4], [2, 4]) is None  # too few steps for a pattern to repeat


def test_the_pattern_must_repeat_three_times():
    # period 15 over 45 steps repeats three times; period 21 would not (and 3, 7 leave most of their steps clean)
    assert breach_period(STEPS, [5, 20, 35]).period == 15
    assert breach_period(STEPS, [3, 24, 45]) is None
