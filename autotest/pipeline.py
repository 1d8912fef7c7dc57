"""Run one case end to end: platform → preflight → card → launch → artifacts → compare → report.

The pytest suites and ``rl-autotest run`` both call :func:`run_case`; neither adds logic of its own.
Everything the run produced is kept in its results folder whatever happened.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import os
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from autotest.errors import UsageError
from autotest.inputs.baseline import Baseline, load_baseline
from autotest.inputs.case import Case
from autotest.judge.model import ERROR, FAIL, PASS, CheckResult, Verdict, decide_status
from autotest.judge.triage import is_consistency_metric, triage
from autotest.judge.verdict import Comparison, compare, golden_trace

if TYPE_CHECKING:
    from autotest.run.infra import RetryPolicy

SKIP = "SKIP"
DRY_RUN = "DRY-RUN"


def _default_retry_policy() -> "RetryPolicy":
    from autotest.run.infra import DEFAULT_POLICY

    return DEFAULT_POLICY


@dataclass(frozen=True)
class RunOptions:
    results_root: Path
    seed: int | None = None
    fault: str | None = None
    dry_run: bool = False
    fail_fast: bool = False
    with_plots: bool = True
    #: extra environment for the launched command (e.g. a CUDA_VISIBLE_DEVICES slice)
    env: dict[str, str] = field(default_factory=dict)
    #: a label added to the results folder name (e.g. "calib-1")
    label: str = ""
    poll_interval_s: float = 2.0
    #: shown the experiment card before launching; returning False launches nothing
    confirm: Callable[[str], bool] | None = None
    #: submit the launch as a Ray job to this cluster instead of a local process group
    ray_address: str | None = None
    #: relaunch limits per infrastructure failure kind (an accuracy FAIL is never relaunched)
    retry_policy: "RetryPolicy" = field(default_factory=lambda: _default_retry_policy())
    #: called with one progress line while the run goes (terminal or CI log)
    progress: Callable[[str], None] | None = None


@dataclass(frozen=True)
class CaseRun:
    """The outcome of one case: a verdict, or why it was skipped / only shown."""

    case: str
    status: str  # PASS / FAIL / ERROR / SKIP / DRY-RUN
    results_dir: Path | None
    reason: str = ""
    verdict: Verdict | None = None
    card: str = ""
    command_line: str = ""
    consistency_request: Path | None = None

    @property
    def report(self) -> Path | None:
        return self.results_dir / "report.md" if self.results_dir else None

    def summary_line(self) -> str:
        where = f" (report: {self.report})" if self.verdict is not None and self.report else ""
        return f"{self.case}: {self.status}{' — ' + self.reason if self.reason else ''}{where}"


def results_dir_for(case: Case, options: RunOptions) -> Path:
    stamp = dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    parts = [stamp, f"pid{os.getpid()}"]
    if options.fault:
        parts.append(options.fault.replace(":", "_").replace("/", "_"))
    if options.label:
        parts.append(options.label)
    folder = Path(options.results_root).resolve() / case.name / "-".join(parts)
    suffix = 0
    while folder.exists():  # never overwrite an earlier run's results
        suffix += 1
        folder = folder.with_name(f"{folder.name.rsplit('~', 1)[0]}~{suffix}")
    return folder


def _structural(check_id: str, status: str, message: str, **parameters) -> CheckResult:
    return CheckResult(check_id, status, message, kind="structural", parameters=parameters)


def consistency_request(case: Case, verdict: Verdict, results_dir: Path, work_dir: Path) -> dict | None:
    """The request for a consistency dump job, or None when the case's policy says no."""
    policy = case.consistency.policy
    # a NaN is numerical divergence, not a train-inference disagreement a dump could localise
    breached = [r for r in verdict.results if is_consistency_metric(r.metric) and r.status == FAIL
                and r.observed is not None and math.isfinite(r.observed)]
    if policy == "off" or (policy == "on-breach" and not breached):
        return None
    return {
        "schema_version": 1,
        "case": case.name,
        "case_file": str(case.source),
        "policy": policy,
        "reason": "breach" if breached else "always",
        "breaches": [{"metric": r.metric, "first_breach_step": r.first_breach_step, "worst_step": r.worst_step,
                      "threshold": r.threshold, "operator": r.operator,
                      "points": [{"step": p.step, "current": p.current, "baseline": p.baseline}
                                 for p in r.points.breaches()[:20]]} for r in breached],
        "results_dir": str(results_dir),
        "work_dir": str(work_dir),
        "tracker": str(results_dir / "tracker.jsonl"),
        "run_config": str(results_dir / "run_config"),
        "requested_at": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
    }


