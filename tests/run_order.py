"""The order the whole suite runs in: the longest files first, so no xdist worker ends alone on one of them.

The files that run longest (measured: docs/benchmarks.md, "Which tests dominate") run first, longest first;
then every other file with a ``slow`` test; then the rest. Each file stays whole and keeps its own order
(its module fixtures are built once per worker), and files keep their collection order within a rank.
``pytest -n N`` without ``--dist`` schedules with worksteal (``prefer_worksteal``, from the root conftest):
xdist splits the ordered list in two, one worker starts the TRL adoption run at once, and the worker that
finishes its half takes the tail of the other's queue. Under xdist's own default (``load``) the first
chunk of about a quarter of each worker's share would go to one worker whole, TRL and bisect included.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

LONGEST_FIRST = (
    "tests/integration/test_adoption_trl.py",
    "tests/integration/bisect/test_bisect.py",
    "tests/integration/test_ab.py",  # about 20 real 45-step runs: at the end it left one worker running alone
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


def prefer_worksteal(option: Any) -> None:
    """``-n N`` with no ``--dist`` (xdist's option values; absent under ``-p no:xdist``): use worksteal."""
    if getattr(option, "numprocesses", None) and getattr(option, "dist", None) == "no":
        option.dist = "worksteal"
