"""One run of a case: platform → preflight → card → launch → artifacts → verdict → published results.

:func:`autotest.pipeline.run_case` sends a case with one seed here (and each seed of a case with replicates,
:mod:`autotest.pipeline.replicated`), so ``rl-autotest run``, the pytest suites, calibration, bisect and A/B
runs slice GPUs, relaunch, pick the results root and write the step summary the same way. Every ending — pass,
fail, crash, timeout, fail-fast stop, preflight error — is judged by :func:`autotest.judge.verdict.judge` and
published by :func:`autotest.report.publish.publish`; everything the run produced is kept in its results folder
whatever happened.
"""

from __future__ import annotations

import os
import time
from dataclasses import replace

from autotest.errors import UsageError, WriteFailed
from autotest.inputs.case import Case
from autotest.inputs.tracker_layout import COPY_NAMES
from autotest.judge.live import Follower
from autotest.readers.reading import read_trace
from autotest.report import plot_worker
from autotest.judge.seed_use import logged_seed
from autotest.judge.shadow import load_shadow_candidate
from autotest.judge.structural import LogFinding, RunFacts
from autotest.judge.performance import MachineContext
from autotest.judge.verdict import READ_ALSO, Comparison, checked_metrics, judge, with_framework_spec
from autotest.pipeline.options import RunOptions
from autotest.pipeline.outcome import DRY_RUN, SKIP, CaseRun, finished, harness_error_log, power_ask, save
from autotest.report.consistency_request import write_consistency_request
from autotest.report.cost import run_cost
from autotest.report.markdown import relaunches_of
from autotest.run.artifacts import artifacts_for, mask_logs
from autotest.run.backends import start
from autotest.run.fault_catalogue import check_fault
from autotest.run.framework import (
    checkout,
    default_cache_dir,
    framework_request,
)
from autotest.run.framework_spec_read import (
    follow_case,
    read_case_spec,
)
from autotest.run.gpu_slots import case_slice
from autotest.run.contention import ContentionRecord, ContentionSampler, record_in_preflight, save_series, snapshot
from autotest.run.infra import (
    Classification,
    InfraFailure,
    RetryTrail,
    classify_log_file,
    contention_failure,
)
from autotest.run.launch import (
    LaunchResult,
    LaunchSpec,
    RunInterrupted,
    with_own_ray,
)
from autotest.run.node_preconditions import check_node
from autotest.run.platform import check_platform
from autotest.run.recipe_presence import REFUSE, place_recipe
from autotest.run.recipe_presence import SKIP as RECIPE_ABSENT
from autotest.run.results_dir import default_results_root, require_room
from autotest.run.resume_launch import RESUME_FOLDER, launch_resumed
from autotest.run.upload_budget import finalise_uploads
from autotest.judge.resume import judge_resume, main_run_problem
from autotest.pipeline.prepare import Prepared, prepare
from autotest.judge.tier import tier_case, with_tier


