"""The GPU slot allocator, exercised by real concurrent processes on a fake GPU count."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from autotest.run.gpu_slots import GpuSlotTimeout, acquire, current_holders
from tests.helpers import ROOT
from tests import waits

# A holder process: takes its GPUs, reports them, then holds until told to let go.
_HOLDER = """
import json, os, sys, time
from pathlib import Path
from autotest.run.gpu_slots import acquire
slots, total, need, out, release, label = sys.argv[1:7]
with acquire(int(need), int(total), timeout_s=600, slots_dir=slots, label=label, poll_s=0.02) as devices:
    tmp = Path(out + ".tmp")
    tmp.write_text(json.dumps({"devices": devices, "acquired_at": time.time(), "pid": os.getpid()}))
    tmp.rename(out)
    while not Path(release).exists():
        time.sleep(0.02)
    released_at = time.time()
Path(out + ".released").write_text(json.dumps({"released_at": released_at}))
"""

#: of the awaited holder's own time (tests/waits.py); the holder's own acquire waits up to 600 s of wall time for
#: slots the test frees within seconds: both bounds on a broken test, never reached by a healthy one
_WAIT_S = 60.0


def _start_holder(tmp_path: Path, name: str, total: int, need: int) -> tuple[subprocess.Popen[bytes], Path, Path]:
    out = tmp_path / f"{name}.json"
    release = tmp_path / f"{name}.release"
    args = [str(tmp_path / "slots"), str(total), str(need), str(out), str(release), name]
    proc = subprocess.Popen([sys.executable, "-c", _HOLDER, *args], cwd=ROOT)
    return proc, out, release


def _wait_for(path: Path, proc: subprocess.Popen[bytes]) -> dict:
    waits.until(path.exists, _WAIT_S, proc=proc, what=f"{path.name} never appeared")
    return json.loads(path.read_text())


def _finish(proc: subprocess.Popen[bytes], release: Path) -> None:
    release.touch()
    assert waits.wait(proc, _WAIT_S) == 0


def test_parallel_holders_get_disjoint_aligned_slices(tmp_path: Path) -> None:
    holders = [_start_holder(tmp_path, f"case{i}", total=8, need=2) for i in range(4)]
    try:
        # Every holder reports while all of them still hold: the slices coexist.
        slices = [_wait_for(out, proc)["devices"] for proc, out, _ in holders]
    finally:
        for proc, _, release in holders:
            _finish(proc, release)
    flat = [gpu for devices in slices for gpu in devices]
    assert sorted(flat) == list(range(8))
    assert sorted(map(tuple, slices)) == [(0, 1), (2, 3), (4, 5), (6, 7)]


def test_a_case_waits_until_enough_gpus_are_free(tmp_path: Path) -> None:
    big, big_out, big_release = _start_holder(tmp_path, "big", total=4, need=3)
    _wait_for(big_out, big)
    small, small_out, small_release = _start_holder(tmp_path, "small", total=4, need=2)
    try:
        time.sleep(1.0)
        assert not small_out.exists(), "got 2 GPUs while only 1 of 4 was free"
        big_release.touch()
        got = _wait_for(small_out, small)
        released = json.loads((tmp_path / "big.json.released").read_text())
        assert got["acquired_at"] >= released["released_at"]
        assert len(got["devices"]) == 2
    finally:
        big_release.touch()
        waits.wait(big, _WAIT_S)
        _finish(small, small_release)


def test_timeout_names_the_holder(tmp_path: Path) -> None:
    proc, out, release = _start_holder(tmp_path, "tiny-grpo", total=2, need=2)
    try:
        pid = _wait_for(out, proc)["pid"]
        # the holder keeps both slots until told: only the 0.5 s limit can end this wait, on any load
        with pytest.raises(GpuSlotTimeout, match=rf"1 of 2 GPUs.*pid {pid} \(tiny-grpo\)"):
            with acquire(1, 2, timeout_s=0.5, slots_dir=tmp_path / "slots", poll_s=0.02):
                pass
        assert {h.gpu for h in current_holders(tmp_path / "slots", 2)} == {0, 1}
    finally:
        _finish(proc, release)


def test_gpus_of_a_killed_holder_come_back(tmp_path: Path) -> None:
    proc, out, _ = _start_holder(tmp_path, "crashy", total=4, need=4)
    _wait_for(out, proc)
    os.kill(proc.pid, signal.SIGKILL)
    waits.wait(proc, _WAIT_S)
    # free the moment the holder is reaped: 120 s is the bound on a release that never comes
    with acquire(4, 4, timeout_s=120, slots_dir=tmp_path / "slots", poll_s=0.02) as devices:
        assert devices == [0, 1, 2, 3]
    assert current_holders(tmp_path / "slots", 4) == []
