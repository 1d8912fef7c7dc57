"""tests/run_order.py: the longest files first, then files with a slow test, each file whole and in its order."""

from __future__ import annotations

from dataclasses import dataclass
from types import SimpleNamespace

from tests.run_order import LONGEST_FIRST, prefer_worksteal, run_order


@dataclass
class Item:
    nodeid: str
    slow: bool = False

    def get_closest_marker(self, name: str) -> object | None:
        return object() if (name == "slow" and self.slow) else None


def _ids(items: list[Item]) -> list[str]:
    return [item.nodeid for item in items]


def test_longest_files_first_then_slow_files_then_the_rest_each_file_whole() -> None:
    items = [
        Item("tests/unit/test_a.py::one"),
        Item("tests/integration/x/test_fast.py::one"),
        Item("tests/integration/x/test_mixed.py::quick"),
        Item("tests/integration/x/test_mixed.py::long", slow=True),
        Item("tests/integration/x/test_mixed.py::quick2"),
        Item("tests/integration/test_long2.py::t"),
        Item("tests/integration/test_long1.py::t"),
        Item("tests/unit/test_b.py::one"),
    ]
    ordered = run_order(items, longest_first=("tests/integration/test_long1.py", "tests/integration/test_long2.py"))
    assert _ids(ordered) == [
        "tests/integration/test_long1.py::t",
        "tests/integration/test_long2.py::t",
        # a file with one slow test moves whole, its own order kept (module fixtures stay built once)
        "tests/integration/x/test_mixed.py::quick",
        "tests/integration/x/test_mixed.py::long",
        "tests/integration/x/test_mixed.py::quick2",
        # the rest in collection order
        "tests/unit/test_a.py::one",
        "tests/integration/x/test_fast.py::one",
        "tests/unit/test_b.py::one",
    ]


def test_without_long_or_slow_files_the_order_is_unchanged() -> None:
    items = [Item(f"tests/unit/test_{name}.py::t") for name in "cab"]
    assert run_order(items) == items


def test_the_longest_files_named_exist() -> None:
    from tests.helpers import ROOT

    assert [path for path in LONGEST_FIRST if not (ROOT / path).is_file()] == []


def test_a_bare_n_schedules_with_worksteal_and_an_explicit_dist_or_no_xdist_is_kept() -> None:
    bare = SimpleNamespace(numprocesses="auto", dist="no")
    prefer_worksteal(bare)
    assert bare.dist == "worksteal"
    chosen = SimpleNamespace(numprocesses=2, dist="loadfile")
    prefer_worksteal(chosen)
    assert chosen.dist == "loadfile"
    serial = SimpleNamespace(numprocesses=0, dist="no")
    prefer_worksteal(serial)
    assert serial.dist == "no"
    without_xdist = SimpleNamespace()
    prefer_worksteal(without_xdist)
    assert vars(without_xdist) == {}
