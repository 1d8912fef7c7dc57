"""Judge K replicate runs of a case on their mean: more power, the same calibrated false-alarm rate.

Each replicate is a normal run of the pipeline with its own folder, logs and verdict. The verdict
of the K runs together is built by the one verdict builder (:func:`autotest.judge.verdict.judge`):

- **structure per replicate**: a crash, timeout, tracker or infrastructure problem of any replicate
  is an ERROR naming it (a FAIL when a gate of its own had failed before, or fail-fast stopped it), as
  for a single run; it is left out of the mean;
- **checks on the mean trace** of the complete replicates: per step, the mean over replicates of each
  metric, at the steps every one of them logged. Time roles (``step_time``, ``throughput``) take the per-step
  *median* instead: their noise is the machine's, not the seed's, so averaging buys no power, and the
  median ignores one replicate slowed by a neighbour (for K = 2 both are the same). The end-to-end wall
  time is the median replicate's;
- **thresholds**: per-step, percentile, final, points and window checks keep theirs (max deviation x
  margin: the mean is less noisy, so they stay conservative). Pooled checks are scaled, see below.

Why a pooled threshold scales by ``sqrt((1/K + 1/N) / (1 + 1/N))`` (N = calibration runs): at step s
a run's value is x = mu_s + e with seed noise e of variance sigma_s^2, independent across seeds. The
golden value is the mean of the N calibration runs, so golden - mu_s has variance sigma_s^2 / N. One
fresh run deviates from golden with variance sigma_s^2 (1 + 1/N); the mean of K fresh runs with
sigma_s^2 (1/K + 1/N). Both pooled statistics (:mod:`autotest.scopes.pooled`: the window mean of the
standardised deviations and their fitted trend) are linear in the per-step deviations, and the K-run
mean's deviation curve has the same correlation across steps as one run's, so the statistic's spread
scales by the square root of the variance ratio. Calibration measured the spread of one run against the
N-run golden and set threshold = t-quantile x spread for the declared budget; the same quantile on the
scaled spread keeps the false-alarm rate. With N = 5: K = 2 -> 0.76, K = 3 -> 0.67, K = 4 -> 0.61 (0.41
as K grows: the golden's own noise stays). It assumes seeds outside the calibration set
(:func:`autotest.run.replicates.replicate_seeds`); an in-sample seed only makes the check more conservative.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from types import MappingProxyType
from typing import Any

from autotest.errors import UsageError
from autotest.inputs.baseline import load_baseline
from autotest.inputs.baseline_model import Baseline, for_hardware, in_shadow
from autotest.inputs.case import Case
from autotest.inputs.roles import RoleMap, resolve_roles
from autotest.inputs.tracker_layout import tracker_copy
from autotest.judge.per_step_noise import mean_noise_scale
from autotest.judge.model import (
    ERROR,
    FAIL,
    INFO,
    PASS,
    CheckResult,
    Replicate,
    Verdict,
)
from autotest.judge.power import PowerAsk, calibration_runs
from autotest.readers.reading import read_trace
from autotest.judge.resume import is_resume_result
from autotest.judge.seed_use import identical_runs
from autotest.judge.shadow import ShadowCandidate, load_shadow_candidate
from autotest.judge.trace import Trace
from autotest.judge.verdict import READ_ALSO, Comparison, checked_metrics, golden_trace, judge
from autotest.scopes import scope_kind

#: roles judged on the per-step median over replicates (machine noise, not seed noise)
MEDIAN_GROUP = "performance"
#: a replicate's structural results that make it unusable for the mean (wall time is judged on the median)
_BREAKING = ("run[", "preflight", "steps[count]", "steps[range]")


@dataclass(frozen=True)
class Member:
    """One finished replicate as the pipeline hands it over: its own verdict and its trace."""

    index: int
    seed: int
    folder: str
    verdict: Verdict | None
    trace: Trace | None

    @property
    def label(self) -> str:
        return f"r{self.index}-seed{self.seed}"


def pooled_threshold_scale(replicates: int, calibration_runs: int) -> float:
    """The factor on a pooled threshold when the mean of ``replicates`` runs is judged (module doc)."""
    return mean_noise_scale(replicates, calibration_runs)


def for_the_mean(baseline: Baseline, replicates: int) -> tuple[Baseline, float]:
    """``baseline`` with its pooled thresholds scaled for the mean of ``replicates`` runs, and the factor."""
    n = calibration_runs(baseline)
    scale = pooled_threshold_scale(replicates, n)
    if replicates == 1:
        return baseline, scale
    note = (f"; for the mean of K={replicates} replicates x sqrt((1/K + 1/N) / (1 + 1/N)) = {scale:.3f} "
            f"(N={n} calibration runs)")
    checks = tuple(replace(c, threshold=c.threshold * scale, derivation=(
        f"{c.derivation}{note}: {c.threshold:g} -> {c.threshold * scale:.3g}"))
        if scope_kind(c.scope).uses_noise else c for c in baseline.checks)
    return replace(baseline, checks=checks), scale


def mean_trace(traces: Sequence[Trace], labels: Sequence[str], roles: RoleMap | None = None) -> Trace:
    """Per step, the mean over ``traces`` of each metric (median for time roles: step_time, throughput), at the
    steps every trace logged; a metric some trace lacks is left out (its check then says it is missing).
    ``roles``: the baseline's; by default inferred from the metric names."""
    import numpy as np

    assert traces and len(traces) == len(labels)
    common = set.intersection(*(set(t.series) for t in traces))
    roles = roles if roles is not None else resolve_roles(common)
    series: dict[str, dict[int, float]] = {}
    for metric in sorted(common):
        steps = sorted(set.intersection(*(set(t.series[metric]) for t in traces)))
        values = np.array([[t.series[metric][s] for s in steps] for t in traces], dtype=float)
        reduce = np.median if roles.group_of(metric) == MEDIAN_GROUP else np.mean
        series[metric] = dict(zip(steps, reduce(values, axis=0).tolist())) if steps else {}
    non_numeric: dict[str, tuple[str, str]] = {}
    for trace in traces:
        for metric, logged_as in trace.non_numeric.items():
            non_numeric.setdefault(metric, logged_as)
    train = sorted(set.intersection(*(set(t.train_steps) for t in traces)))
    evals = sorted(set.intersection(*(set(t.eval_steps) for t in traces)))
    sources = ", ".join(t.source for t in traces)
    return Trace(source=f"mean of {len(traces)} replicates ({sources})", series=MappingProxyType(series),
                 train_steps=tuple(train), eval_steps=tuple(evals), format=traces[0].format,
                 warnings=tuple(f"{label}: {w}" for label, t in zip(labels, traces) for w in t.warnings),
                 non_numeric=MappingProxyType(non_numeric))


