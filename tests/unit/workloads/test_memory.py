"""The workloads' memory metrics (autotest.workloads.memory): names, units and that they follow real use."""

from __future__ import annotations

import sys

import pytest

from autotest.workloads import memory


def test_memory_metrics_are_the_two_documented_keys_in_mib() -> None:
    values = memory.memory_metrics()
    assert memory.PEAK_RSS in values and values[memory.PEAK_RSS] > 1  # a Python process holds more than 1 MiB
    if sys.platform.startswith("linux"):
        assert set(values) == {memory.RSS, memory.PEAK_RSS}
        assert 1 < values[memory.RSS] <= values[memory.PEAK_RSS] + 1  # now is never above the peak (rounding aside)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc/self/statm is Linux's")
def test_rss_follows_memory_held_and_the_peak_never_falls() -> None:
    before = memory.memory_metrics()
    held = bytearray(b"\x01") * (64 * 1024 * 1024)  # 64 MiB, every page written
    during = memory.memory_metrics()
    assert during[memory.RSS] - before[memory.RSS] > 48
    del held
    after = memory.memory_metrics()
    assert after[memory.PEAK_RSS] >= during[memory.PEAK_RSS] >= before[memory.PEAK_RSS]


def test_without_proc_rss_is_not_logged(monkeypatch, tmp_path) -> None:
    monkeypatch.setattr(memory, "_STATM", tmp_path / "absent")
    assert memory.current_rss_mb() is None
    assert set(memory.memory_metrics()) == {memory.PEAK_RSS}
