"""The log faults' hooks (autotest.workloads.log_faults): what they change, and their bad arguments one line each."""

from __future__ import annotations

import pytest

from autotest.errors import UsageError
from autotest.workloads.faults import make_fault


class _Rows:
    def __init__(self) -> None:
        self.rows: list[dict] = []

    def write(self, row: dict) -> None:
        self.rows.append(row)


def test_log_scale_multiplies_one_logged_metric_only():
    inner = _Rows()
    tracker = make_fault("log-scale").wrap_tracker(inner)
    tracker.write({"step": 1, "response/response_len/mean": 6.5, "response/rewards/mean": 0.25})
    tracker.write({"step": 1, "train_metrics/worker_0/loss": 0.1})
    assert inner.rows == [{"step": 1, "response/response_len/mean": 13.0, "response/rewards/mean": 0.25},
                          {"step": 1, "train_metrics/worker_0/loss": 0.1}]
    scaled = _Rows()
    make_fault("log-scale:entropy/mean:0.001").wrap_tracker(scaled).write({"step": 2, "entropy/mean": 2000.0})
    assert scaled.rows == [{"step": 2, "entropy/mean": 2.0}]


@pytest.mark.parametrize("spec", ["log-scale:entropy/mean", "log-scale:entropy/mean:1", "log-scale::2",
                                  "log-scale:entropy/mean:x"])
def test_log_scale_refuses_a_bad_argument_in_one_line(spec):
    with pytest.raises(UsageError, match="needs METRIC:FACTOR"):
        make_fault(spec)


def test_fewer_steps_ends_the_loop_early_and_keeps_the_schedule():
    hooks = make_fault("fewer-steps")
    assert hooks.loop_end(45) == 44 and make_fault("fewer-steps:5").loop_end(45) == 40
    assert make_fault(None).loop_end(45) == 45
    with pytest.raises(UsageError, match="at least one must run"):
        make_fault("fewer-steps:45").loop_end(45)
    with pytest.raises(UsageError, match="needs a positive step"):
        make_fault("fewer-steps:0")


def test_log_previous_writes_each_value_one_row_late_and_the_first_as_it_is():
    from autotest.workloads.log_faults import LogPrevious

    inner = _Rows()
    tracker = LogPrevious(None, 0).wrap_tracker(inner)
    for step, length in ((1, 6.0), (2, 7.0), (3, 8.0)):
        tracker.write({"step": step, "response/response_len/mean": length, "entropy/mean": 1.0 + step})
    tracker.write({"step": 3, "train_metrics/worker_0/loss": 0.1})  # rows without it pass through
    assert inner.rows == [{"step": 1, "response/response_len/mean": 6.0, "entropy/mean": 2.0},
                          {"step": 2, "response/response_len/mean": 6.0, "entropy/mean": 3.0},
                          {"step": 3, "response/response_len/mean": 7.0, "entropy/mean": 4.0},
                          {"step": 3, "train_metrics/worker_0/loss": 0.1}]
    with pytest.raises(UsageError, match="needs METRIC"):
        LogPrevious("", 0).wrap_tracker(_Rows())
