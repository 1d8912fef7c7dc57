"""Judge a run while its tracker grows: progress lines, and fail-fast on what a prefix can decide.

Only what a prefix of the run can decide is evaluated early: stepwise and points checks (a breach at a
step already logged stays a breach), non-finite values, a percentile check once so many logged steps
breach that the steps still to come cannot bring it back, window and pooled checks once their window's last step
is logged, and, with ``fail_fast``, a pooled mean gate at its early looks (its false-alarm budget spent over them:
:mod:`autotest.judge.step_looks`). Final and slope checks wait for the end. Which is which is each check kind's
(``decide_early`` in :mod:`autotest.scopes`). With ``fail_fast`` a decided FAIL stops the run; the verdict says at
which step and share of the run's steps it was decided (:class:`autotest.judge.structural.FailFastStop`).

Replicates are judged on their mean, so their followers share a :class:`ReplicateGroup` and decide on the
mean of every replicate at the steps all of them logged, by the baseline the end judges the mean with (pooled
thresholds scaled for it, :func:`autotest.judge.replicate_mean.for_the_mean`): one replicate past a per-step
threshold alone can sit within it on the mean, and stopping on it would multiply the gate's false alarms by the
replicates.

The launcher calls :meth:`Follower.poll` often (every 0.1 s); a poll costs one ``stat`` of the
tracker unless the file grew, so the follower reacts within one logged step.
"""

from __future__ import annotations

import math
import os
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Callable, Mapping

from autotest.errors import UsageError
from autotest.inputs.baseline import Baseline
from autotest.inputs.case import Case
from autotest.inputs.log_search import log_signature
from autotest.inputs.tracker_layout import tracker_location
from autotest.judge.checks import decide_early, fmt
from autotest.judge.model import FAIL
from autotest.judge.performance import adjusted_trace
from autotest.readers.reading import find_tracker, read_trace
from autotest.judge.replicate_mean import for_the_mean, mean_trace
from autotest.judge.structural import FailFastStop
from autotest.judge.trace import Trace
from autotest.inputs.roles import group_of
from autotest.run.contention import ContentionRecord, ContentionSampler


class ReplicateGroup:
    """The followers of one case's replicates (threads of one harness): each hands over its latest trace, a
    FAIL is decided on their mean, and once one is decided every replicate stops.

    ``alone``: replicates whose own verdict is judged first, by themselves (an adaptive run's first seed): they
    decide on their own trace and only lend it to the mean of the later look."""

    def __init__(self, labels: Sequence[str], alone: Sequence[str] = ()) -> None:
        self.labels = tuple(labels)
        self.alone = frozenset(alone)
        self._traces: dict[str, Trace] = {}
        self._lock = threading.Lock()
        #: (message, first breached step) of the FAIL decided on the mean; None until one is
        self.decided: tuple[str, int | None] | None = None

    def mean(self, label: str, trace: Trace, baseline: Baseline) -> Trace | None:
        """The mean of every replicate's latest trace once ``label`` logged ``trace``; None until all have
        logged (a replicate that has not started holds the decision back)."""
        with self._lock:
            self._traces[label] = trace
            if set(self._traces) != set(self.labels):
                return None
            traces = [self._traces[name] for name in self.labels]
        return mean_trace(traces, self.labels, baseline.role_map)

    def decide(self, decided: tuple[str, int | None]) -> tuple[str, int | None]:
        """Record a FAIL decided on the mean (the first one stands) and return the one that stands."""
        with self._lock:
            if self.decided is None:
                message, first_breach = decided
                self.decided = (f"the mean of {len(self.labels)} replicates: {message}", first_breach)
            return self.decided


