"""Multisection (and the bisect's own argument checks): probes split the interval evenly; answers narrow it; skips are stepped around."""

from __future__ import annotations

import pytest

from autotest.bisect.search import BAD, GOOD, SKIPPED, next_probes, record, rounds_needed, start
from autotest.bisect.session import BisectOptions, bisect
from autotest.errors import UsageError
from autotest.inputs.case import load_case


def _run(n: int, culprit: int, slots: int, skipped: frozenset[int] = frozenset()) -> tuple[int, int]:
    """(first bad index found, rounds) for commits 0..n-1 where ``culprit`` and every later one are bad."""
    state = start([f"c{i}" for i in range(n)])
    rounds = 0
    while not state.done:
        picks = next_probes(state, slots)
        assert 1 <= len(picks) <= slots and len(set(picks)) == len(picks)
        rounds += 1
        state = record(state, {i: SKIPPED if i in skipped else BAD if i >= culprit else GOOD for i in picks})
    return state.hi, rounds


@pytest.mark.parametrize("slots", [1, 2, 3, 4])
@pytest.mark.parametrize("n", [1, 2, 5, 16, 31])
def test_every_culprit_is_found_within_the_multisection_bound(n: int, slots: int) -> None:
    for culprit in range(n):
        found, rounds = _run(n, culprit, slots)
        assert found == culprit
        assert rounds <= rounds_needed(n, slots) + 1


def test_more_slots_take_fewer_rounds() -> None:
    assert [rounds_needed(16, p) for p in (1, 2, 3)] == [4, 3, 2]
    worst = {p: max(_run(32, c, p)[1] for c in range(32)) for p in (1, 2, 4)}
    assert worst[1] > worst[2] > worst[4]


def test_a_skipped_commit_is_stepped_around_and_reported_when_it_borders_the_culprit() -> None:
    found, _ = _run(16, 9, 2, frozenset({4}))
    assert found == 9
    state = start([f"c{i}" for i in range(6)])
    state = record(state, {2: GOOD, 3: SKIPPED, 4: BAD})
    assert state.done and state.first_bad == "c4" and state.skipped_between == ["c3"]


@pytest.mark.parametrize("flag, good, bad", [("--good", "--upload-pack=touch x", "main"),
                                             ("--bad", "v1", ""), ("--bad", "v1", "a b")])
def test_an_option_shaped_or_empty_end_is_refused_under_its_own_flag(flag: str, good: str, bad: str,
                                                                      tmp_path) -> None:
    with pytest.raises(UsageError) as info:
        bisect(load_case("tiny-grpo"), BisectOptions(good=good, bad=bad, results_root=tmp_path))
    assert str(info.value).startswith(f"{flag}: ")