def _criteria(baseline: Baseline | None, error: str | None) -> list[str]:
    if baseline is None:
        return [f"baseline could not be loaded: {error}"]
    lines = [c.describe() for c in baseline.checks]
    if baseline.steps.expected is not None:
        lines.append(f"{'exactly' if baseline.steps.exact else 'at least'} {baseline.steps.expected} training steps")
    if baseline.calibrated_range:
        lines.append(f"checked on the calibrated range {baseline.calibrated_range[0]}-{baseline.calibrated_range[1]}"
                     "; later steps reported as uncalibrated")
    if baseline.wall_time_max_s:
        lines.append(f"end-to-end wall time < {baseline.wall_time_max_s:g} s")
    return lines


def run_case(case: Case, options: RunOptions) -> CaseRun:
    from autotest.run.card import render_card
    from autotest.run.launch import launch_spec
    from autotest.run.platform import check_platform
    from autotest.run.preflight import run_preflight

    platform = check_platform(case)
    if not platform.runnable:
        return CaseRun(case.name, SKIP, None, reason=platform.skip_reason or "")
    results_dir = results_dir_for(case, options)
    work_dir = results_dir / "work"
    work_dir.mkdir(parents=True, exist_ok=True)
    preflight = run_preflight(case, platform.framework_dir)
    (results_dir / "preflight.json").write_text(json.dumps(preflight.to_dict(), indent=2) + "\n")
    baseline, baseline_error = None, None
    try:
        baseline = load_baseline(case.baseline_path)
        golden = golden_trace(baseline)
    except UsageError as exc:
        baseline_error = str(exc)
    spec, spec_error = None, None
    try:
        spec = launch_spec(case, work_dir, seed=options.seed, fault=options.fault,
                           environ={**os.environ, **options.env})
        spec = replace(spec, env={**options.env, **spec.env})
    except UsageError as exc:
        spec_error = str(exc)
    card = render_card(case, preflight, _criteria(baseline, baseline_error), spec=spec)
    (results_dir / "card.md").write_text(card, encoding="utf-8")
    command_line = spec.command_line if spec else ""
    if options.dry_run:
        return CaseRun(case.name, DRY_RUN, results_dir, card=card, command_line=command_line,
                       reason="dry run: nothing launched")
    if options.confirm is not None and not options.confirm(card):
        return CaseRun(case.name, DRY_RUN, results_dir, card=card, command_line=command_line,
                       reason="not confirmed: nothing launched")
    context = {"results_dir": str(results_dir), "work_dir": str(work_dir), "card": str(results_dir / "card.md"),
               "commit": preflight.commit.to_dict(), "harness_commit": preflight.harness.to_dict(),
               "seed": options.seed if options.seed is not None else case.seed.default, "fault": options.fault}
    problems = [m for m in (baseline_error, spec_error) if m]
    problems += [f"input {s.name} is missing: {s.path or s.raw} ({s.reason})" for s in preflight.missing_inputs]
    if problems:
        # fail fast: inputs or baseline missing on a platform that should run the case
        verdict = Verdict(ERROR, case.name, tuple(_structural("preflight", ERROR, p) for p in problems),
                          context=context)
        _publish_verdict(verdict, results_dir, None, options)
        return CaseRun(case.name, ERROR, results_dir, reason="; ".join(problems), verdict=verdict, card=card)

    comparison = _launch_with_retries(case, options, spec, baseline, golden, results_dir, work_dir, context)
    request = consistency_request(case, comparison.verdict, results_dir, work_dir)
    request_path = None
    if request:
        request_path = results_dir / "consistency_request.json"
        request_path.write_text(json.dumps(request, indent=2) + "\n", encoding="utf-8")
        comparison.verdict.context["consistency_request"] = str(request_path)
    _publish_verdict(comparison.verdict, results_dir, comparison, options)
    status = comparison.verdict.status
    primary = next((f.suggestion for f in comparison.verdict.triage if f.primary), "")
    return CaseRun(case.name, status, results_dir, reason=primary if status != PASS else "",
                   verdict=comparison.verdict, card=card, command_line=command_line,
                   consistency_request=request_path)


