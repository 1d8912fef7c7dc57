"""Run one case: platform → preflight → card → launch → artifacts → verdict → published results.

``rl-autotest run``, the pytest suites and calibration (N times) all call :func:`run_case`, so GPU
slicing, retries, the results root and the step summary behave the same everywhere. Every ending
— pass, fail, crash, timeout, fail-fast stop, preflight error — is judged by
:func:`autotest.judge.verdict.judge` and published by :func:`autotest.report.publish.publish`.
Everything the run produced is kept in its results folder whatever happened. A case with
``replicates: K`` runs K seeds side by side, each one such run in ``replicates/r<i>-seed<S>/``, and
one verdict judges their mean (:mod:`autotest.judge.replicate_mean`).
"""

from __future__ import annotations

import contextlib
import json
import os
import time
import traceback
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Callable, Sequence

from autotest.errors import UsageError, WriteFailed
from autotest.files import make_folder, write_atomic
from autotest.inputs.baseline import Baseline, for_hardware, load_baseline
from autotest.inputs.case import Case
from autotest.inputs.replicate_limits import replicates_cost, replicates_problem
from autotest.inputs.tracker_layout import COPY_NAMES
from autotest.judge.live import Follower
from autotest.judge.model import ERROR, PASS, CheckResult, Verdict
from autotest.judge.power import PowerAsk, caught_phrase
from autotest.judge.readers import read_trace
from autotest.judge.replicate_mean import judge_replicate_runs
from autotest.judge.seed_use import logged_seed
from autotest.judge.sequential import ALPHA_SHARE, CONTINUE_BELOW, STOP, decide_first_look, requantile
from autotest.judge.structural import LogFinding, RunFacts
from autotest.judge.trace import Trace
from autotest.judge.verdict import Comparison, checked_metrics, golden_trace, judge
from autotest.report.consistency_request import write_consistency_request
from autotest.report.cost import run_cost, summed
from autotest.report.markdown import relaunch_phrase, relaunches_of
from autotest.report.publish import AfterResults, NotRecorded, publish
from autotest.run.artifacts import artifacts_for, mask_logs
from autotest.run.backends import start
from autotest.run.card import card_criteria, hardware_thresholds, render_card
from autotest.run.fault_catalogue import check_fault
from autotest.run.framework import (
    Checkout,
    checkout,
    default_cache_dir,
    framework_request,
)
from autotest.run.gpu_slots import case_slice
from autotest.run.infra import (
    DEFAULT_POLICY,
    Classification,
    InfraFailure,
    RetryPolicy,
    RetryTrail,
    classify_log_file,
)
from autotest.run.interrupts import describe
from autotest.run.launch import (
    LaunchResult,
    LaunchSpec,
    RunInterrupted,
    launch_spec,
    with_own_ray,
)
from autotest.run.platform import check_platform
from autotest.run.preflight import Preflight, run_preflight
from autotest.run.recipe_guard import tracker_problem
from autotest.run.replicates import (
    default_jobs,
    replicate_folder,
    replicate_seeds,
    side_by_side,
)
from autotest.run.results_dir import default_results_root, new_results_dir, require_room

SKIP = "SKIP"
DRY_RUN = "DRY-RUN"
GPU_WAIT_S = 6 * 3600.0