class Follower:
    """The launcher's poll callback: returns a stop reason when fail-fast decides a FAIL."""

    def __init__(self, case: Case, baseline: Baseline, golden: Trace, work_dir: Path, *, fail_fast: bool = False,
                 progress: Callable[[str], None] | None = None, clock: Callable[[], float] = time.monotonic,
                 environ: Mapping[str, str] | None = None, group: ReplicateGroup | None = None,
                 label: str = "", contention: ContentionSampler | None = None) -> None:
        self.case = case
        #: the run's contention sampler: performance gates decide early on the step times less the run's wait for
        #: a CPU (autotest.judge.performance), so a busy runner never stops a clean run
        self.contention = contention
        #: step -> clock() when its row was first seen (the contention record maps waits to steps with it)
        self.step_seen_at: dict[int, float] = {}
        #: the replicates this run is one of (decisions on their mean), and its label among them
        self.group = group
        self.label = label
        #: the run's environment: ${XTUNER_ROOT} in the tracker location may name a checkout made for this run
        self.environ = os.environ if environ is None else environ
        self.baseline = baseline
        self.golden = golden
        self.work_dir = Path(work_dir)
        self.fail_fast = fail_fast
        self.progress = progress
        self.clock = clock
        self.started = clock()
        self.last_step: int | None = None
        self.first_fail: str | None = None
        self.first_fail_at: float | None = None
        self.first_breach_step: int | None = None
        self.fail_decided_step: int | None = None
        self._seen: tuple | None = None  # the log's signature (path, size, mtime_ns) when last read

    def _grown_trace(self) -> Trace | None:
        """The trace when the tracker changed since the last poll, else None (one stat per poll)."""
        folder, explicit = tracker_location(self.case, self.work_dir, self.environ)
        try:
            path = explicit if explicit is not None else find_tracker(folder, self.case.tracker.format)
            seen = log_signature(path)  # a TensorBoard log is a folder: its event files' sizes
        except (UsageError, OSError):
            return None  # not written yet
        if seen == self._seen:
            return None
        try:
            trace = read_trace(path, self.case.tracker.format, dict(self.baseline.metric_aliases),
                               metrics={c.metric for c in self.baseline.checks})
        except UsageError:
            return None  # a line mid-write: read again at the next poll
        self._seen = seen
        return trace

    def decided_failure(self, trace: Trace, baseline: Baseline | None = None) -> tuple[str, int | None] | None:
        """The first gate check a prefix of the run already fails: (one line, its first breached step).
        ``baseline``: the one to judge by (the replicates' mean is judged as the end judges it: pooled thresholds
        scaled for the mean); by default the run's."""
        baseline = baseline or self.baseline
        is_table = baseline.golden_table is not None
        timed = self._machine_adjusted(trace)
        for spec in baseline.checks:
            if spec.severity != "gate":
                continue
            performance = group_of(baseline.role_map.role_of(spec.metric)) == "performance"
            if performance and not self.case.performance.blocking:
                continue  # a non-blocking gate never stops a run
            if performance and timed is not None:
                trace_for = timed
            else:
                trace_for = trace
            series = trace_for.get(spec.metric)
            if series is None:
                continue
            nonfinite = next((s for s, v in series.items() if not math.isfinite(v)), None)
            if nonfinite is not None:
                return f"{spec.metric} is non-finite ({fmt(series[nonfinite])}) at step {nonfinite}", nonfinite
            result = decide_early(spec, baseline, self.golden, trace_for, is_table)
            if result is not None and result.status == FAIL:
                return result.message, result.first_breach_step
        return None

    def note_last_steps(self) -> None:
        """After the run: the steps logged since the last poll are seen now (the run has just ended)."""
        trace = self._grown_trace()
        now = self.clock()
        for seen in trace.train_steps if trace is not None else ():
            self.step_seen_at.setdefault(seen, now)

    def _machine_adjusted(self, trace: Trace) -> Trace | None:
        """The trace with its step times less the run's wait for a CPU so far (None: no sampler, or raw)."""
        if self.contention is None or self.case.performance.normalise == "raw":
            return None
        record = ContentionRecord(samples=self.contention.samples(), step_seen_at=dict(self.step_seen_at))
        timed = [c.metric for c in self.baseline.checks if self.baseline.role_map.role_of(c.metric) == "step_time"]
        adjusted = adjusted_trace(trace, timed, record, None)
        # a step time not yet adjustable (the wait not sampled yet) decides nothing early: the end judges it
        return adjusted[0] if adjusted is not None else trace

    def _progress_line(self, trace: Trace, step: int) -> str:
        total = self.case.expected.steps
        elapsed = self.clock() - self.started
        eta = elapsed / step * (total - step) if step > 0 else math.nan
        eta_text = f"ETA {eta:.0f}s" if math.isfinite(eta) else "ETA ?"
        latest = live_values(self.baseline, self.golden, trace, step)
        return f"[{self.case.name}] step {step}/{total} {elapsed:.0f}s {eta_text} {latest}".rstrip()

    def poll(self) -> str | None:
        trace = self._grown_trace()
        if trace is not None and trace.train_steps:
            self._observe(trace)
        if (self.first_fail is None and self.group is not None and self.group.decided is not None
                and self.label not in self.group.alone):
            self._decide(self.group.decided)  # decided on the mean after another replicate's step
        if self.fail_fast and self.first_fail:
            return f"fail-fast: {self.first_fail}"
        return None

    def _observe(self, trace: Trace) -> None:
        now = self.clock()
        for seen in trace.train_steps:
            self.step_seen_at.setdefault(seen, now)
        step = trace.train_steps[-1]
        if step != self.last_step:
            self.last_step = step
            if self.progress:
                self.progress(self._progress_line(trace, step))
        if self.first_fail is not None:
            return
        mean = self.group.mean(self.label, trace, self.baseline) if self.group is not None else None
        if self.group is None or self.label in self.group.alone:
            decided = self.decided_failure(trace)
        else:
            scaled = for_the_mean(self.baseline, len(self.group.labels))[0]
            decided = self.decided_failure(mean, scaled) if mean is not None and mean.train_steps else None
            decided = self.group.decide(decided) if decided else None
        if decided:
            self._decide(decided)

    def _decide(self, decided: tuple[str, int | None]) -> None:
        self.first_fail, self.first_breach_step = decided
        self.first_fail_at = self.clock()
        self.fail_decided_step = self.last_step
        if self.progress:
            where = self.decided().where()  # type: ignore[union-attr]
            self.progress(f"[{self.case.name}] FAIL decided at {where}: {self.first_fail}")

    def decided(self) -> FailFastStop | None:
        """The decided FAIL (step, share of the run, reason), None until one is."""
        if self.first_fail is None:
            return None
        return FailFastStop(self.fail_decided_step, self.first_breach_step, self.first_fail, self.case.expected.steps)

    def stop(self) -> FailFastStop | None:
        """The fail-fast stop, for the judge, when this follower stopped the run."""
        return self.decided() if self.fail_fast else None

    def time_to_verdict_s(self) -> float | None:
        """Seconds from the start of following to the first decided FAIL (None if none was decided early)."""
        if self.first_fail_at is None:
            return None
        return round(self.first_fail_at - self.started, 2)


