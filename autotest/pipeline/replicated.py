"""Several seeds of one case side by side, judged on their mean; adaptively, one seed first.

A case with ``replicates: K`` (or ``--replicates K``) runs K seeds, each a normal single run
(:func:`autotest.pipeline.single.run_single`) in ``replicates/r<i>-seed<S>/``, and one verdict judges their mean
(:mod:`autotest.judge.replicate_mean`). ``--adaptive N`` runs one seed first and the others only when it
lands in the grey zone near a threshold (:mod:`autotest.judge.sequential`). Which seeds, which folders and
how many at once is :mod:`autotest.run.replicates`.
"""

from __future__ import annotations

import contextlib
import json
import os
from dataclasses import replace
from pathlib import Path
from typing import Callable

from autotest.files import write_atomic
from autotest.inputs.baseline import Baseline
from autotest.inputs.baseline_model import in_shadow
from autotest.inputs.case import Case
from autotest.inputs.replicate_limits import replicates_cost
from autotest.judge.live import ReplicateGroup
from autotest.judge.model import ERROR, CheckResult
from autotest.judge.replicate_mean import judge_replicate_runs
from autotest.judge.sequential import ALPHA_SHARE, CONTINUE_BELOW, STOP, decide_first_look, requantile
from autotest.judge.step_looks import with_step_looks
from autotest.judge.verdict import Comparison, judge, with_framework_spec
from autotest.pipeline.options import RunOptions
from autotest.pipeline.outcome import SKIP, CaseRun, finished, harness_error_log, power_ask, save
from autotest.pipeline.single import run_single
from autotest.report.cost import summed
from autotest.report.publish import NotRecorded
from autotest.run.framework_spec_read import follow_baseline, read_case_spec
from autotest.run.interrupts import describe
from autotest.run.replicates import default_jobs, replicate_folder, replicate_seeds, side_by_side
from autotest.run.results_dir import default_results_root, require_room


def run_replicates(case: Case, options: RunOptions, count: int, adaptive: bool = False) -> CaseRun:
    """``count`` seeds side by side, each a normal run in ``replicates/r<i>-seed<S>/``, judged on their mean.

    ``adaptive``: one seed first, judged at the first look of :mod:`autotest.judge.sequential`; the other seeds
    run only when its pooled statistics sit in the grey zone, and the mean of all is the second look.

    The single run (:func:`autotest.pipeline.single.run_single`) makes the folder, the preflight and the card (as a
    dry run), and runs each replicate."""
    launch = options.launch
    first = launch.seed if launch.seed is not None else case.seed.default
    seeds = replicate_seeds(case, count, first)
    require_room(launch.results_dir or launch.results_root or default_results_root(), {**os.environ, **launch.env},
                 runs=count)
    # the single run's own dry run makes the folder, its preflight and card (and skips where it skips)
    shown = run_single(case, options.changed(launch={"seed": first, "dry_run": True, "confirm": None},
                                             judge={"replicates": 1}))
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
    if launch.dry_run:
        return shown
    if launch.confirm is not None and not launch.confirm(card):
        return replace(shown, reason="not confirmed: nothing launched")
    after_results = options.publish.after_results
    say = options.publish.progress or (lambda line: None)

    # the history records each replicate (a single run with its tracker, what drift and calibration from
    # history read); the mean's report shows the drift lines of the last one recorded
    drift: list[str] = []
    not_recorded: list[NotRecorded] = []

    def record(results_dir: Path) -> list[str]:
        try:
            drift[:] = list(after_results(results_dir)) if after_results is not None else []
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

    def replicate(index: int, seed: int, group: ReplicateGroup | None) -> Callable[[], CaseRun]:
        label = f"r{index}-seed{seed}"
        one = options.changed(
            launch={"seed": seed, "results_dir": replicate_folder(folder, index, seed), "confirm": None},
            judge={"replicates": 1, "replicate_group": group, "replicate_label": label},
            publish={"after_results": record if after_results is not None else None, "with_plots": False,
                     "step_summary": False, "progress": lambda line: say(f"{label}: {line}")})
        return lambda: run_single(case, one)

    say(f"[{case.name}] {count} replicates (seeds {', '.join(map(str, seeds))}) in {folder}; cost: {cost}")
    runs: list[CaseRun] = []
    interrupt: KeyboardInterrupt | None = None
    # under fail-fast the replicates judged together decide together: on their mean (autotest.judge.live); an
    # adaptive first look judges its one seed alone, the second look the mean of all
    labels = [f"r{i + 1}-seed{s}" for i, s in enumerate(seeds)]
    group = ReplicateGroup(labels, alone=labels[:1] if adaptive else ()) if options.judge.fail_fast else None
    tasks = [replicate(i + 1, s, group) for i, s in enumerate(seeds)]
    looks = [(0, len(tasks), None)]
    if adaptive:
        looks = [(0, 1, lambda b: requantile(b, ALPHA_SHARE[0])),
                 (1, len(tasks), lambda b: requantile(b, ALPHA_SHARE[1]))]
    for index, (begin, end, adjust) in enumerate(looks):
        try:
            runs += side_by_side(tasks[begin:end], jobs)
        except KeyboardInterrupt as exc:  # every replicate is stopped and has published its own ERROR verdict
            interrupt = exc
        comparison = judge_replicates(case, options, folder, seeds[:end], runs, interrupt, adjust)
        if adaptive:
            comparison.verdict.context["adaptive"] = {"runs": end, "of": count, "look": index + 1}
        if interrupt is not None or index + 1 == len(looks) or decide_first_look(comparison.verdict.results) == STOP:
            break
        say(f"[{case.name}] adaptive: seed {seeds[0]} is in the grey zone near a threshold: "
            f"{count - 1} more seed(s)")
    verdict, unsaved = save(comparison, folder, replace(
        options.publish, after_results=mean_after if after_results is not None else None),
        lost=[line for run in runs for line in run.unsaved])  # the mean's results.json names the replicates' too
    if interrupt is not None:
        raise interrupt
    return finished(shown, verdict, unsaved=unsaved, replicates=max(1, len(runs)),
                    consistency_request=next((r.consistency_request for r in runs if r.consistency_request), None))


