"""Performance gates judged against the machine the run ran on, not only the golden.

A timing gate (a check on a ``step_time`` or ``throughput`` metric) is judged twice: on the logged values, and on
the values the run would have had on a quiet machine of the calibration's speed. The second is the step time less
the time the run's threads waited for a CPU during that step (the run delay the contention sampler measured,
:mod:`autotest.run.contention`), divided by the machine-speed ratio of the probe (this machine's kernel CPU time over
the calibration machine's, where the baseline recorded one). Then:

| logged values | adjusted values | contention over the case's budget | gate |
|---|---|---|---|
| pass | pass | either | PASS |
| either | fail | either | FAIL: a slowdown the machine does not explain |
| fail | pass | no | PASS, saying what was removed |
| fail | pass | yes | ERROR, cause ``environment``: retry on a quiet runner (exit 75) |
| fail | not measurable | yes | ERROR, cause ``environment`` |
| fail | not measurable | no | FAIL |

Accuracy gates are never touched. A case's ``performance.blocking: false`` makes its performance gates
non-blocking: judged and recorded, never deciding the run. Pure logic: the measurements come in a
:class:`~autotest.run.contention.ContentionRecord`.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any

from autotest.inputs.baseline import Baseline
from autotest.inputs.baseline_model import GATING
from autotest.inputs.performance_policy import ContentionBudget, PerformancePolicy
from autotest.inputs.roles import group_of
from autotest.judge.checks import evaluate_check
from autotest.judge.model import ENVIRONMENT, ERROR, FAIL, PASS, CheckResult
from autotest.judge.trace import Trace
from autotest.run.contention import ContentionRecord, Sample, summarise

#: a step's wait for a CPU is never taken as more than this share of its logged time (what is left is its work)
MAX_REMOVED_SHARE = 0.95
RETRY_HINT = "retry on a quiet runner (exit 75: an environment outcome, never merged on)"


@dataclass(frozen=True)
class MachineContext:
    """What the performance gates are judged with: the case's policy and what the run measured."""

    policy: PerformancePolicy = field(default_factory=PerformancePolicy)
    record: ContentionRecord | None = None
    #: the calibration machine's probe (baseline provenance ``machine_probe``), None where it recorded none
    reference_probe: Mapping[str, Any] | None = None


# ---------------------------------------------------------------- the measurements


@dataclass(frozen=True)
class Contention:
    """The run's contention against the case's budget: the figures, and each one over budget."""

    figures: dict[str, Any]
    over: tuple[str, ...]

    @property
    def over_budget(self) -> bool:
        return bool(self.over)

    def describe(self) -> str:
        shown = []
        during = self.figures.get("during") or {}
        if during.get("run_delay_share") is not None:
            shown.append(f"the run waited for a CPU {during['run_delay_share']:.0%} of its runnable time")
        if during.get("load_per_core_mean") is not None:
            shown.append(f"load {during['load_per_core_mean']:.2g} per core")
        if during.get("others_cpu_share_mean") is not None:
            shown.append(f"other processes used {during['others_cpu_share_mean']:.0%} of the CPUs")
        text = ", ".join(shown) or "no contention measured"
        return text + (f"; over budget: {'; '.join(self.over)}" if self.over else "")


def assess(record: ContentionRecord | None, budget: ContentionBudget) -> Contention:
    """What the run saw, and which of the budget's limits it exceeded."""
    if record is None:
        return Contention({}, ())
    during = summarise(record.samples) if not record.unmeasured else {}
    over = []
    share = during.get("run_delay_share")
    if share is not None and share > budget.run_delay_share:
        over.append(f"run delay {share:.0%} of runnable time > {budget.run_delay_share:.0%}")
    for when, snap in (("before", record.before), ("after", record.after)):
        steal = snap.get("steal_share")
        if steal is not None and steal > budget.steal_share:
            over.append(f"CPU steal {steal:.0%} {when} the run > {budget.steal_share:.0%}")
        probe = snap.get("probe") or {}
        if probe.get("wall_s") and probe.get("cpu_s"):
            ratio = probe["wall_s"] / probe["cpu_s"]
            if ratio > budget.probe_wait_ratio:
                over.append(f"the probe took {ratio:.2g} x its CPU time {when} the run > {budget.probe_wait_ratio:g}")
        gpu = snap.get("gpu") or {}
        others = gpu.get("other_processes") or []
        if len(others) > budget.gpu_other_processes:
            memory = sum(a.get("memory_mib") or 0 for a in others)
            over.append(f"{len(others)} other process(es) on the case's GPUs {when} the run ({memory:.0f} MiB)")
        throttled = sorted({r for g in gpu.get("gpus", []) for r in g.get("slowing_throttle_reasons", [])})
        if budget.gpu_throttle and throttled:
            over.append(f"GPU throttled ({', '.join(throttled)}) {when} the run")
    return Contention({"during": during, "unmeasured": record.unmeasured}, tuple(over))