#: the roles the live line shows first (one metric each), in this order; the rest follow, time last
LIVE_ROLE_ORDER = ("reward", "eval", "mismatch", "distill_kl", "response_length", "entropy")
LIVE_ITEMS = 4


def live_values(baseline: Baseline, golden: Trace, trace: Trace, step: int) -> str:
    """``role=value (golden g)`` for the checked metrics logged at ``step``: one per role, by role priority.

    A metric without a role is shown by its name after the roles; time roles (step_time, throughput) and memory last.
    """
    roles = baseline.role_map
    chosen: dict[str, str] = {}  # label -> metric, first check of each role wins (gates before references)
    for spec in sorted(baseline.checks, key=lambda c: c.severity != "gate"):
        role = roles.role_of(spec.metric)
        if step in (trace.get(spec.metric) or {}):
            chosen.setdefault(role or spec.metric, spec.metric)

    def rank(label: str) -> tuple[int, str]:
        base = label.split("/", 1)[0] if roles.role_of(chosen[label]) else ""
        if base in LIVE_ROLE_ORDER:
            return LIVE_ROLE_ORDER.index(base), label
        last = base in ("step_time", "throughput", "memory")
        return (len(LIVE_ROLE_ORDER) + (2 if last else 0 if base else 1)), label

    items = []
    for label in sorted(chosen, key=rank)[:LIVE_ITEMS]:
        metric = chosen[label]
        value = trace.get(metric)[step]  # type: ignore[index]
        gold = (golden.get(metric) or {}).get(step)
        versus = f" (golden {fmt(gold)})" if gold is not None else ""
        items.append(f"{label}={fmt(value)}{versus}")
    return " ".join(items)