def judge_replicates(case: Case, options: RunOptions, folder: Path, seeds: tuple[int, ...], runs: list[CaseRun],
                     interrupt: KeyboardInterrupt | None,
                     adjust: Callable[[Baseline], Baseline] | None = None) -> Comparison:
    """The mean's verdict; the harness failing here is an ERROR verdict too (traceback in logs/)."""
    context = {"results_dir": str(folder), "card": str(folder / "card.md"), "seed": list(seeds),
               "fault": options.launch.fault, "kind": options.kind,
               "cost": summed(run.verdict.context.get("cost") for run in runs if run.verdict is not None)}
    first = runs[0].verdict.context if runs and runs[0].verdict is not None else {}
    context.update({k: first[k] for k in ("commit", "harness_commit", "framework") if k in first})
    try:
        gpu = json.loads((folder / "preflight.json").read_text(encoding="utf-8"))["environment"].get("gpu")
        # the mean is held to what each replicate was held to: the framework spec it followed, if any
        reading = read_case_spec(case, (first.get("commit") or {}).get("repo_dir"))

        def held(b: Baseline) -> Baseline:
            b = follow_baseline(b, reading)
            b = in_shadow(b) if case.shadow and reading is not None and reading.applies else b
            b = with_step_looks(b) if options.judge.fail_fast else b  # as each replicate's follower judged it
            return adjust(b) if adjust is not None else b

        return with_framework_spec(judge_replicate_runs(
            case, options.judge.baseline_path or case.baseline_path,
            [(seed, run.results_dir, run.verdict) for seed, run in zip(seeds, runs)], context=context, gpu=gpu,
            interrupted=describe(interrupt) if interrupt else None, power=power_ask(case, options.judge),
            adjust=held), runs[0].verdict.framework_spec if runs and runs[0].verdict is not None else None)
    except Exception as exc:  # noqa: BLE001 - every ending leaves a verdict
        log = harness_error_log(folder, exc)
        failure = CheckResult("run[harness]", ERROR, f"the harness failed judging the replicates: "
                              f"{type(exc).__name__}: {exc} (traceback: {log})", kind="structural")
        return judge(None, None, case=case.name, context=context, structural=[failure])