def speed_ratio(record: ContentionRecord | None, reference: Mapping[str, Any] | None) -> float | None:
    """This machine's probe CPU time over the calibration machine's (>1: a slower machine); None if unknown."""
    if record is None or not reference or not reference.get("cpu_s"):
        return None
    mine = [s.get("probe", {}).get("cpu_s") for s in (record.before, record.after)]
    mine = [m for m in mine if m]
    if not mine or (record.before.get("probe") or {}).get("device") != reference.get("device", "cpu"):
        return None
    return min(mine) / reference["cpu_s"]


def _cumulative(samples: Sequence[Sample], t: float) -> tuple[float, float]:
    """(cpu_s, delay_s) at time ``t``, linear between samples, clamped to the sampled span."""
    times = [s.t for s in samples]
    i = bisect.bisect_left(times, t)
    if i <= 0:
        return samples[0].cpu_s, samples[0].delay_s
    if i >= len(samples):
        return samples[-1].cpu_s, samples[-1].delay_s
    a, b = samples[i - 1], samples[i]
    w = (t - a.t) / (b.t - a.t) if b.t > a.t else 1.0
    return a.cpu_s + w * (b.cpu_s - a.cpu_s), a.delay_s + w * (b.delay_s - a.delay_s)


def waited_per_step(step_times: Mapping[int, float], seen_at: Mapping[int, float],
                    samples: Sequence[Sample]) -> dict[int, float]:
    """Per step, the wall seconds the run lost waiting for a CPU while the step ran.

    Steps first seen in the log at the same instant form a batch that ran during the ``sum of their step times``
    before it; over that span the threads' run delay divided by the run's parallelism (runnable thread-seconds per
    wall second, at least 1) is the wall time lost, shared among the batch's steps by their step time.
    """
    if len(samples) < 2:
        return {}
    batches: dict[float, list[int]] = {}
    for step in sorted(seen_at):
        if step in step_times and math.isfinite(step_times[step]) and step_times[step] > 0:
            batches.setdefault(seen_at[step], []).append(step)
    lost: dict[int, float] = {}
    for end, steps in batches.items():
        span = sum(step_times[s] for s in steps)
        start = end - span
        if end <= samples[0].t or start >= samples[-1].t:
            continue  # not sampled: nothing removed
        cpu0, delay0 = _cumulative(samples, start)
        cpu1, delay1 = _cumulative(samples, end)
        delay, runnable = delay1 - delay0, (cpu1 - cpu0) + (delay1 - delay0)
        parallelism = max(1.0, runnable / span)
        for s in steps:
            lost[s] = min(MAX_REMOVED_SHARE * step_times[s], delay / parallelism * step_times[s] / span)
    return lost


def adjusted_trace(trace: Trace, metrics: Sequence[str], record: ContentionRecord | None,
                   speed: float | None) -> tuple[Trace, dict[str, float]] | None:
    """``trace`` with each step-time metric of ``metrics`` less its wait for a CPU and divided by ``speed``;
    None when nothing can be adjusted. Also returns the mean seconds removed per step, per metric."""
    removed: dict[str, float] = {}
    series = dict(trace.series)
    for metric in metrics:
        values = trace.get(metric)
        if values is None:
            continue
        waited = waited_per_step(values, record.step_seen_at, record.samples) if record is not None else {}
        if not waited and speed is None:
            continue
        series[metric] = MappingProxyType({s: (v - waited.get(s, 0.0)) / (speed or 1.0) for s, v in values.items()})
        removed[metric] = sum(waited.values()) / len(values) if values else 0.0
    if not removed:
        return None
    return replace(trace, series=MappingProxyType(series)), removed