def run_single(case: Case, options: RunOptions) -> CaseRun:
    """One attempt of ``case`` with one seed (relaunched only on a known infrastructure failure), judged and
    published; ``options.judge``'s replicates are :func:`autotest.pipeline.run_case`'s to dispatch."""
    launch = options.launch
    environ = {**os.environ, **launch.env}
    request = framework_request(case, environ, repo=launch.framework_repo, ref=launch.framework_ref)
    platform = check_platform(case, environ, checkout_pending=request is not None)
    if not platform.runnable:
        return CaseRun(case.name, SKIP, None, reason=platform.skip_reason or "")
    check_fault(case, launch.fault)  # a misspelt fault must not cost a launch
    if launch.tier:  # an undeclared tier must not cost a launch either
        case = tier_case(case, launch.tier)
    # a verdict needs somewhere to go: a read-only or full results disk stops here, before any checkout
    require_room(launch.results_dir or launch.results_root or default_results_root(), environ)
    framework = None
    if request is not None and not launch.dry_run:
        framework = checkout(request, default_cache_dir(environ))
    # a recipe the ref under test lacks: a skip, or a run at the case's pin (autotest.run.recipe_presence)
    framework, recipe = place_recipe(case, environ, request, framework, default_cache_dir(environ))
    if recipe.action == RECIPE_ABSENT:
        return CaseRun(case.name, SKIP, None, reason=recipe.reason)
    if framework is not None and request is not None:
        # the case's ${XTUNER_ROOT} (inputs, cwd, command) and the launched run both see the checkout
        options = options.changed(launch={"env": {**launch.env, request.env: framework.path}})
        launch = options.launch
    # the framework's own spec, read at the commit under test; a case that follows it runs with its settings
    reading = read_case_spec(case, framework.path if framework else platform.framework_dir or case.framework_checkout)
    own_case, case = case, follow_case(case, reading)
    prep = prepare(case, options, framework, (recipe.reason,) if recipe.action == REFUSE else (), reading, own_case)
    case = prep.case  # the tracker format the config resolves to, when the harness reads it
    command_line = prep.spec.command_line if prep.spec else ""
    shown = CaseRun(case.name, DRY_RUN, prep.results_dir, card=prep.card, command_line=command_line)
    if launch.dry_run:  # the node too, as it is now (no GPU slot is taken: the whole node's GPUs stand in)
        node = check_node(case.node, case.source, case.platform.gpus, {**os.environ, **prep.spec.env}, slot_env={},
                          environ={**os.environ, **launch.env}) if prep.spec else None
        return replace(shown, reason="dry run: nothing launched", problems=(*prep.problems, *([node] if node else [])))
    if launch.confirm is not None and not launch.confirm(prep.card):
        return replace(shown, reason="not confirmed: nothing launched")
    if prep.problems:
        # fail fast: inputs or baseline missing on a platform that should run the case
        comparison = _not_launched(case, prep, prep.problems)
        verdict, unsaved = save(comparison, prep.results_dir, options.publish)
        return replace(shown, status=verdict.status, reason="; ".join(prep.problems), verdict=verdict,
                       unsaved=unsaved)
    slots_root = launch.results_root or default_results_root()
    refused = None
    try:
        with case_slice(case.platform.gpus, slots_root, launch.gpu_wait_s, case.name) as env:
            spec = replace(prep.spec, env={**env, **prep.spec.env})
            # the node as the launch script assumes it (case.node), probed with the slot held: one ERROR, no launch
            refused = check_node(case.node, case.source, case.platform.gpus, {**os.environ, **spec.env},
                                 slot_env=env, environ={**os.environ, **launch.env})
            if refused is None:
                comparison, interrupt = _attempts(case, options, spec, prep)
    except Exception as exc:  # noqa: BLE001 - every ending, the harness's own failure included, leaves a verdict
        comparison, interrupt = _harness_failure(case, prep, exc), None
    if refused is not None:
        verdict, unsaved = save(_not_launched(case, prep, (refused,)), prep.results_dir, options.publish)
        return replace(shown, status=verdict.status, reason=refused, verdict=verdict, unsaved=unsaved)
    lost = mask_logs(prep.results_dir)
    finalised = finalise_uploads(prep.results_dir)  # env.json redacted, Ray sockets and over-budget logs left out
    lost += finalised.problems
    if not finalised.empty:
        comparison.verdict.context["left_out"] = finalised.to_dict()
    request_path = None
    try:
        request_path = write_consistency_request(case, comparison.verdict, prep.results_dir, prep.work_dir)
    except WriteFailed as exc:
        lost.append(str(exc))
    comparison = with_tier(with_framework_spec(comparison, prep.spec_note), prep.context.get("tier"))
    verdict, unsaved = save(comparison, prep.results_dir, options.publish, lost)
    if interrupt is not None:
        # the run is stopped and its ERROR verdict published; the interrupt still ends the session
        if options.publish.progress:
            options.publish.progress(f"[{case.name}] interrupted ({interrupt.reason}): ERROR verdict in "
                                     f"{prep.results_dir / 'report.md'}")
        raise interrupt
    return finished(shown, verdict, unsaved=unsaved, consistency_request=request_path,
                    relaunches=tuple(relaunches_of(verdict.context)))


