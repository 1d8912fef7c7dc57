"""Faults that change what the run logs or how long it runs, never the steps it trains: a metric logged in other
units and a loop that ends early (issue 30). Registered in :mod:`autotest.workloads.faults` beside the others.

| fault | effect | verdict | breached | triage |
|---|---|---|---|---|
| ``log-scale[:METRIC:FACTOR]`` | METRIC (``response/response_len/mean``) is logged x FACTOR (2); training unchanged | FAIL | response length | logging-units |
| ``fewer-steps[:N]`` | the training loop ends N (1) steps early and the run exits 0; the steps it did are the clean run's | ERROR | - | run-shape |
| ``log-previous[:METRIC]`` | METRIC (``response/response_len/mean``) is logged from the previous step; training unchanged | FAIL | resume: response length | resume-logging |
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from autotest.errors import UsageError
from autotest.workloads.fault_hooks import FaultHooks

LENGTH = "response/response_len/mean"


class LogScale(FaultHooks):
    """METRIC is written to the metric log multiplied by FACTOR (a unit or reduction change in the logger: a sum
    logged as a mean, tokens counted twice); what the run trains, and every other metric, is unchanged."""

    name = "log-scale"
    arg_help = f"METRIC:FACTOR, the logged metric and its factor (default {LENGTH}:2)"
    default_arg = f"{LENGTH}:2"
    expected = {"verdict": "FAIL", "breached": [LENGTH], "triage": "logging-units",
                "measured": "seed 0: response_len/mean exactly 2 x the clean run's at every step; every other metric "
                "bitwise the clean run's"}

    def metric_and_factor(self) -> tuple[str, float]:
        metric, _, factor = (self.arg or "").rpartition(":")
        try:
            value = float(factor)
        except ValueError:
            value = math.nan
        if not metric or not math.isfinite(value) or value in (0.0, 1.0):
            raise UsageError(f"--fault {self.name}: needs METRIC:FACTOR with a finite factor other than 0 and 1 "
                             f"(got {self.arg!r})")
        return metric, value

    def magnitude(self) -> float:
        return self.metric_and_factor()[1]

    def wrap_tracker(self, tracker: Any) -> Any:
        return _ScalingTracker(tracker, *self.metric_and_factor())


class _ScalingTracker:
    """Writes every row through, with one metric multiplied by a factor."""

    def __init__(self, inner: Any, metric: str, factor: float) -> None:
        self.inner = inner
        self.metric = metric
        self.factor = factor

    def write(self, row: Mapping[str, Any]) -> None:
        if isinstance(row.get(self.metric), (int, float)):
            row = {**row, self.metric: row[self.metric] * self.factor}
        self.inner.write(row)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


class FewerSteps(FaultHooks):
    """The training loop ends N steps before the configured count (an off-by-one in its range, a schedule that
    counts steps from another total) and the run exits 0: the steps it did are the clean run's, the LR schedule
    still spans the configured steps, and the last eval is the last periodic one."""

    name = "fewer-steps"
    arg_help = "N, the steps the loop leaves out at its end (default 1)"
    default_arg = "1"
    expected = {"verdict": "ERROR", "breached": [], "triage": "run-shape",
                "measured": "seed 0, N 1: 44 steps, bitwise the clean run's; exit 0; no eval at step 45"}

    def magnitude(self) -> float:
        return float(self.int_arg())

    def loop_end(self, last_step: int) -> int:
        if self.int_arg() >= last_step:
            raise UsageError(f"--fault {self.name}: leaves out {self.int_arg()} of {last_step} steps; "
                             "at least one must run")
        return last_step - self.int_arg()


class LogPrevious(FaultHooks):
    """METRIC is written from the previous step: the logger keeps the value it was handed and writes the one it kept
    before (a stale cache, a value read before the step filled it), the first step's as it is. What the run trains,
    and every other metric, is unchanged; a resumed process starts with an empty cache, so its first step writes its
    own value where the uninterrupted run wrote the step before's."""

    name = "log-previous"
    arg_help = f"METRIC, the metric logged from the previous step (default {LENGTH})"
    default_arg = LENGTH
    expected = {"verdict": "FAIL", "breached": [LENGTH], "triage": "resume-logging",
                "measured": "seed 0 (2026-12-06, registered for the run): the golden gates pass (a step's lag is below "
                "their MDE); the resume phase fails on response_len/mean at step 21 alone (2.0332 resumed, 2.1387 "
                "uninterrupted: the step before's), the 21 other compared metrics bitwise equal at steps 21-23; "
                "triage resume-logging, primary"}

    def metric(self) -> str:
        if not self.arg:
            raise UsageError(f"--fault {self.name}: needs METRIC, the metric logged from the previous step")
        return self.arg

    def wrap_tracker(self, tracker: Any) -> Any:
        return _PreviousTracker(tracker, self.metric())


class _PreviousTracker:
    """Writes every row through, one metric replaced by the value it had in the row before that carried it."""

    def __init__(self, inner: Any, metric: str) -> None:
        self.inner = inner
        self.metric = metric
        self.kept: Any = None

    def write(self, row: Mapping[str, Any]) -> None:
        if isinstance(row.get(self.metric), (int, float)):
            value, previous = row[self.metric], self.kept
            self.kept = value
            if previous is not None:
                row = {**row, self.metric: previous}
        self.inner.write(row)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


LOG_FAULTS: tuple[type[FaultHooks], ...] = (LogScale, FewerSteps, LogPrevious)