@dataclass(frozen=True)
class RunOptions:
    #: root of the per-case results folders; None: the one default (see autotest.run.results_dir)
    results_root: Path | None = None
    #: write into exactly this folder instead of a fresh one under the root (calibration's run<i>-seed<s>)
    results_dir: Path | None = None
    seed: int | None = None
    fault: str | None = None
    dry_run: bool = False
    fail_fast: bool = False
    with_plots: bool = True
    #: extra environment for the launched command
    env: dict[str, str] = field(default_factory=dict)
    #: how often the launcher asks the follower; a poll costs one stat unless the tracker grew
    poll_interval_s: float = 0.1
    #: shown the experiment card before launching; returning False launches nothing
    confirm: Callable[[str], bool] | None = None
    #: submit the launch as a Ray job to this cluster instead of a local process group
    ray_address: str | None = None
    #: relaunch limits per infrastructure failure kind (an accuracy FAIL is never relaunched)
    retry_policy: RetryPolicy = DEFAULT_POLICY
    #: called with one progress line while the run goes (terminal or CI log)
    progress: Callable[[str], None] | None = None
    #: how long a GPU case waits for a free slice of this node
    gpu_wait_s: float = GPU_WAIT_S
    #: judge against this baseline file instead of the case's (calibration's baselines dir)
    baseline_path: Path | None = None
    #: called with the results folder once results.json is written (the shells record the run in
    #: the history this way); the lines it returns go into report.md and the step summary
    after_results: AfterResults | None = None
    #: the framework repository and ref to test (override the case file and RL_AUTOTEST_FRAMEWORK_*)
    framework_repo: str | None = None
    framework_ref: str | None = None
    #: seeds to run side by side and judge on their mean; None: the case's ``replicates``
    replicates: int | None = None
    #: allow more replicates than the platform's cap (autotest.inputs.replicate_limits); ``--force``
    force_replicates: bool = False
    #: append the verdict to $GITHUB_STEP_SUMMARY (a replicate's own verdict does not: the mean's does)
    step_summary: bool = True
    #: a PASS whose gates cannot catch the case's declared ``detect`` targets is an ERROR, not a warning
    strict_power: bool = False
    #: adaptive replicates: one seed, then up to this many when it lands near a threshold (None: off)
    adaptive_max: int | None = None
    #: why the run is made ("gate", "calibration", "bisect"), recorded as results.json's context.kind; a run
    #: with a fault is "fault" whatever this says. Only gate and calibration runs feed the history's
    #: calibration, drift and bands
    purpose: str = "gate"

    @property
    def kind(self) -> str:
        return "fault" if self.fault else self.purpose


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
    #: one "kind (signature)" per relaunch before this verdict; a verdict after a relaunch says so
    relaunches: tuple[str, ...] = ()
    #: how many seeds ran (the verdict judged their mean when more than one)
    replicates: int = 1
    #: one line per results file that could not be written (a full or read-only disk): the verdict above
    #: stands, but its results folder is incomplete (the shells exit 2)
    unsaved: tuple[str, ...] = ()

    @property
    def report(self) -> Path | None:
        return self.results_dir / "report.md" if self.results_dir else None

    def summary_line(self) -> str:
        report = self.report if self.verdict is not None else None
        where = f" (report: {report})" if report and not (self.unsaved and not report.is_file()) else ""
        reason = f" — {self.reason}" if self.reason else ""
        mean = f" (mean of {self.replicates} replicates)" if self.replicates > 1 and self.verdict is not None else ""
        power = ""
        if self.status == PASS and self.verdict is not None:
            caught = caught_phrase(self.verdict.results)
            power = f" — {caught}" if caught else ""
        lost = ""
        if self.unsaved:
            more = f" (and {len(self.unsaved) - 1} more)" if len(self.unsaved) > 1 else ""
            lost = f" — results not saved: {self.unsaved[0]}{more}"
        return f"{self.case}: {self.status}{relaunch_phrase(self.relaunches)}{mean}{power}{reason}{lost}{where}"


@dataclass(frozen=True)
class _Prepared:
    """What the run needs before launching; ``problems`` stop it at preflight."""

    results_dir: Path
    work_dir: Path
    preflight: Preflight
    baseline: Baseline | None
    golden: Trace | None
    spec: LaunchSpec | None
    card: str
    problems: tuple[str, ...]
    context: dict