def _problems(verdict: Verdict | None) -> tuple[str, list[str]]:
    """(status, messages) of what makes a replicate unusable for the mean; PASS and [] when it completed."""
    if verdict is None:
        return ERROR, ["no verdict (the run did not start)"]
    broken = [r for r in verdict.results if r.kind == "structural" and r.check_id.startswith(_BREAKING)
              and r.status in (ERROR, FAIL)]
    stopped = [r for r in verdict.results if r.check_id == "run[completion]" and r.status == INFO]
    if stopped:  # fail-fast stopped it after a decided FAIL: that FAIL is the replicate's
        failing = [r.message for r in verdict.results if r.is_gate and r.status == FAIL and r.kind == "metric"]
        return FAIL, [stopped[0].message, *failing[:1]]
    if not broken:
        return PASS, []
    # as for a single run: a gate that failed before it broke off makes it a FAIL, and is named
    failing = [r.message for r in verdict.results if r.is_gate and r.status == FAIL and r.kind == "metric"]
    status = FAIL if failing or all(r.status == FAIL for r in broken) else ERROR
    return status, [r.message for r in broken] + failing[:1]


def replicate_results(members: Sequence[Member]) -> list[CheckResult]:
    """One structural result per replicate, naming it: PASS when it completed, else why not."""
    results = []
    for m in members:
        status, problems = _problems(m.verdict)
        report = f"{m.folder}/report.md"
        if status == PASS:
            last = m.trace.last_train_step if m.trace is not None else None
            message = f"replicate {m.label}: completed (last step {last}); its own verdict in {report}"
        else:
            message = f"replicate {m.label}: {'; '.join(problems)} (its logs and verdict: {report})"
        results.append(CheckResult(f"replicate[{m.label}]", status, message, kind="structural",
                                   parameters={"seed": m.seed, "folder": m.folder}))
    return results


def resume_of_replicates(members: Sequence[Member]) -> list[CheckResult]:
    """Each replicate's resume-phase results (a case with ``resume:``), named by replicate: a mean cannot resume,
    and a replicate whose resume did not continue must not pass inside the mean."""
    return [replace(r, check_id=f"{r.check_id}@{m.label}", message=f"replicate {m.label}: {r.message}")
            for m in members if m.verdict is not None for r in m.verdict.results if is_resume_result(r)]


def interrupted_result(reason: str, count: int) -> CheckResult:
    return CheckResult("replicates[interrupted]", ERROR,
                       f"run interrupted ({reason}): every replicate was stopped ({count} had finished); each "
                       "one's own verdict is in its folder under replicates/", kind="structural")


