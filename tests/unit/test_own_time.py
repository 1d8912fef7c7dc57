"""OwnClock's accounting: wall time less the longest wait for a CPU of any one thread, span by span."""

from __future__ import annotations

import os

import pytest

from autotest import own_time
from autotest.own_time import OwnClock


class Fake:
    """A clock and a thread table the test moves by hand."""

    def __init__(self) -> None:
        self.now = 100.0
        self.delays: dict[tuple[int, int], int] = {(7, 7): 5_000_000_000}

    def clock(self) -> float:
        return self.now


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> Fake:
    state = Fake()
    monkeypatch.setattr(own_time, "_run_delays", lambda pids: dict(state.delays))
    monkeypatch.setattr(own_time, "_tree", lambda root: [root])
    return state


def test_the_wait_for_a_cpu_is_not_counted(fake: Fake) -> None:
    clock = OwnClock(7, clock=fake.clock)
    fake.now += 10.0
    fake.delays[(7, 7)] += 7_000_000_000  # waited 7 of the 10 s: the delay before the clock started is not counted
    assert clock.elapsed_s() == pytest.approx(3.0)
    assert (clock.wall_s, clock.waited_s) == (pytest.approx(10.0), pytest.approx(7.0))
    assert clock.describe() == "3 s of its own time (10 s wall, 7 s of it waiting for a CPU)"


def test_an_idle_process_counts_the_wall_time(fake: Fake) -> None:
    clock = OwnClock(7, clock=fake.clock)
    for _ in range(3):
        fake.now += 2.0
        clock.elapsed_s()
    assert clock.own_s == pytest.approx(6.0)


def test_threads_waiting_side_by_side_count_once_and_never_beyond_the_span(fake: Fake) -> None:
    clock = OwnClock(7, clock=fake.clock)
    fake.now += 4.0
    fake.delays[(7, 7)] += 3_000_000_000
    fake.delays[(7, 8)] = 2_500_000_000  # a thread born during the span: all of its delay is in it
    assert clock.elapsed_s() == pytest.approx(1.0)
    fake.now += 1.0
    fake.delays[(7, 8)] += 9_000_000_000  # more than the span (threads overlap): at most the span
    assert clock.elapsed_s() == pytest.approx(1.0)


def test_the_listed_processes_are_read_each_time(fake: Fake) -> None:
    seen: list[int] = []
    clock = OwnClock(0, clock=fake.clock, pids=lambda: seen.append(1) or [7])
    fake.now += 1.0
    clock.elapsed_s()
    assert len(seen) == 2  # at start and at the reading


def test_this_process_sleeping_gets_its_wall_time() -> None:
    import time

    clock = OwnClock(os.getpid(), tree=False)
    time.sleep(0.3)
    assert 0.0 <= clock.elapsed_s() <= clock.wall_s