def run_case(case: Case, options: RunOptions) -> CaseRun:
    """One attempt of ``case`` (relaunched only on a known infrastructure failure), judged and published;
    with replicates, one such attempt per seed and a verdict on their mean."""
    count = options.adaptive_max or options.replicates or case.replicates
    flag = "--adaptive" if options.adaptive_max is not None else "--replicates" if options.replicates else None
    problem = replicates_problem(count, gpus=case.platform.gpus, takes_seed=case.takes_seed,
                                 force=options.force_replicates, in_case=flag is None)
    if problem:  # refused before any folder, card or run
        raise UsageError(f"{flag or f'{case.source}: replicates'}: {problem[0]}; {problem[1]}")
    if options.adaptive_max is not None:
        return _run_replicates(case, replace(options, adaptive_max=None), count, adaptive=True)
    if count > 1:
        return _run_replicates(case, options, count)
    environ = {**os.environ, **options.env}
    request = framework_request(case, environ, repo=options.framework_repo, ref=options.framework_ref)
    platform = check_platform(case, environ, checkout_pending=request is not None)
    if not platform.runnable:
        return CaseRun(case.name, SKIP, None, reason=platform.skip_reason or "")
    check_fault(case, options.fault)  # a misspelt fault must not cost a launch
    # a verdict needs somewhere to go: a read-only or full results disk stops here, before any checkout
    require_room(options.results_dir or options.results_root or default_results_root(), environ)
    framework = None
    if request is not None and not options.dry_run:
        framework = checkout(request, default_cache_dir(environ))
        # the case's ${XTUNER_ROOT} (inputs, cwd, command) and the launched run both see the checkout
        options = replace(options, env={**options.env, request.env: framework.path})
    prep = _prepare(case, options, framework)
    command_line = prep.spec.command_line if prep.spec else ""
    shown = CaseRun(case.name, DRY_RUN, prep.results_dir, card=prep.card, command_line=command_line)
    if options.dry_run:
        return replace(shown, reason="dry run: nothing launched")
    if options.confirm is not None and not options.confirm(prep.card):
        return replace(shown, reason="not confirmed: nothing launched")
    if prep.problems:
        # fail fast: inputs or baseline missing on a platform that should run the case
        facts = RunFacts(case.expected.steps, case.expected.exact_steps, preflight_problems=prep.problems,
                         launched=False)
        comparison = judge(prep.baseline, None, golden=prep.golden, facts=facts, case=case.name,
                           context=prep.context)
        verdict, unsaved = _save(comparison, prep.results_dir, options)
        return replace(shown, status=verdict.status, reason="; ".join(prep.problems), verdict=verdict,
                       unsaved=unsaved)
    slots_root = options.results_root or default_results_root()
    try:
        with case_slice(case.platform.gpus, slots_root, options.gpu_wait_s, case.name) as env:
            spec = replace(prep.spec, env={**env, **prep.spec.env})
            comparison, interrupt = _attempts(case, options, spec, prep)
    except Exception as exc:  # noqa: BLE001 - every ending, the harness's own failure included, leaves a verdict
        comparison, interrupt = _harness_failure(case, prep, exc), None
    lost = mask_logs(prep.results_dir)
    request_path = None
    try:
        request_path = write_consistency_request(case, comparison.verdict, prep.results_dir, prep.work_dir)
    except WriteFailed as exc:
        lost.append(str(exc))
    verdict, unsaved = _save(comparison, prep.results_dir, options, lost)
    comparison = replace(comparison, verdict=verdict)
    if interrupt is not None:
        # the run is stopped and its ERROR verdict published; the interrupt still ends the session
        if options.progress:
            options.progress(f"[{case.name}] interrupted ({interrupt.reason}): ERROR verdict in "
                             f"{prep.results_dir / 'report.md'}")
        raise interrupt
    status = comparison.verdict.status
    primary = next((f.suggestion for f in comparison.verdict.triage if f.primary), "")
    relaunches = tuple(relaunches_of(comparison.verdict.context))
    return replace(shown, status=status, reason=primary if status != PASS else "", verdict=comparison.verdict,
                   consistency_request=request_path, relaunches=relaunches, unsaved=unsaved)


