"""Build the verdict, once: structural results, checks, status and triage from one list.

Every ending goes through :func:`judge` — a comparison of an existing log (``compare``), a
finished run, a run stopped by fail-fast, a crash, a preflight error — so the status is decided
in one place (:func:`autotest.judge.model.decide_status`) and triage runs once.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from types import MappingProxyType
from typing import Any

from autotest.errors import UsageError
from autotest.inputs.baseline import Baseline, load_baseline
from autotest.judge.checks import run_checks
from autotest.judge.metric_names import name_results, nothing_in_common
from autotest.judge.model import ERROR, FAIL, INFO, CheckResult, TriageFinding, Verdict, decide_status
from autotest.judge.step_alignment import RULE as ALIGNMENT_RULE
from autotest.judge.step_alignment import SUGGESTION as ALIGNMENT_SUGGESTION
from autotest.judge.step_alignment import Alignment, align_steps
from autotest.judge.performance import MachineContext, judge_performance
from autotest.judge.per_step_noise import mean_noise_scale
from autotest.judge.power import PowerAsk, calibration_runs, with_power
from autotest.judge.readings import hypothesis_evidence
from autotest.readers.reading import read_trace
from autotest.judge.structural import (
    RunFacts,
    not_reached_message,
    run_results,
    shape_results,
)
from autotest.judge.trace import EVAL_PREFIX, Trace
from autotest.inputs.roles import group_globs, resolve_roles
from autotest.judge.evidence import role_evidence
from autotest.judge.shadow import SHADOW, ShadowCandidate, load_shadow_candidate
from autotest.judge.spec_diff import SpecComparison
from autotest.judge.triage import triage


@dataclass(frozen=True)
class Comparison:
    """A verdict together with what it was made from (plots draw the full series)."""

    verdict: Verdict
    baseline: Baseline | None
    golden: Trace | None
    current: Trace | None
    #: (label, trace) of each replicate when ``current`` is their mean (plots draw them thinly)
    replicate_traces: tuple[tuple[str, Trace], ...] = ()


def golden_trace(baseline: Baseline) -> Trace:
    """The golden values as a Trace: from the baseline's table, or read from its reference tracker."""
    if baseline.golden_table is not None:
        table = baseline.golden_table
        roles = baseline.role_map  # eval points are the eval role's steps, whatever the framework calls them
        is_eval = {m: roles.group_of(m) == "eval" or m.startswith(EVAL_PREFIX) for m in table}
        train = sorted({s for m, v in table.items() if not is_eval[m] for s in v})
        evals = sorted({s for m, v in table.items() if is_eval[m] for s in v})
        return Trace(source=f"{baseline.path} (golden table)", series=MappingProxyType(dict(table)),
                     train_steps=tuple(train), eval_steps=tuple(evals), format="table")
    assert baseline.golden_tracker is not None
    if not baseline.golden_tracker.exists():
        raise UsageError(f"{baseline.path}: golden.tracker: {baseline.golden_tracker} does not exist; "
                         "check the share root (e.g. CI_SHARE_BASELINE)")
    verify_golden_pin(baseline)
    trace = read_trace(baseline.golden_tracker, baseline.golden_format, dict(baseline.metric_aliases),
                       metrics=checked_metrics(baseline))
    pinned = baseline.golden_tracker_steps
    if pinned is not None and len(trace.train_steps) != pinned:
        raise UsageError(f"{baseline.path}: golden.tracker_steps: golden tracker changed since the baseline was "
                         f"reviewed: {baseline.golden_tracker} has {len(trace.train_steps)} training steps, "
                         f"the baseline says {pinned}; restore the reviewed file or re-review and update the pin")
    return trace


