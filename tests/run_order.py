"""The order the whole suite runs in: the longest files first, so no xdist worker ends alone on one of them.

The files that run longest (measured: docs/benchmarks.md, "Which tests dominate") run first, longest first;
then every other file with a ``slow`` test; then the rest. Each file stays whole and keeps its own order
(its module fixtures are built once per worker), and files keep their collection order within a rank.
Under ``pytest -n auto --dist worksteal`` (.ci/run) one worker starts the TRL adoption run at once while
the other starts bisect and then steals the short tests queued behind them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

LONGEST_FIRST = (
    "tests/integration/test_adoption_trl.py",
    "tests/integration/bisect/test_bisect.py",
)


def _file(item: Any) -> str:
    return item.nodeid.split("::", 1)[0]


def run_order(items: Sequence[Any], longest_first: Sequence[str] = LONGEST_FIRST) -> list[Any]:
    """``items`` (pytest items: ``nodeid``, ``get_closest_marker``) in run order; a stable sort by file rank."""
    rank: dict[str, int] = {}
    for item in items:
        path = _file(item)
        if path in longest_first:
            file_rank = list(longest_first).index(path)
        else:
            file_rank = len(longest_first) + (0 if item.get_closest_marker("slow") else 1)
        rank[path] = min(rank.get(path, file_rank), file_rank)
    return sorted(items, key=lambda item: rank[_file(item)])