def _run_replicates(case: Case, options: RunOptions, count: int, adaptive: bool = False) -> CaseRun:
    """``count`` seeds side by side, each a normal run in ``replicates/r<i>-seed<S>/``, judged on their mean.

    ``adaptive``: one seed first, judged at the first look of :mod:`autotest.judge.sequential`; the other seeds
    run only when its pooled statistics sit in the grey zone, and the mean of all is the second look."""
    first = options.seed if options.seed is not None else case.seed.default
    seeds = replicate_seeds(case, count, first)
    require_room(options.results_dir or options.results_root or default_results_root(), {**os.environ, **options.env},
                 runs=count)
    # this pipeline's own dry run makes the folder, its preflight and card (and skips where it skips)
    shown = run_case(case, replace(options, replicates=1, seed=first, dry_run=True, confirm=None))
    if shown.status == SKIP or shown.results_dir is None:
        return shown
    folder = shown.results_dir
    with contextlib.suppress(OSError):
        (folder / "work").rmdir()  # each replicate has its own work dir
    jobs = default_jobs(case, count)
    cost = replicates_cost(count, case.expected.wall_time_s, jobs)
    card = shown.card + (f"\n## Replicates\n\n{count} seeds ({', '.join(map(str, seeds))}) side by side, each in "
                         "replicates/r<i>-seed<S>/; the checks judge their mean (pooled thresholds scaled, "
                         f"see autotest.judge.replicate_mean)\n\nCost: {cost}\n")
    if adaptive:
        card += (f"\nAdaptive: seed {seeds[0]} alone first; the other {count - 1} only when a pooled statistic lies "
                 f"in the grey zone (at least {CONTINUE_BELOW:g} x its threshold); the false-alarm budget is spent "
                 "over the two looks (autotest.judge.sequential)\n")
    write_atomic(folder / "card.md", card)
    shown = replace(shown, card=card, replicates=count)
    if options.dry_run:
        return shown
    if options.confirm is not None and not options.confirm(card):
        return replace(shown, reason="not confirmed: nothing launched")
    say = options.progress or (lambda line: None)

    # the history records each replicate (a single run with its tracker, what drift and calibration from
    # history read); the mean's report shows the drift lines of the last one recorded
    drift: list[str] = []
    not_recorded: list[NotRecorded] = []

    def record(results_dir: Path) -> list[str]:
        try:
            drift[:] = list(options.after_results(results_dir)) if options.after_results is not None else []
        except NotRecorded as exc:
            not_recorded.append(exc)
            raise
        return list(drift)

    def mean_after(_folder: Path) -> list[str]:
        if not_recorded:  # the mean's verdict says it too (and is ERROR under --strict-history)
            last = not_recorded[-1]
            ran = len(runs) or count
            raise NotRecorded(f"{len(not_recorded)} of {ran} replicates not recorded: {last.error}",
                              url=last.url, strict=last.strict)
        return list(drift)

    def replicate(index: int, seed: int) -> Callable[[], CaseRun]:
        label = f"r{index}-seed{seed}"
        one = replace(options, replicates=1, seed=seed, results_dir=replicate_folder(folder, index, seed),
                      confirm=None, after_results=record if options.after_results is not None else None,
                      with_plots=False, step_summary=False, progress=lambda line: say(f"{label}: {line}"))
        return lambda: run_case(case, one)

    say(f"[{case.name}] {count} replicates (seeds {', '.join(map(str, seeds))}) in {folder}; cost: {cost}")
    runs: list[CaseRun] = []
    interrupt: KeyboardInterrupt | None = None
    tasks = [replicate(i + 1, s) for i, s in enumerate(seeds)]
    looks = [(0, len(tasks), None)]
    if adaptive:
        looks = [(0, 1, lambda b: requantile(b, ALPHA_SHARE[0])), (1, len(tasks), lambda b: requantile(b, ALPHA_SHARE[1]))]
    for index, (begin, end, adjust) in enumerate(looks):
        try:
            runs += side_by_side(tasks[begin:end], jobs)
        except KeyboardInterrupt as exc:  # every replicate is stopped and has published its own ERROR verdict
            interrupt = exc
        comparison = _judge_replicates(case, options, folder, seeds[:end], runs, interrupt, adjust)
        if adaptive:
            comparison.verdict.context["adaptive"] = {"runs": end, "of": count, "look": index + 1}
        if interrupt is not None or index + 1 == len(looks) or decide_first_look(comparison.verdict.results) == STOP:
            break
        say(f"[{case.name}] adaptive: seed {seeds[0]} is in the grey zone near a threshold: "
            f"{count - 1} more seed(s)")
    verdict, unsaved = _save(comparison, folder, replace(
        options, after_results=mean_after if options.after_results is not None else None),
        lost=[line for run in runs for line in run.unsaved])  # the mean's results.json names the replicates' too
    comparison = replace(comparison, verdict=verdict)
    if interrupt is not None:
        raise interrupt
    status = comparison.verdict.status
    primary = next((f.suggestion for f in comparison.verdict.triage if f.primary), "")
    return replace(shown, status=status, reason=primary if status != PASS else "", verdict=comparison.verdict,
                   consistency_request=next((r.consistency_request for r in runs if r.consistency_request), None),
                   replicates=max(1, len(runs)), unsaved=unsaved)