def verify_golden_pin(baseline: Baseline) -> None:
    """The golden tracker's bytes must be the reviewed ones (``golden.tracker_sha256``), else one UsageError."""
    if baseline.golden_tracker is None or baseline.golden_tracker_sha256 is None:
        return
    digest = hashlib.sha256()
    with open(baseline.golden_tracker, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    actual = digest.hexdigest()
    if actual != baseline.golden_tracker_sha256:
        raise UsageError(f"{baseline.path}: golden.tracker_sha256: golden tracker changed since the baseline was "
                         f"reviewed: {baseline.golden_tracker} has sha256 {actual}, the baseline pins "
                         f"{baseline.golden_tracker_sha256}; restore the reviewed file or re-review and update the pin")


#: what a comparison reads beside the checked metrics: the data composition (the ``data composition`` reading)
READ_ALSO = group_globs("data")


def checked_metrics(baseline: Baseline) -> set[str]:
    return {c.metric for c in baseline.checks}


def _not_reached(results: list[CheckResult], facts: RunFacts) -> list[CheckResult]:
    """After a fail-fast stop, what the shortened run could not decide is 'not reached', not ERROR."""
    stop = facts.fail_fast
    if stop is None or not any(r.is_gate and r.status == FAIL for r in results):
        return results
    message = not_reached_message(stop)
    return [replace(r, status=INFO, message=f"{message} ({r.message})") if r.is_gate and r.status == ERROR else r
            for r in results]


def judge(baseline: Baseline | None, current: Trace | None, *, golden: Trace | None = None,
          facts: RunFacts | None = None, case: str | None = None, wall_time_s: float | None = None,
          context: dict[str, Any] | None = None, structural: Sequence[CheckResult] = (),
          power: PowerAsk = PowerAsk(), machine: MachineContext | None = None,
          candidate: ShadowCandidate | None = None) -> Comparison:
    """The one verdict for ``current`` against ``baseline`` given how the run went (``facts``).

    ``baseline`` may be None only when ``facts`` carries the preflight problem that explains it.
    ``structural`` results made by the caller (each replicate's run, for a replicate mean) come first.
    ``power``: how many replicates the verdict judges and what the case must detect (each gate's MDE).
    ``machine``: the case's performance policy and the run's contention record; performance gates are then judged
    against the machine (:mod:`autotest.judge.performance`), accuracy gates never are.
    ``candidate``: a recalibrated baseline in shadow beside this one
    (:func:`autotest.judge.shadow.load_shadow_candidate`), its checks judged as ``candidate@<hash>:`` shadow
    gates.
    """
    results: list[CheckResult] = list(structural)
    checked = baseline is not None and current is not None and not (facts and facts.preflight_problems)
    alignment = None
    if checked:
        if golden is None:
            golden = golden_trace(baseline)
        if baseline.metric_aliases:
            current = current.with_aliases(dict(baseline.metric_aliases))
        # a logging change (steps shifted, counted in micro-steps) is one finding, not a cascade of ERRORs
        alignment = align_steps(golden, current, sorted(checked_metrics(baseline)))
        current = alignment.trace
    results += run_results(facts, current) if facts is not None else []
    if alignment is not None and alignment.finding is not None:
        results.append(alignment.finding)
    if checked:
        if wall_time_s is None and facts is not None:
            wall_time_s = facts.wall_s
        results += name_results(baseline, current, golden)  # first: a log of other names explains what follows
        if not nothing_in_common(baseline, current):
            results += shape_results(baseline, current, wall_time_s)
            results += run_checks(baseline, golden, current, baseline.golden_table is not None)
            if candidate is not None:
                results += _candidate_results(candidate, current)
            if machine is not None:
                results = judge_performance(results, baseline, golden, current, machine)
        results = with_power(results, baseline, power)
    if facts is not None:
        results = _not_reached(results, facts)
    frozen = tuple(results)
    roles = baseline.role_map if baseline is not None else resolve_roles({r.metric for r in frozen if r.metric})
    measured = hypothesis_evidence(baseline, golden, current, frozen, roles,
                                   mean_noise_scale(power.replicates, calibration_runs(power.calibrated or baseline))
                                   ) if checked else ()
    verdict = Verdict(
        status=decide_status(frozen),
        case=case or (baseline.name if baseline is not None else "?"),
        results=frozen,
        triage=_with_alignment(triage(frozen, current, roles, measured), alignment),
        evidence=role_evidence(frozen, roles),
        measured=measured,
        roles_note=roles.describe(),
        metric_roles={m: role for m in sorted({r.metric for r in frozen if r.metric})
                      if (role := roles.role_of(m)) is not None},
        current_source=current.source if current is not None else "",
        baseline_source=golden.source if golden is not None else "",
        baseline_file=str(baseline.path) if baseline is not None else "",
        warnings=tuple(golden.warnings if golden is not None else ()) + tuple(current.warnings if current else ()),
        context=dict(context or {}),
    )
    return Comparison(verdict, baseline, golden, current)


def _candidate_results(candidate: ShadowCandidate, current: Trace) -> list[CheckResult]:
    """The shadow candidate's checks on the same run, each against the candidate's own golden values."""
    try:
        if candidate.baseline is None:
            raise UsageError(candidate.problem)
        golden = golden_trace(candidate.baseline)
    except UsageError as exc:
        return [CheckResult(candidate.check_id("baseline"), ERROR, f"the shadow candidate could not be judged: {exc}",
                            kind="structural", severity=SHADOW)]
    return [replace(r, check_id=candidate.check_id(r.check_id))
            for r in run_checks(candidate.baseline, golden, current, candidate.baseline.golden_table is not None)]


def _with_alignment(findings: Sequence[TriageFinding], alignment: Alignment | None) -> tuple[TriageFinding, ...]:
    """A step-accounting finding explains the verdict first; the breach-pattern rules follow as alternatives."""
    if alignment is None or alignment.finding is None:
        return tuple(findings)
    first = TriageFinding(ALIGNMENT_RULE, ALIGNMENT_SUGGESTION, alignment.finding.message, primary=True)
    return (first, *(replace(f, primary=False, rank=f.rank + 1, why_ranked=f.why_ranked or
                             "the step accounting explains the verdict first") for f in findings))


def with_framework_spec(comparison: Comparison, note: SpecComparison | None) -> Comparison:
    """``comparison`` whose verdict records the framework's own spec against the baseline (None: left as it is)."""
    if note is None:
        return comparison
    return replace(comparison, verdict=replace(comparison.verdict, framework_spec=note))


def compare(baseline: Baseline, current: Trace, *, case: str | None = None, wall_time_s: float | None = None,
            context: dict[str, Any] | None = None, golden: Trace | None = None) -> Comparison:
    """An existing log against a baseline (no run facts): ``rl-autotest compare``."""
    return judge(baseline, current, golden=golden, case=case, wall_time_s=wall_time_s, context=context)


def compare_paths(baseline_path: str | Path, current_path: str | Path, *, fmt: str = "auto",
                  case: str | None = None, wall_time_s: float | None = None,
                  context: dict[str, Any] | None = None) -> Comparison:
    """Load the baseline and the current run's tracker (a file or a work dir) and compare them (and the baseline's
    shadow candidate beside it, when there is one)."""
    baseline = load_baseline(baseline_path)
    candidate = load_shadow_candidate(Path(baseline_path))
    metrics = checked_metrics(baseline) | (checked_metrics(candidate.baseline) if candidate and candidate.baseline
                                           else set())
    current = read_trace(current_path, fmt, dict(baseline.metric_aliases), metrics=metrics, also=READ_ALSO)
    return judge(baseline, current, case=case, wall_time_s=wall_time_s, context=context, candidate=candidate)