def _launch_with_retries(case: Case, options: RunOptions, spec, baseline: Baseline, golden, results_dir: Path,
                         work_dir: Path, context: dict) -> Comparison:
    """Launch, compare, and relaunch only on a known infrastructure failure (never on an accuracy FAIL).

    Earlier attempts' logs and work dirs are kept under ``attempts/<n>/``; the trail is in the report.
    """
    from autotest.run.follow import Follower
    from autotest.run.infra import Classification, RetryTrail, classify_log_file
    from autotest.run.launch import artifacts_for

    trail = RetryTrail()
    while True:
        follower = Follower(case, baseline, golden, work_dir, fail_fast=options.fail_fast,
                            progress=options.progress)
        started = time.time()
        result = _start(spec, case, results_dir, follower, options)
        artifacts = artifacts_for(case, work_dir, results_dir, since=started - 2)
        context.update(stdout_log=str(result.stdout_log), stderr_log=str(result.stderr_log),
                       launch=result.to_dict(), artifacts=[str(p) for p in artifacts.run_config],
                       time_to_verdict_s=follower.time_to_verdict_s())
        comparison = _compare_run(case, baseline, golden, artifacts.tracker, artifacts.notes, result, context)
        status = comparison.verdict.status
        infra, log_path = None, result.stdout_log
        if status == ERROR:
            for log_path in (result.stderr_log, result.stdout_log):
                infra = classify_log_file(log_path, result.exit_code)
                if infra is not None:
                    comparison = _with_infra_finding(comparison, infra, log_path)
                    break
        classification = Classification(status, infra, str(log_path))
        trail, decision = trail.record(classification, options.retry_policy)
        if len(trail.attempts) > 1 or decision.retry:
            comparison.verdict.context["retries"] = trail.to_dict()
        if not decision.retry:
            return comparison
        kept = results_dir / "attempts" / str(len(trail.attempts))
        kept.mkdir(parents=True)
        for name in ("logs", "work", "tracker.jsonl", "run_config"):
            if (results_dir / name).exists():
                (results_dir / name).rename(kept / name)
        work_dir.mkdir(parents=True)
        if options.progress:
            options.progress(f"[{case.name}] relaunching in {decision.wait_s:g} s: {decision.reason}")
        time.sleep(decision.wait_s)


def _with_infra_finding(comparison: Comparison, infra, log_path: Path) -> Comparison:
    """The recognised infrastructure failure as a result of its own, naming the log line that says so."""
    lines = infra.excerpt.splitlines()
    line = lines[min(infra.line_number - 1, 2)].strip() if lines else ""  # the excerpt starts 2 lines before
    found = _structural("run[infra]", ERROR, f"{infra.kind.value} ({infra.signature}) at {log_path}:"
                                             f"{infra.line_number}: {line}", kind=infra.kind.value)
    results = comparison.verdict.results + (found,)
    return replace(comparison, verdict=replace(comparison.verdict, results=results, status=decide_status(results)))


def _start(spec, case: Case, results_dir: Path, follower, options: RunOptions):
    """A local process group, or a Ray job on the cluster given by ``ray_address``."""
    if options.ray_address:
        from autotest.run.ray_job import submit

        return submit(spec, results_dir, address=options.ray_address, num_gpus=case.platform.gpus,
                      poll=follower.poll, poll_interval_s=options.poll_interval_s)
    from autotest.run.launch import launch

    return launch(spec, results_dir, poll=follower.poll, poll_interval_s=options.poll_interval_s)


def _compare_run(case, baseline, golden, tracker, notes, result, context) -> Comparison:
    from autotest.judge.readers import read_trace
    from autotest.judge.trace import Trace
    from autotest.run.launch import completion_status

    trace = None
    read_error = None
    if tracker is not None:
        try:
            trace = read_trace(tracker, case.tracker.format)
        except UsageError as exc:
            read_error = str(exc)
    if trace is None:
        from types import MappingProxyType

        trace = Trace(str(tracker or "no tracker"), MappingProxyType({}))
    observed = trace.last_train_step
    completion = completion_status(result, observed, case.expected.steps, case.expected.exact_steps)
    extra = [_structural("run[completion]", PASS if completion.complete else ERROR,
                         "; ".join(completion.reasons) or f"run exited 0 after step {observed}",
                         exit_code=result.exit_code, timed_out=result.timed_out, wall_s=round(result.wall_s, 2))]
    if read_error or tracker is None:
        extra.append(_structural("run[tracker]", ERROR, read_error or "; ".join(notes) or "no tracker found"))
    comparison = compare(baseline, trace, case=case.name, wall_time_s=result.wall_s, context=context,
                         golden=golden)
    results = tuple(extra) + comparison.verdict.results
    verdict = replace(comparison.verdict, results=results, status=decide_status(results),
                      triage=triage(results, trace))
    return replace(comparison, verdict=verdict)


def _publish_verdict(verdict: Verdict, results_dir: Path, comparison: Comparison | None, options: RunOptions) -> None:
    from autotest.report.markdown import render_markdown, write_results_json
    from autotest.files import write_atomic
    from autotest.report.publish import publish

    if comparison is not None:
        publish(comparison, results_dir, with_plots=options.with_plots)
        return
    write_results_json(verdict, results_dir)
    write_atomic(results_dir / "report.md", render_markdown(verdict))