def _judge_replicates(case: Case, options: RunOptions, folder: Path, seeds: tuple[int, ...], runs: list[CaseRun],
                      interrupt: KeyboardInterrupt | None,
                      adjust: Callable[[Baseline], Baseline] | None = None) -> Comparison:
    """The mean's verdict; the harness failing here is an ERROR verdict too (traceback in logs/)."""
    context = {"results_dir": str(folder), "card": str(folder / "card.md"), "seed": list(seeds),
               "fault": options.fault, "kind": options.kind,
               "cost": summed(run.verdict.context.get("cost") for run in runs if run.verdict is not None)}
    first = runs[0].verdict.context if runs and runs[0].verdict is not None else {}
    context.update({k: first[k] for k in ("commit", "harness_commit", "framework") if k in first})
    try:
        gpu = json.loads((folder / "preflight.json").read_text(encoding="utf-8"))["environment"].get("gpu")
        return judge_replicate_runs(case, options.baseline_path or case.baseline_path,
                                    [(seed, run.results_dir, run.verdict) for seed, run in zip(seeds, runs)],
                                    context=context, gpu=gpu, interrupted=describe(interrupt) if interrupt else None,
                                    power=_power_ask(case, options), adjust=adjust)
    except Exception as exc:  # noqa: BLE001 - every ending leaves a verdict
        log = _harness_error_log(folder, exc)
        failure = CheckResult("run[harness]", ERROR, f"the harness failed judging the replicates: "
                              f"{type(exc).__name__}: {exc} (traceback: {log})", kind="structural")
        return judge(None, None, case=case.name, context=context, structural=[failure])


def _harness_failure(case: Case, prep: _Prepared, exc: Exception) -> Comparison:
    """An ERROR verdict for a run the harness could not launch or follow; the traceback goes to a log."""
    log = _harness_error_log(prep.results_dir, exc)
    if isinstance(exc, UsageError):  # e.g. the command could not start: the message says what to fix
        reason = str(exc)
    else:
        reason = f"the harness failed: {type(exc).__name__}: {exc} (traceback: {log})"
    facts = RunFacts(case.expected.steps, case.expected.exact_steps, launched=False, harness_error=reason)
    return judge(prep.baseline, None, golden=prep.golden, facts=facts, case=case.name,
                 context={**prep.context, "harness_error_log": str(log)})


def _harness_error_log(results_dir: Path, exc: BaseException) -> str:
    """Where the traceback went (or why it could not be written: the verdict still names the failure)."""
    log = results_dir / "logs" / "harness_error.log"
    try:
        write_atomic(log, "".join(traceback.format_exception(exc)))
    except WriteFailed as lost:
        return f"not saved: {lost}"
    return str(log)


def _save(comparison: Comparison, folder: Path, options: RunOptions,
          lost: Sequence[str] = ()) -> tuple[Verdict, tuple[str, ...]]:
    """Publish into ``folder``; the verdict as published (ERROR under --strict-history when the history could
    not record it) and the lines naming what a full or read-only disk kept from being written."""
    published = publish(comparison, folder, lost=lost, with_plots=options.with_plots,
                        after_results=options.after_results, step_summary=options.step_summary)
    return published.verdict or comparison.verdict, published.unsaved