def _not_launched(case: Case, prep: Prepared, problems: tuple[str, ...]) -> Comparison:
    """The ERROR verdict of a run stopped before launch (preflight or node preconditions), each problem a line."""
    facts = RunFacts(case.expected.steps, case.expected.exact_steps, preflight_problems=problems, launched=False)
    comparison = judge(prep.baseline, None, golden=prep.golden, facts=facts, case=case.name, context=prep.context)
    return with_framework_spec(comparison, prep.spec_note)


def _harness_failure(case: Case, prep: Prepared, exc: Exception) -> Comparison:
    """An ERROR verdict for a run the harness could not launch or follow; the traceback goes to a log."""
    log = harness_error_log(prep.results_dir, exc)
    if isinstance(exc, UsageError):  # e.g. the command could not start: the message says what to fix
        reason = str(exc)
    else:
        reason = f"the harness failed: {type(exc).__name__}: {exc} (traceback: {log})"
    facts = RunFacts(case.expected.steps, case.expected.exact_steps, launched=False, harness_error=reason)
    return judge(prep.baseline, None, golden=prep.golden, facts=facts, case=case.name,
                 context={**prep.context, "harness_error_log": str(log)})


def _attempts(case: Case, options: RunOptions, spec: LaunchSpec,
              prep: Prepared) -> tuple[Comparison, RunInterrupted | None]:
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
        trail, decision = trail.record(Classification(verdict.status, infra, infra_log),
                                       options.launch.retry_policy)
        if len(trail.attempts) > 1 or decision.retry:
            verdict.context["retries"] = trail.to_dict()
        if not decision.retry:
            return comparison, None
        kept = prep.results_dir / "attempts" / str(len(trail.attempts))
        kept.mkdir(parents=True)
        for name in ("logs", "work", *COPY_NAMES, "run_config", RESUME_FOLDER):
            if (prep.results_dir / name).exists():
                (prep.results_dir / name).rename(kept / name)
        # the trail points at the kept copy of the attempt's log, not at the next attempt's
        trail = trail.relocated(len(trail.attempts), prep.results_dir, kept)
        prep.work_dir.mkdir(parents=True)
        if options.publish.progress:
            options.publish.progress(f"[{case.name}] relaunching in {decision.wait_s:g} s: {decision.reason}")
        time.sleep(decision.wait_s)


