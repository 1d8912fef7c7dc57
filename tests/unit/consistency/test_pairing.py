"""Stale syncs from each side's own held weight version: named with the number of versions behind."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from autotest.consistency.pairing import ForwardPair, stale_by, stale_sync_line

from .test_correlation import record


def _pair(rollout_held: int | None, actor_held: int | None, batch: int | None = 3) -> ForwardPair:
    rollout = record("rollout", weight_version=batch, held_weight_version=rollout_held, log_path="r.jsonl", line=4)
    actor = record("actor", phase="recompute_logprob", weight_version=batch, held_weight_version=actor_held,
                   log_path="a.jsonl", line=5)
    return ForwardPair("step3:actor0000~rollout0000", 3, actor.request_ids, batch, rollout, actor, Path("r"),
                       Path("a"), stale_by(rollout, actor))


@pytest.mark.parametrize(("rollout_held", "actor_held", "behind"), [
    (2, 3, 1),      # one sync skipped
    (1, 3, 2),      # two
    (3, 3, None),   # in sync
    (4, 3, None),   # ahead is not a stale sync (and not what this line claims)
    (None, 3, None),  # a log that does not say: nothing is claimed
    (2, None, None),
])
def test_stale_by_counts_versions_behind_from_each_sides_own_held_version(rollout_held, actor_held, behind):
    pair = _pair(rollout_held, actor_held)
    assert pair.stale_by == behind
    line = stale_sync_line(pair)
    if behind is None:
        assert line is None
    else:
        assert line is not None and "\n" not in line
        assert line.startswith(f"the rollout served weights {behind} version(s) behind the actor (a stale sync): ")
        assert (f"step 3 for the batch of weight version 3, the rollout held version {rollout_held} and the actor "
                f"held {actor_held} (r.jsonl:4, a.jsonl:5)") in line


def test_the_batch_version_alone_never_makes_a_stale_sync():
    """The batch's label is the same on both sides by construction: only the held versions can show staleness."""
    pair = _pair(None, None, batch=3)
    assert stale_by(pair.rollout, dataclasses.replace(pair.actor, weight_version=4)) is None