# ---------------------------------------------------------------- the gates


def is_performance(result: CheckResult, baseline: Baseline) -> bool:
    return result.kind == "metric" and result.metric is not None and \
        group_of(baseline.role_map.role_of(result.metric)) == "performance"


def judge_performance(results: Sequence[CheckResult], baseline: Baseline, golden: Trace, current: Trace,
                      machine: MachineContext) -> list[CheckResult]:
    """``results`` with every performance gate decided against the machine (the table in the module docstring)."""
    gates = [r for r in results if is_performance(r, baseline) and r.severity in GATING]
    if not gates:
        return list(results)
    policy = machine.policy
    contention = assess(machine.record, policy.budget)
    speed = speed_ratio(machine.record, machine.reference_probe) if policy.normalise == "contention" else None
    timed = sorted({r.metric for r in gates if baseline.role_map.role_of(r.metric) == "step_time"})
    adjusted = adjusted_trace(current, timed, machine.record, speed) if policy.normalise == "contention" else None
    specs = {s.check_id: s for s in baseline.checks}
    decided = {}
    for r in gates:
        again = None
        if adjusted is not None and r.metric in adjusted[1] and r.check_id in specs:
            again = evaluate_check(specs[r.check_id], baseline, golden, adjusted[0], baseline.golden_table is not None)
        decided[r.check_id] = _decide(r, again, contention, adjusted[1].get(r.metric) if adjusted else None, speed)
    out = []
    for r in results:
        r = decided.get(r.check_id, r) if r in gates else r
        if is_performance(r, baseline) and not policy.blocking:
            r = replace(r, blocking=False, message=f"{r.message} [non-blocking: performance.blocking is false]")
        out.append(r)
    return out


def _decide(raw: CheckResult, adjusted: CheckResult | None, contention: Contention, removed_s: float | None,
            speed: float | None) -> CheckResult:
    figures = {"contention": contention.describe(), "over_budget": list(contention.over),
               "removed_wait_s_per_step": None if removed_s is None else round(removed_s, 4),
               "speed_ratio": None if speed is None else round(speed, 3),
               "raw_observed": raw.observed, "adjusted_observed": adjusted.observed if adjusted else None}
    parameters = {**raw.parameters, "machine": figures}
    how = _how(removed_s, speed)
    if raw.status not in (PASS, FAIL) or (adjusted is not None and adjusted.status not in (PASS, FAIL)):
        return replace(raw, parameters=parameters)
    if adjusted is not None and adjusted.status == FAIL:
        message = raw.message if raw.status == FAIL else f"{adjusted.message} ({how}; as logged it passed)"
        if raw.status == FAIL:
            message += f"; {how} it still fails: {adjusted.message}"
        return replace(adjusted if raw.status == PASS else raw, message=message, parameters=parameters)
    if raw.status == PASS:
        return replace(raw, parameters=parameters)
    if adjusted is not None and not contention.over_budget:
        return replace(adjusted, message=f"{adjusted.message} ({how}; as logged: {raw.message})",
                       parameters=parameters)
    if contention.over_budget:
        cleared = f"; {how} it passes: {adjusted.message}" if adjusted is not None else \
            "; the contention could not be removed from the step times (not measured per step)"
        return replace(raw, status=ERROR, cause=ENVIRONMENT, parameters=parameters,
                       message=f"environment: {raw.message}, on a busy runner ({contention.describe()}){cleared}; "
                               f"{RETRY_HINT}")
    return replace(raw, parameters=parameters)


def _how(removed_s: float | None, speed: float | None) -> str:
    parts = []
    if removed_s is not None:
        parts.append(f"with the {removed_s:.3g} s per step the run waited for a CPU removed")
    if speed is not None and abs(speed - 1) > 0.005:
        parts.append(f"scaled by the machine probe ({speed:.2f} x the calibration machine's time)")
    return " and ".join(parts) or "adjusted"