def _prepare(case: Case, options: RunOptions, framework: Checkout | None) -> _Prepared:
    results_dir = options.results_dir or new_results_dir(case, options.results_root, fault=options.fault)
    results_dir = Path(results_dir).resolve()
    work_dir = make_folder(results_dir / "work")
    environ = {**os.environ, **options.env}
    preflight = run_preflight(case, Path(framework.path) if framework else None, environ,
                              framework=framework.to_dict() if framework else None)
    write_atomic(results_dir / "preflight.json", json.dumps(preflight.to_dict(), indent=2) + "\n")
    baseline, golden, baseline_error = None, None, None
    try:
        # per-hardware thresholds (time/step, wall time) picked by this node's GPU fingerprint
        baseline = for_hardware(load_baseline(options.baseline_path or case.baseline_path),
                                preflight.environment.get("gpu"))
        golden = golden_trace(baseline)
    except UsageError as exc:
        baseline_error = str(exc)
    spec, spec_error = None, None
    try:
        spec = launch_spec(case, work_dir, seed=options.seed, fault=options.fault,
                           environ=environ)
        spec = replace(spec, env={**options.env, **spec.env})
    except UsageError as exc:
        spec_error = str(exc)
    card = render_card(case, preflight, card_criteria(baseline, baseline_error), spec=spec)
    write_atomic(results_dir / "card.md", card)
    context = {"results_dir": str(results_dir), "work_dir": str(work_dir), "card": str(results_dir / "card.md"),
               "commit": preflight.commit.to_dict(), "harness_commit": preflight.harness.to_dict(),
               "seed": options.seed if options.seed is not None else case.seed.default, "fault": options.fault,
               "kind": options.kind, "framework": framework.to_dict() if framework else None,
               "hardware_thresholds": hardware_thresholds(baseline)}
    problems = [m for m in (baseline_error, spec_error) if m] + preflight.requirement_problems(case)
    if spec is not None:  # what the config will log, resolved in the framework's Python (no GPU time spent)
        problems += [m for m in (tracker_problem(case, spec.cwd, {**environ, **spec.env}),) if m]
    problems += [f"input {s.name} is missing: {s.path or s.raw} ({s.reason})" for s in preflight.missing_inputs]
    return _Prepared(results_dir, work_dir, preflight, baseline, golden, spec, card, tuple(problems), context)


def _attempts(case: Case, options: RunOptions, spec: LaunchSpec,
              prep: _Prepared) -> tuple[Comparison, RunInterrupted | None]:
    """Launch and judge; relaunch only on a known infrastructure failure (never on an accuracy FAIL,
    never after an interrupt).

    Earlier attempts' logs and work dirs are kept under ``attempts/<n>/``; the trail is in the report.
    """
    trail = RetryTrail()
    while True:
        if trail.attempts:  # a relaunch (after "address already in use", say) gets fresh Ray ports
            spec = with_own_ray(spec, case.launch.env)
        comparison, infra, infra_log, interrupt = _attempt(case, options, spec, prep)
        verdict = comparison.verdict
        if interrupt is not None:
            if trail.attempts:
                verdict.context["retries"] = trail.to_dict()
            return comparison, interrupt
        trail, decision = trail.record(Classification(verdict.status, infra, infra_log), options.retry_policy)
        if len(trail.attempts) > 1 or decision.retry:
            verdict.context["retries"] = trail.to_dict()
        if not decision.retry:
            return comparison, None
        kept = prep.results_dir / "attempts" / str(len(trail.attempts))
        kept.mkdir(parents=True)
        for name in ("logs", "work", *COPY_NAMES, "run_config"):
            if (prep.results_dir / name).exists():
                (prep.results_dir / name).rename(kept / name)
        # the trail points at the kept copy of the attempt's log, not at the next attempt's
        trail = trail.relocated(len(trail.attempts), prep.results_dir, kept)
        prep.work_dir.mkdir(parents=True)
        if options.progress:
            options.progress(f"[{case.name}] relaunching in {decision.wait_s:g} s: {decision.reason}")
        time.sleep(decision.wait_s)


