"""The live follower decides a FAIL from a growing xtuner tracker: stepwise breaches at once, a percentile gate
at the step the steps still to come can no longer bring it back, and nothing that only the end can decide."""

from __future__ import annotations

import time

from autotest.inputs.baseline import load_baseline
from autotest.inputs.case import load_case
from autotest.judge.live import Follower, ReplicateGroup
from autotest.judge.verdict import golden_trace
from tests.helpers import write_tracker, write_yaml

CASE = """name: slow
description: a run whose step time the follower watches
markers: [grpo]
goal: fail fast on a slow run
minimal_scale: a tracker written by the test
platform: {gpus: 0}
launch: {command: ["{python}", "-c", "pass"], timeout_s: 60}
tracker: {format: xtuner}
expected: {steps: 45}
baseline: b.yaml
"""

BASELINE = """schema_version: 1
name: slow
golden:
  table:
    time/step: {%s}
    response/rewards/mean: {%s}
steps: {expected: 45, exact: true}
checks:
  - {metric: time/step, method: slowdown, operator: "<", threshold: 1.0, scope: percentile, percentile: 50}
  - {metric: response/rewards/mean, method: absolute, operator: "<", threshold: 0.5, scope: final}
""" % (", ".join(f"{s}: 0.5" for s in range(1, 46)), ", ".join(f"{s}: 0.9" for s in range(1, 46)))


def _follower(tmp_path):
    case = load_case(write_yaml(tmp_path / "slow.yaml", CASE))
    baseline = load_baseline(write_yaml(tmp_path / "b.yaml", BASELINE))
    work = tmp_path / "work"
    tracker = work / time.strftime("%Y%m%d%H%M%S") / "logs" / "exp_tracking" / "tracker.jsonl"
    return Follower(case, baseline, golden_trace(baseline), work, fail_fast=True), tracker


def _log(tracker, step_times: dict[int, float]) -> None:
    write_tracker(tracker, {s: {"time/step": t, "response/rewards/mean": 0.0} for s, t in step_times.items()})


def test_a_slow_run_is_stopped_when_its_median_step_time_is_decided(tmp_path):
    follower, tracker = _follower(tmp_path)
    assert follower.poll() is None  # nothing logged yet
    _log(tracker, {s: 2.0 for s in range(1, 23)})  # 22 slow steps: the other 23 could still hold the median
    assert follower.poll() is None and follower.last_step == 22
    _log(tracker, {s: 2.0 for s in range(1, 24)})
    reason = follower.poll()
    assert reason == ("fail-fast: time/step: p50 of per-step slowdown over 45 steps is at least 1.5 whatever the 22 "
                      "steps not logged yet hold, not < 1 (23 of the first 23 steps breach)")
    stop = follower.stop()
    assert (stop.stop_step, stop.first_breach_step) == (23, 1)


def test_healthy_steps_logged_so_far_push_the_decision_later(tmp_path):
    follower, tracker = _follower(tmp_path)
    times = {s: 0.5 for s in range(1, 6)} | {s: 2.0 for s in range(6, 28)}  # 5 healthy, then 22 slow
    _log(tracker, times)
    assert follower.poll() is None
    _log(tracker, times | {28: 2.0})
    assert follower.poll() is not None and follower.stop().first_breach_step == 6


def test_a_final_check_is_never_decided_early(tmp_path):
    follower, tracker = _follower(tmp_path)
    _log(tracker, {s: 0.5 for s in range(1, 45)})  # rewards 0.9 below golden at every step, the end not reached
    assert follower.poll() is None and follower.first_fail is None


REWARD_GATE = BASELINE + "  - {metric: response/rewards/mean, method: absolute, operator: \"<\", threshold: 0.5}\n"


def _replicate(tmp_path, label: str, group: ReplicateGroup) -> tuple[Follower, object]:
    case = load_case(write_yaml(tmp_path / "slow.yaml", CASE))
    baseline = load_baseline(write_yaml(tmp_path / "b.yaml", REWARD_GATE))
    work = tmp_path / label
    tracker = work / "20261202000000" / "logs" / "exp_tracking" / "tracker.jsonl"
    return Follower(case, baseline, golden_trace(baseline), work, fail_fast=True, group=group, label=label), tracker


def _rewards(tracker, rewards: dict[int, float]) -> None:
    write_tracker(tracker, {s: {"time/step": 0.5, "response/rewards/mean": r} for s, r in rewards.items()})


def test_replicates_decide_on_their_mean_and_stop_together(tmp_path):
    group = ReplicateGroup(["r1", "r2"])
    first, first_log = _replicate(tmp_path, "r1", group)
    second, second_log = _replicate(tmp_path, "r2", group)
    _rewards(first_log, {1: 0.2})  # 0.7 off golden 0.9: past the 0.5 gate alone
    assert first.poll() is None  # the other replicate has not logged: the mean is not known
    _rewards(second_log, {1: 0.9})
    assert second.poll() is None and first.poll() is None  # the mean, 0.55, is 0.35 off: within the gate
    _rewards(first_log, {1: 0.2, 2: 0.2})
    _rewards(second_log, {1: 0.9, 2: 0.2})
    assert first.poll() is None  # the mean at step 2 needs both: the steps both logged decide
    reason = second.poll()
    assert reason is not None and reason.startswith(
        "fail-fast: the mean of 2 replicates: response/rewards/mean at step 2: current 0.2 vs golden 0.9")
    assert first.poll() == reason  # the other replicate stops on the same decision
    assert (first.stop().first_breach_step, second.stop().stop_step) == (2, 2)


def test_an_adaptive_first_seed_decides_alone_and_lends_its_trace_to_the_mean(tmp_path):
    group = ReplicateGroup(["r1", "r2"], alone=["r1"])
    first, first_log = _replicate(tmp_path, "r1", group)
    _rewards(first_log, {1: 0.2})
    assert first.poll() is not None and group.decided is None  # its own verdict is judged first, alone
    second, second_log = _replicate(tmp_path, "r2", group)
    _rewards(second_log, {1: 0.9})
    assert second.poll() is None  # the mean with the first seed's trace, 0.55, is within