def _attempt(case: Case, options: RunOptions, spec: LaunchSpec,
             prep: Prepared) -> tuple[Comparison, InfraFailure | None, str, RunInterrupted | None]:
    """One launch, its artifacts and its verdict (an interrupted run is judged too: ERROR)."""
    assert prep.baseline is not None and prep.golden is not None
    launch, judging, progress = options.launch, options.judge, options.publish.progress
    environ = {**os.environ, **launch.env}
    # runner contention before, during and after the run: performance gates are judged against the machine
    device = "gpu" if case.platform.gpus > 0 else "cpu"
    machine_before = snapshot({**environ, **spec.env}, device=device)
    record_in_preflight(prep.results_dir / "preflight.json", machine_before)
    sampler = ContentionSampler()
    follower = Follower(case, prep.baseline, prep.golden, prep.work_dir, fail_fast=judging.fail_fast,
                        progress=progress, environ=environ, group=judging.replicate_group,
                        label=judging.replicate_label, contention=sampler)
    started = time.time()
    interrupt = None
    if options.publish.with_plots:
        plot_worker.prepare()  # its matplotlib import while the run goes, when a core is idle
    try:
        result = start(spec, prep.results_dir, poll=follower.poll, poll_interval_s=launch.poll_interval_s,
                       ray_address=launch.ray_address, num_gpus=case.platform.gpus,
                       ray_resources=launch.ray_resources, on_start=sampler.attach)
    except RunInterrupted as exc:  # the run is already stopped and cleaned up
        result, interrupt = exc.result, exc
    finally:
        samples = sampler.stop()
    follower.note_last_steps()
    machine = ContentionRecord(
        before=machine_before, after=snapshot({**environ, **spec.env}, device=device), samples=samples,
        step_seen_at=dict(follower.step_seen_at),
        unmeasured="" if samples else ("a Ray job on a cluster: its processes are not this machine's children"
                                       if launch.ray_address else "the run's threads could not be read (/proc)"))
    artifacts = artifacts_for(case, prep.work_dir, prep.results_dir, since=started - 2,
                              environ=environ)
    trace, tracker_problem = None, None
    # a recalibrated candidate in shadow beside the baseline (<case>.shadow.yaml) is judged on the same run
    candidate = load_shadow_candidate(options.judge.baseline_path or case.baseline_path,
                                      prep.preflight.environment.get("gpu"))
    if artifacts.judged_tracker is not None:  # the copy, or the run's own log when the copy found no room
        try:
            trace = read_trace(artifacts.judged_tracker, case.tracker.format, dict(prep.baseline.metric_aliases),
                               metrics=checked_metrics(prep.baseline) | (
                                   checked_metrics(candidate.baseline) if candidate and candidate.baseline else set()),
                               also=READ_ALSO)
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
        requested_seed=_seed_asked(case, launch.seed), logged_seed=logged_seed(artifacts.run_config))
    context = {**prep.context, "stdout_log": str(result.stdout_log), "stderr_log": str(result.stderr_log),
               "launch": result.to_dict(), "artifacts": [str(p) for p in artifacts.run_config],
               "cost": run_cost(case.platform.gpus, result.wall_s, {**environ, **spec.env},
                                machine.tree_cpu_s).to_dict(),
               "time_to_verdict_s": follower.time_to_verdict_s(),
               "decided": follower.stop().to_dict() if follower.stop() is not None else None,
               "machine": machine.to_dict(),
               "contention_log": save_series(prep.results_dir / "logs" / "contention.json", machine)}
    if result.unsaved or artifacts.unsaved:  # a full or read-only disk: the verdict stands, the files are named
        context["unsaved"] = [*result.unsaved, *artifacts.unsaved]
    # -- resume phase (case.resume): a completed run resumed from its checkpoint (autotest.run.resume_launch launches,
    # autotest.judge.resume compares); its structural results join this attempt's one verdict
    resume_checks: list = []
    if case.resume is not None:
        resumed = launch_resumed(
            case, spec, prep.work_dir, prep.results_dir, seed=launch.seed, fault=launch.fault, environ=environ,
            skip=main_run_problem(case.expected.steps, case.expected.exact_steps, result, trace,
                                  interrupted=interrupt is not None),
            start=start, start_kwargs={"poll_interval_s": launch.poll_interval_s, "ray_address": launch.ray_address,
                                       "num_gpus": case.platform.gpus, "ray_resources": launch.ray_resources},
            progress=progress)
        resume_checks = judge_resume(case.resume, prep.baseline, artifacts.judged_tracker, resumed,
                                     case.tracker.format)
        interrupt = interrupt or resumed.interrupt
        context["resume"] = resumed.context
    # -- end of the resume phase
    comparison = judge(prep.baseline, trace, golden=prep.golden, facts=facts, case=case.name, context=context,
                       power=power_ask(case, judging), structural=resume_checks,
                       machine=MachineContext(case.performance, machine, prep.baseline.provenance.get("machine_probe")),
                       candidate=candidate)
    if infra is None and comparison.verdict.environment_only:  # the retry policy decides on contention too
        infra = contention_failure([r.message for r in comparison.verdict.results if r.is_environment])
        infra_log = context["contention_log"]
    return comparison, infra, infra_log, interrupt


def _seed_asked(case: Case, seed: int | None) -> int | None:
    """The seed this run was given (``seed``: the launch option), when its launch takes one."""
    if not case.takes_seed:
        return None
    return case.seed.default if seed is None else seed


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
