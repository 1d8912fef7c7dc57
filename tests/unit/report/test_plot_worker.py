"""When a plot worker is started, and the messages' framing between the harness and the worker."""

from __future__ import annotations

import os

import pytest

from autotest.report.plot_worker import ENV, FrameReader, WorkerGone, _frame, wanted


@pytest.mark.parametrize(("setting", "load", "cores", "expected"), [
    ("1", 9.0, 1, True),  # forced on, even on one busy core
    ("0", 0.0, 16, False),  # forced off
    ("", 0.4, 2, True),  # a core idle
    ("", 1.0, 2, True),
    ("", 1.6, 2, False),  # both cores busy: a second process only adds CPU
    ("", 0.0, 1, False),  # one core: nothing to share it with
    (" 1 ", 9.0, 1, True),
    ("yes", 0.0, 4, True),  # not 0 or 1: decided by the load, as unset
])
def test_a_worker_is_wanted_where_a_core_is_idle_or_where_forced(setting, load, cores, expected):
    assert wanted({ENV: setting}, load=load, cores=cores) is expected


def test_frames_arrive_whole_whatever_the_pipe_splits() -> None:
    read_fd, write_fd = os.pipe()
    try:
        reader = FrameReader(read_fd)
        data = _frame(("done", 1, 3)) + _frame(("end", 1))
        os.write(write_fd, data[:5])
        assert reader.read(0.5) == []  # half a header and a message: nothing yet
        os.write(write_fd, data[5:])
        assert reader.read(0.5) == [("done", 1, 3), ("end", 1)]
        assert reader.read(0) == []
        os.write(write_fd, b"\x00\x00\x00\x03abc")
        with pytest.raises(WorkerGone, match="unreadable"):
            reader.read(0.5)
    finally:
        os.close(write_fd)
        os.close(read_fd)


def test_a_closed_pipe_is_a_gone_worker() -> None:
    read_fd, write_fd = os.pipe()
    os.close(write_fd)
    try:
        with pytest.raises(WorkerGone, match="closed"):
            FrameReader(read_fd).read(0.5)
    finally:
        os.close(read_fd)
