"""Memory metrics of the embedded workloads: what a step-summary row carries under ``memory/``.

| key                    | what                                                                  |
|------------------------|-----------------------------------------------------------------------|
| ``memory/rss_mb``      | resident set size of this process now (``/proc/self/statm``), MiB     |
| ``memory/peak_rss_mb`` | the process's peak resident set size so far (``getrusage`` ru_maxrss), MiB |

Read after the step's work, so a reference kept per step shows as growth of ``rss_mb`` (the leak gate,
scope ``slope``) and a larger working set as a larger ``peak_rss_mb`` (the peak gate). Reading them
draws no random numbers and touches no tensor: logging them leaves the run's numerics as they were. Only
the driver process is measured: with ``--ray`` the rollout and trainer actors are processes of their own.
Without ``/proc`` (macOS) ``rss_mb`` is not logged, and a gate on it says the metric is missing.
"""

from __future__ import annotations

import os
import resource
import sys
from pathlib import Path

RSS = "memory/rss_mb"
PEAK_RSS = "memory/peak_rss_mb"
_MIB = 1024 * 1024
_STATM = Path("/proc/self/statm")


def current_rss_mb() -> float | None:
    """This process's resident set size in MiB, or None where ``/proc`` is not there."""
    try:
        resident_pages = int(_STATM.read_text().split()[1])
    except (OSError, IndexError, ValueError):
        return None
    return resident_pages * os.sysconf("SC_PAGE_SIZE") / _MIB


def peak_rss_mb() -> float:
    """This process's peak resident set size in MiB (ru_maxrss: KiB on Linux, bytes on macOS)."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / _MIB if sys.platform == "darwin" else peak / 1024


def memory_metrics() -> dict[str, float]:
    """The ``memory/*`` values of one step-summary row, rounded to 0.01 MiB."""
    values = {PEAK_RSS: round(peak_rss_mb(), 2)}
    rss = current_rss_mb()
    if rss is not None:
        values[RSS] = round(rss, 2)
    return values
