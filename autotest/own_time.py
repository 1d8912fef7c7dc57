"""A process's own time: the wall time it has been running, less the time it waited, runnable, for a CPU.

A limit in wall seconds ("ready within 120 s") is decided by the machine's load as much as by the process: at
load 18 on two cores a server that loads in 20 s alone takes minutes. Counted on an :class:`OwnClock`, the same
limit means what it says on any load: a process that is alive and getting CPU is waited for; one that is stuck
(asleep, deadlocked) or spins without end still runs out of its own time, and a dead one is seen at once by the
caller. The kernel's per-thread ``schedstat`` run delay is what a neighbour's work costs the process (the same
figure :mod:`autotest.run.contention` records for a run).

Stdlib only: the embedded workloads (a separate program) use it for their teacher servers' readiness, and the
harness's own tests for every wait on a subprocess.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path


def _tree(root: int) -> list[int]:
    """``root`` and its live descendants, from /proc (empty where /proc is missing)."""
    children: dict[int, list[int]] = {}
    try:
        entries = os.listdir("/proc")
    except OSError:
        return []
    for name in entries:
        if not name.isdigit():
            continue
        try:
            stat = Path(f"/proc/{name}/stat").read_text()
        except OSError:
            continue  # exited while we looked
        fields = stat[stat.rfind(")") + 2:].split()
        children.setdefault(int(fields[1]), []).append(int(name))
    found, todo = [root], [root]
    while todo:
        for child in children.get(todo.pop(), ()):
            found.append(child)
            todo.append(child)
    return found


def _run_delays(pids: list[int]) -> dict[tuple[int, int], int]:
    """{(pid, tid): ns the thread has waited, runnable, for a CPU} from /proc/<pid>/task/<tid>/schedstat."""
    delays: dict[tuple[int, int], int] = {}
    for pid in pids:
        try:
            tids = os.listdir(f"/proc/{pid}/task")
        except OSError:
            continue
        for tid in tids:
            try:
                delays[(pid, int(tid))] = int(Path(f"/proc/{pid}/task/{tid}/schedstat").read_text().split()[1])
            except (OSError, ValueError, IndexError):
                continue
    return delays


class OwnClock:
    """Seconds of a process's own time (its tree's with ``tree``; or of whatever ``pids()`` lists at each
    reading) since the clock was made.

    Each reading adds the wall time since the last one less the longest any one thread of the process waited
    for a CPU in that span: for a single-threaded start-up (imports, loading a checkpoint) exactly the time it
    would have taken with the machine to itself, short of its own sleeps and I/O. Read it every second or more
    often while you wait. Where /proc is missing it is the wall clock.
    """

    def __init__(self, pid: int, tree: bool = True, clock: Callable[[], float] = time.monotonic,
                 pids: Callable[[], list[int]] | None = None) -> None:
        self.pid = pid
        self.tree = tree
        self.clock = clock
        self._which = pids  # the processes to watch, where they are not one tree (e.g. orphans of a killed run)
        self.started = self._at = clock()
        self.own_s = 0.0
        self.waited_s = 0.0
        self._last = _run_delays(self._pids())

    def _pids(self) -> list[int]:
        if self._which is not None:
            return self._which()
        return _tree(self.pid) if self.tree else [self.pid]

    def elapsed_s(self) -> float:
        """The own time so far (a reading: call it while you wait)."""
        now, delays = self.clock(), _run_delays(self._pids())
        longest_wait_ns = max((ns - self._last.get(key, 0) for key, ns in delays.items()), default=0)
        span_s = now - self._at
        waited_s = min(span_s, max(0.0, longest_wait_ns / 1e9))
        self.own_s += span_s - waited_s
        self.waited_s += waited_s
        self._at, self._last = now, {**self._last, **delays}
        return self.own_s

    @property
    def wall_s(self) -> float:
        return self._at - self.started

    def describe(self) -> str:
        """``"120 s of its own time (410 s wall, 290 s of it waiting for a CPU)"``: what a limit message says."""
        return (f"{self.own_s:.0f} s of its own time ({self.wall_s:.0f} s wall, {self.waited_s:.0f} s of it "
                f"waiting for a CPU)")