def _attempt(case: Case, options: RunOptions, spec: LaunchSpec,
             prep: _Prepared) -> tuple[Comparison, InfraFailure | None, str, RunInterrupted | None]:
    """One launch, its artifacts and its verdict (an interrupted run is judged too: ERROR)."""
    assert prep.baseline is not None and prep.golden is not None
    environ = {**os.environ, **options.env}
    follower = Follower(case, prep.baseline, prep.golden, prep.work_dir, fail_fast=options.fail_fast,
                        progress=options.progress, environ=environ)
    started = time.time()
    interrupt = None
    try:
        result = start(spec, prep.results_dir, poll=follower.poll, poll_interval_s=options.poll_interval_s,
                       ray_address=options.ray_address, num_gpus=case.platform.gpus)
    except RunInterrupted as exc:  # the run is already stopped and cleaned up
        result, interrupt = exc.result, exc
    artifacts = artifacts_for(case, prep.work_dir, prep.results_dir, since=started - 2,
                              environ=environ)
    trace, tracker_problem = None, None
    if artifacts.judged_tracker is not None:  # the copy, or the run's own log when the copy found no room
        try:
            trace = read_trace(artifacts.judged_tracker, case.tracker.format, dict(prep.baseline.metric_aliases),
                               metrics=checked_metrics(prep.baseline))
        except UsageError as exc:
            tracker_problem = str(exc)
    else:
        tracker_problem = "; ".join(artifacts.notes) or "no tracker found"
    infra, infra_log = _infra_failure(result) if interrupt is None else (None, str(result.stdout_log))
    facts = RunFacts(
        case.expected.steps, case.expected.exact_steps, exit_code=result.exit_code, signal=result.signal,
        timed_out=result.timed_out, timeout_s=result.timeout_s, wall_s=result.wall_s,
        stopped_reason=result.stopped_reason, interrupted=result.interrupted, fail_fast=follower.stop(),
        tracker_problem=tracker_problem, infra=_log_finding(infra, infra_log),
        requested_seed=_seed_asked(case, options), logged_seed=logged_seed(artifacts.run_config))
    context = {**prep.context, "stdout_log": str(result.stdout_log), "stderr_log": str(result.stderr_log),
               "launch": result.to_dict(), "artifacts": [str(p) for p in artifacts.run_config],
               "cost": run_cost(case.platform.gpus, result.wall_s, {**environ, **spec.env}).to_dict(),
               "time_to_verdict_s": follower.time_to_verdict_s()}
    if result.unsaved or artifacts.unsaved:  # a full or read-only disk: the verdict stands, the files are named
        context["unsaved"] = [*result.unsaved, *artifacts.unsaved]
    comparison = judge(prep.baseline, trace, golden=prep.golden, facts=facts, case=case.name, context=context,
                       power=_power_ask(case, options))
    return comparison, infra, infra_log, interrupt


def _power_ask(case: Case, options: RunOptions) -> PowerAsk:
    return PowerAsk(targets=case.detect, strict=options.strict_power)


def _seed_asked(case: Case, options: RunOptions) -> int | None:
    """The seed this run was given, when its launch takes one."""
    if not case.takes_seed:
        return None
    return case.seed.default if options.seed is None else options.seed


def _infra_failure(result: LaunchResult) -> tuple[InfraFailure | None, str]:
    """A known infrastructure signature in the logs of a run that did not exit cleanly, and its log."""
    if result.exit_code == 0 and not (result.timed_out or result.signal or result.interrupted):
        return None, str(result.stdout_log)
    for log_path in (result.stderr_log, result.stdout_log):
        failure = classify_log_file(log_path, result.exit_code)
        if failure is not None:
            return failure, str(log_path)
    return None, str(result.stdout_log)


def _log_finding(failure: InfraFailure | None, log_path: str) -> LogFinding | None:
    if failure is None:
        return None
    lines = failure.excerpt.splitlines()
    line = lines[min(failure.line_number - 1, 2)].strip() if lines else ""  # the excerpt starts 2 lines before
    return LogFinding(failure.kind.value, failure.signature, log_path, failure.line_number, line)
