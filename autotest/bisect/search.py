"""Multisection over a first-parent commit range: which commits to probe next, and what the answers imply.

Pure logic. ``commits`` are ordered oldest to newest, the known-good commit excluded and the known-bad one
last. With P probe slots, each round probes up to P commits that split the open interval into P + 1 near-equal
parts, so n candidates take about log_(P+1)(n) rounds instead of log2(n). A commit that cannot be built or run
is skipped (``git bisect skip``): it leaves the candidates and the search goes on around it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

GOOD, BAD, SKIPPED = "good", "bad", "skipped"


@dataclass(frozen=True)
class SearchState:
    """What is known: ``lo`` is the index of the last known-good commit (-1: the good ref), ``hi`` the first
    known-bad (the bad ref at first), and the outcomes so far by commit index."""

    commits: tuple[str, ...]
    lo: int
    hi: int
    outcomes: Mapping[int, str]

    @property
    def open(self) -> list[int]:
        """The untested, unskipped commits strictly between lo and hi."""
        return [i for i in range(self.lo + 1, self.hi) if i not in self.outcomes]

    @property
    def done(self) -> bool:
        return not self.open

    @property
    def first_bad(self) -> str:
        return self.commits[self.hi]

    @property
    def skipped_between(self) -> list[str]:
        """Skipped commits between the last good and the first bad: the culprit may be any of them too."""
        return [self.commits[i] for i in range(self.lo + 1, self.hi) if self.outcomes.get(i) == SKIPPED]


def start(commits: Sequence[str]) -> SearchState:
    if not commits:
        raise ValueError("no commits between good and bad")
    return SearchState(tuple(commits), -1, len(commits) - 1, {len(commits) - 1: BAD})


def next_probes(state: SearchState, slots: int) -> list[int]:
    """Up to ``slots`` commit indices splitting the open interval into equal parts (multisection)."""
    candidates = state.open
    if not candidates:
        return []
    count = min(max(1, slots), len(candidates))
    picks = []
    for k in range(1, count + 1):
        index = candidates[min(len(candidates) - 1, round(k * len(candidates) / (count + 1)))]
        if index not in picks:
            picks.append(index)
    return picks


def record(state: SearchState, answers: Mapping[int, str]) -> SearchState:
    """The state after a round: the earliest bad answer is the new hi; the latest good before it the new lo."""
    outcomes = {**state.outcomes, **answers}
    hi = min([i for i, o in outcomes.items() if o == BAD and state.lo < i <= state.hi], default=state.hi)
    lo = max([i for i, o in outcomes.items() if o == GOOD and state.lo <= i < hi], default=state.lo)
    return SearchState(state.commits, lo, hi, outcomes)


def rounds_needed(candidates: int, slots: int) -> int:
    """The rounds multisection takes for ``candidates`` commits with ``slots`` probes each (no skips)."""
    rounds, left = 0, candidates
    while left > 1:
        left = -(-left // (slots + 1))  # ceil
        rounds += 1
    return rounds
