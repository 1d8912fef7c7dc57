"""The contention sampler on real processes: a run's wait for a CPU is most of its time when busy processes in sessions
of their own share the cores, and near nothing for a run the scheduler always serves first.

The machine running the suite is never quiet (the other xdist worker trains models beside this test), so "quiet" is
made by scheduling policy, not hoped for: the favoured run is real-time (SCHED_FIFO, root), the crowded one
SCHED_IDLE. (Nice values would not do: each process leads its own session, so autogroup scheduling shares the cores
between sessions whatever their nice.)"""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from autotest.run.contention import ContentionSampler, summarise

_BUSY = "import time\nend = time.monotonic() + {s}\nwhile time.monotonic() < end:\n    pass\n"


def _busy(seconds: float, policy: int | None = None) -> subprocess.Popen:
    def scheduled() -> None:
        priority = os.sched_get_priority_min(policy) if policy == os.SCHED_FIFO else 0
        os.sched_setscheduler(0, policy, os.sched_param(priority))

    return subprocess.Popen([sys.executable, "-c", _BUSY.format(s=seconds)], start_new_session=True,
                            preexec_fn=scheduled if policy is not None else None)


def _sampled_wait_share(seconds: float, policy: int) -> float:
    run = _busy(seconds, policy)
    sampler = ContentionSampler(interval_s=0.2)
    sampler.attach(run.pid)
    # waited for but not reaped: the last sample still reads the exited run's counters (a crowded sampler thread
    # may get no sample in while a real-time run holds a core, and a reaped run leaves nothing to read)
    os.waitid(os.P_PID, run.pid, os.WEXITED | os.WNOWAIT)
    during = summarise(sampler.stop())
    run.wait()
    assert during["cpu_s"] > 0
    return during["run_delay_share"]


@pytest.mark.skipif(os.geteuid() != 0, reason="a real-time process needs root")
def test_the_run_delay_share_tells_a_crowded_run_from_a_favoured_one():
    cores = os.cpu_count() or 1
    burners = [_busy(30) for _ in range(4 * cores)]
    try:
        time.sleep(0.3)
        crowded = _sampled_wait_share(2.0, os.SCHED_IDLE)
        favoured = _sampled_wait_share(1.0, os.SCHED_FIFO)
    finally:
        for b in burners:
            b.kill()
        for b in burners:
            b.wait()
    assert crowded > 0.5, crowded  # four busy processes a core, all served first: the run waits most of its time
    assert favoured < crowded / 2, (favoured, crowded)