def judge_replicates(baseline: Baseline | None, golden: Trace | None, members: Sequence[Member], *,
                     case: str, context: Mapping[str, Any] | None = None,
                     interrupted: str | None = None, power: PowerAsk = PowerAsk(),
                     candidate: ShadowCandidate | None = None) -> Comparison:
    """The one verdict for the replicates' mean (see the module doc); ``candidate``: a recalibrated baseline in
    shadow beside this one, judged on the same mean with its pooled thresholds scaled alike."""
    structural = replicate_results(members)
    structural += resume_of_replicates(members)
    if interrupted is not None:
        structural.append(interrupted_result(interrupted, len(members)))
    usable = [m for m, r in zip(members, structural) if r.status == PASS and m.trace is not None]
    # copies of one run (a launch that drops {seed}) are one run: ERROR, and no K-replicate thresholds
    copies = identical_runs([(m.label, m.seed, m.trace) for m in usable if m.trace is not None])
    if copies is not None:
        structural.append(copies)
        usable = usable[:1]
    current = mean_trace([m.trace for m in usable], [m.label for m in usable],
                         baseline.role_map if baseline is not None else None) if usable else None
    scale = None
    if baseline is not None and usable:
        power = replace(power, replicates=len(usable), calibrated=baseline)
        baseline, scale = for_the_mean(baseline, len(usable))
        if candidate is not None and candidate.baseline is not None:
            candidate = replace(candidate, baseline=for_the_mean(candidate.baseline, len(usable))[0])
    walls = sorted(_wall_s(m.verdict) for m in usable if _wall_s(m.verdict) is not None)
    comparison = judge(baseline, current, golden=golden, case=case, context=dict(context or {}),
                       wall_time_s=_median(walls), structural=structural, power=power, candidate=candidate)
    averaged = {m.index for m in usable}
    replicates = tuple(Replicate(m.index, m.seed, m.folder, m.verdict.status if m.verdict else ERROR,
                                 _exit(m.verdict), _wall_s(m.verdict), m.index in averaged,
                                 _observed(m.verdict)) for m in members)
    verdict = replace(comparison.verdict, replicates=replicates, pooled_threshold_scale=scale)
    return replace(comparison, verdict=verdict,
                   replicate_traces=tuple((m.label, m.trace) for m in members if m.trace is not None))


def judge_replicate_runs(case: Case, baseline_path: Path, runs: Sequence[tuple[int, Path | None, Verdict | None]], *,
                         context: Mapping[str, Any], gpu: Mapping[str, Any] | None = None,
                         interrupted: str | None = None, power: PowerAsk = PowerAsk(),
                         adjust: Callable[[Baseline], Baseline] | None = None) -> Comparison:
    """Read each replicate's tracker from its folder and judge their mean (``runs``: seed, folder, own verdict;
    ``gpu``: the node's fingerprint, which picks per-hardware thresholds as for each replicate; ``adjust``: the
    thresholds of a look of the adaptive design, :mod:`autotest.judge.sequential`)."""
    baseline, golden = None, None
    try:
        baseline = for_hardware(load_baseline(baseline_path), gpu)
        if case.shadow:  # a case in shadow: judged and recorded, never failing the job
            baseline = in_shadow(baseline)
        if adjust is not None:
            baseline = adjust(baseline)
        golden = golden_trace(baseline)
    except UsageError:  # each replicate's own preflight result says why
        baseline = None
    candidate = load_shadow_candidate(baseline_path, gpu)  # a recalibrated baseline in shadow beside it, if any
    if candidate is not None and candidate.baseline is not None and adjust is not None:
        candidate = replace(candidate, baseline=adjust(candidate.baseline))
    extra = checked_metrics(candidate.baseline) if candidate is not None and candidate.baseline is not None else set()
    members = [Member(i + 1, seed, str(folder), verdict, _trace(case, baseline, folder, extra))
               for i, (seed, folder, verdict) in enumerate(runs)]
    return judge_replicates(baseline, golden, members, case=case.name, context=context, interrupted=interrupted,
                            power=power, candidate=candidate)


def _trace(case: Case, baseline: Baseline | None, folder: Path | None, extra: set[str] = frozenset()) -> Trace | None:
    """The trace a replicate left in its folder (None when it has none: its own verdict says why)."""
    path = tracker_copy(folder) if folder is not None else None
    if baseline is None or path is None:
        return None
    try:
        return read_trace(path, case.tracker.format, dict(baseline.metric_aliases),
                          metrics=checked_metrics(baseline) | extra, also=READ_ALSO)
    except UsageError:
        return None


def _launch(verdict: Verdict | None) -> dict[str, Any]:
    launch = verdict.context.get("launch") if verdict is not None else None
    return launch if isinstance(launch, dict) else {}


def _exit(verdict: Verdict | None) -> str:
    launch = _launch(verdict)
    if not launch:
        return "not launched"
    if launch.get("timed_out"):
        return "timed out"
    return str(launch.get("signal") or launch.get("exit_code"))


def _wall_s(verdict: Verdict | None) -> float | None:
    wall = _launch(verdict).get("wall_s")
    return float(wall) if isinstance(wall, (int, float)) else None


def _median(values: Sequence[float]) -> float | None:
    if not values:
        return None
    middle = len(values) // 2
    return values[middle] if len(values) % 2 else (values[middle - 1] + values[middle]) / 2


def _observed(verdict: Verdict | None) -> dict[str, float | None]:
    if verdict is None:
        return {}
    return {r.check_id: r.observed for r in verdict.results if r.kind == "metric"}
