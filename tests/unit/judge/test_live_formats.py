"""The live follower reads a TensorBoard run as it grows (an event file grows; its folder's mtime does not)."""

from __future__ import annotations

import time

import pytest

from autotest.inputs.baseline import load_baseline
from autotest.inputs.case import load_case
from autotest.judge.live import Follower
from autotest.judge.verdict import golden_trace
from tests.helpers import write_yaml
from tests.integration.calibration.test_every_format import CASE
from tests.unit.judge.test_unclear_messages import BASELINE, write_events

pytest.importorskip("tensorboard")


def test_fail_fast_on_a_growing_tensorboard_log(tmp_path, monkeypatch):
    monkeypatch.setenv("FAKE_FW_ROOT", str(tmp_path))
    case = load_case(write_yaml(tmp_path / "cases" / "tb.yaml", CASE.format(name="tb", fmt="tensorboard")))
    baseline = load_baseline(write_yaml(tmp_path / "b.yaml", BASELINE))
    work = tmp_path / "work"
    follower = Follower(case, baseline, golden_trace(baseline), work, fail_fast=True)
    assert follower.poll() is None  # nothing logged yet
    logs = work / time.strftime("%Y%m%d%H%M%S") / "logs"
    write_events(logs, {"response/rewards/mean": {1: 0.1}, "eval/accuracy": {0: 0.4}})
    assert follower.poll() is None and follower.last_step == 1
    # the same file, grown (the folder's own mtime does not change)
    write_events(logs, {"response/rewards/mean": {1: 0.1, 2: 0.9}, "eval/accuracy": {0: 0.4}})
    reason = follower.poll()
    assert reason is not None and reason.startswith("fail-fast: ") and "step 2" in reason
