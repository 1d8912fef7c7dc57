"""The contention sampler on real processes: a run's wait for a CPU is near nothing on a quiet machine and most of
its time when busy processes in sessions of their own share the cores."""

from __future__ import annotations

import os
import subprocess
import sys
import time

from autotest.run.contention import ContentionSampler, summarise

_BUSY = "import time\nend = time.monotonic() + {s}\nwhile time.monotonic() < end:\n    pass\n"


def _busy(seconds: float) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", _BUSY.format(s=seconds)], start_new_session=True)


def _sampled_wait_share(seconds: float) -> float:
    run = _busy(seconds)
    sampler = ContentionSampler(interval_s=0.2)
    sampler.attach(run.pid)
    run.wait()
    during = summarise(sampler.stop())
    assert during["cpu_s"] > 0
    return during["run_delay_share"]


def test_the_run_delay_share_tells_a_busy_runner_from_a_quiet_one():
    cores = os.cpu_count() or 1
    burners = [_busy(30) for _ in range(4 * cores)]
    try:
        time.sleep(0.3)
        busy = _sampled_wait_share(2.0)
    finally:
        for b in burners:
            b.kill()
        for b in burners:
            b.wait()
    quiet = _sampled_wait_share(1.0)
    assert busy > 0.5, busy  # four busy processes a core: the run waits most of its runnable time
    assert quiet < busy / 2, (quiet, busy)
