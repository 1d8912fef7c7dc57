"""One A/B comparison: base and head of a case on the same seeds, interleaved on this runner, judged paired.

Each side of each seed is an ordinary run (:func:`autotest.pipeline.run_case`) with its own results folder, judged
against the golden as any run is (shown beside the paired verdict). The order alternates per seed (base, head;
head, base; ...) so a runner that slows down or speeds up during the session shifts both sides alike. The
paired verdict is :func:`autotest.judge.paired.judge_paired` on the per-seed differences; an ERROR run on either
side (a crash, a missing metric) makes the A/B an ERROR naming it, never a PASS on fewer seeds.

Layout::

    <results root>/<case>/ab-<stamp>/
        base-seed<S>/  head-seed<S>/     ordinary results folders, one per side and seed
        ab.json  ab.md  ab-<metric>.png    the paired verdict, its report and plots
        rollouts/  <side>-on-<side>-rollouts-seed<S>/   with --split: the kept batches and the replays
                                                        (:mod:`autotest.ab.split`)

An interrupt (CI cancelling) stops the run in flight (its own folder keeps its ERROR verdict) and ab.json
records the pairs finished so far, then the interrupt goes on.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from autotest.ab.ab_preflight import check_before_runs
from autotest.ab.nudge import no_effect_line, nudge_env
from autotest.ab.sides import Side
from autotest.ab.split import SplitOutcome, run_split, saving
from autotest.errors import UsageError
from autotest.files import write_atomic
from autotest.inputs.baseline import load_baseline
from autotest.inputs.baseline_model import Baseline
from autotest.inputs.case import Case, case_argument
from autotest.inputs.tracker_layout import tracker_copy
from autotest.judge.model import ERROR, FAIL, PASS
from autotest.judge.paired import PairedVerdict, bitwise_pairs, judge_paired
from autotest.judge.trace import Trace
from autotest.pipeline import CaseRun, RunOptions, run_case
from autotest.readers.reading import read_trace
from autotest.run.results_dir import default_results_root, fresh_folder, run_stamp

AB_JSON, AB_REPORT = "ab.json", "ab.md"
#: the label of the A/A guard's runs (the base again)
AA_LABEL = "base-again"


@dataclass(frozen=True)
class AbOptions:
    seeds: tuple[int, ...]
    results_root: Path | None = None
    #: extra environment for every run of both sides (an environment change judged A/B)
    env: dict[str, str] = field(default_factory=dict)
    #: judge against this baseline file instead of the case's
    baseline_path: Path | None = None
    progress: Callable[[str], None] | None = None
    with_plots: bool = True
    poll_interval_s: float = 0.1
    #: keep each run's rollout batches and, when the A/B fails, train each side on the other's (autotest.ab.split)
    split: bool = False
    #: per seed, also run the base again as the A/A pairs were (the paired section's perturbation); a pair that
    #: moves beyond the paired noise makes the A/B an ERROR: the noise measured elsewhere does not hold here
    aa_check: bool = False
    #: the base request every side's run derives from (the command's declared flags: Ray, the history hook, ...)
    run: RunOptions = field(default_factory=RunOptions)


@dataclass(frozen=True)
class SideRun:
    side: str
    seed: int
    status: str
    results_dir: Path | None
    reason: str = ""


@dataclass(frozen=True)
class AbOutcome:
    case: str
    base: Side
    head: Side
    verdict: PairedVerdict
    runs: tuple[SideRun, ...]
    folder: Path
    report: Path | None = None
    #: the frozen-rollout split (``--split`` and a failed A/B); None when not asked or nothing to split
    split: SplitOutcome | None = None
    #: the A/A guard's verdict (``--aa-check``): the base against itself again; None when not asked
    aa_check: PairedVerdict | None = None

    @property
    def status(self) -> str:
        return self.verdict.status


def how_to_calibrate(case: Case) -> str:
    return f"run `rl-autotest calibrate {case_argument(case)} --paired` (A/A pairs) to measure it"


def run_ab(case: Case, base: Side, head: Side, options: AbOptions) -> AbOutcome:
    """Run every (seed, side), interleaved, and judge the pairs; the outcome is also written to the folder."""
    if not options.seeds:
        raise ValueError("an A/B needs at least one seed")
    if options.split and case.replay is None:
        raise UsageError(f"--split: {case.name} has no replay: section (how its launch keeps its rollout batches "
                         "and trains on kept ones); add one (docs/ab.md) or leave --split out")
    baseline = load_baseline(options.baseline_path or case.baseline_path)
    check_before_runs(case, (base, head), baseline, {**os.environ, **options.env})
    root = options.results_root or options.run.launch.results_root or default_results_root()
    folder = fresh_folder(Path(root).resolve() / case.name,
                          f"ab-{run_stamp()}")
    say = options.progress or (lambda line: None)
    say(f"{case.name}: A/B {base.ref} (base) against {head.ref} (head) on seeds "
        f"{', '.join(map(str, options.seeds))}, interleaved, in {folder}")
    runs: list[SideRun] = []
    traces: dict[tuple[str, int], Trace] = {}
    try:
        for index, seed in enumerate(options.seeds):
            order = (base, head) if index % 2 == 0 else (head, base)
            for side in order:
                side_case = saving(case, side, seed, folder) if options.split else side.case_for(case)
                run = _run_side(side_case, side, seed, folder / f"{side.label}-seed{seed}", options)
                runs.append(_side_run(side, seed, run))
                trace = _trace_of(case, baseline, run)
                if trace is not None:
                    traces[(side.label, seed)] = trace
                say(f"{case.name}: {side.label} seed {seed}: {run.status} against the golden ({run.results_dir})")
            if options.aa_check:
                again = _run_side(base.case_for(case), base, seed, folder / f"{base.label}-again-seed{seed}",
                                  replace(options, env={**options.env, **perturbation_env(
                                      baseline, {**os.environ, **case.launch.env, **options.run.launch.env,
                                                 **options.env})}))
                runs.append(_side_run(replace(base, label=AA_LABEL), seed, again))
                if (trace := _trace_of(case, baseline, again)) is not None:
                    traces[(AA_LABEL, seed)] = trace
                say(f"{case.name}: A/A guard seed {seed} (the {base.label} again): {again.status} against the golden")
        outcome = _outcome(case, base, head, baseline, runs, traces, folder)
        if options.aa_check:
            outcome = _guarded(outcome, baseline, traces, case)
        if options.split and outcome.status == FAIL:
            def run_one(replay_case: Case, side: Side, seed: int, results_dir: Path):
                run = _run_side(replay_case, side, seed, results_dir, options)
                paired = _side_run(side, seed, run)
                return run.status, run.results_dir, paired.reason, _trace_of(case, baseline, run)

            outcome = replace(outcome, split=run_split(case, base, head, baseline, options.seeds, traces, folder,
                                                       run_one, say))
            say(f"{case.name}: split: {outcome.split.finding.summary}")
    except KeyboardInterrupt:
        _write(folder, _outcome(case, base, head, baseline, runs, traces, folder, interrupted=True), baseline, {})
        raise
    sides = {k: t for k, t in traces.items() if k[0] != AA_LABEL}  # the plots show base and head
    report = _write(folder, outcome, baseline, sides if options.with_plots else {})
    return replace(outcome, report=report)


def _run_side(case: Case, side: Side, seed: int, results_dir: Path, options: AbOptions) -> CaseRun:
    """One ordinary run of ``case`` (already the side's variant, and whatever replay arguments it carries)."""
    return run_case(case, side_request(options, side, seed, results_dir))


def side_request(options: AbOptions, side: Side, seed: int, results_dir: Path) -> RunOptions:
    """One side's run of one seed: the base request with the side's code, seed and folder, one replicate, judged
    for the record (its kind "ab": the history never trusts it)."""
    base = options.run
    return base.changed(
        launch={"results_dir": results_dir, "seed": seed, "fault": side.fault, "framework_ref": side.framework_ref,
                "env": {**base.launch.env, **options.env}, "poll_interval_s": options.poll_interval_s,
                "dry_run": False, "confirm": None},
        judge={"replicates": 1, "adaptive_max": None, "fail_fast": False, "purpose": "ab",
               "baseline_path": options.baseline_path or base.judge.baseline_path},
        publish={"step_summary": False, "with_plots": False, "progress": None})


def _side_run(side: Side, seed: int, run: CaseRun) -> SideRun:
    broken = ""
    if run.verdict is not None:  # a run that could not be judged at all (crash, no tracker) cannot be paired
        errors = [r.message for r in run.verdict.results if r.status == ERROR and r.check_id.startswith(("run[",
                                                                                                      "preflight"))]
        broken = "; ".join(errors)
    elif run.status != PASS:
        broken = run.reason or run.status
    return SideRun(side.label, seed, run.status, run.results_dir, broken)


def perturbation_env(baseline: Baseline, environ: Mapping[str, str]) -> dict[str, str]:
    """The environment of an A/A pair's second run, from the paired section (autotest.ab.nudge; none: natural)."""
    return nudge_env(baseline.paired.perturbation, environ) if baseline.paired else {}


def _guarded(outcome: AbOutcome, baseline: Baseline, traces: dict[tuple[str, int], Trace], case: Case
             ) -> AbOutcome:
    """The A/B with its A/A guard: the base against itself again; a guard that moved makes the A/B an ERROR."""
    pairs = [(s, traces[(outcome.base.label, s)], traces[(AA_LABEL, s)]) for s in outcome.verdict.seeds
             if (outcome.base.label, s) in traces and (AA_LABEL, s) in traces]
    guard = judge_paired(baseline.paired, pairs, how_to_calibrate(case))
    verdict = outcome.verdict
    if guard.status == FAIL and verdict.status != ERROR and baseline.paired is not None:
        moved = ", ".join(r.gate_id for r in guard.failed)
        verdict = replace(verdict, status=ERROR, reason=(
            f"the A/A guard (the {outcome.base.label} twice, {baseline.paired.perturbation}) moved beyond the "
            f"paired noise here ({moved}): the noise measured for the baseline does not hold on this runner or "
            f"environment, so no difference can be judged; {how_to_calibrate(case)} here"))
    if baseline.paired is not None and (same := bitwise_pairs(baseline, pairs)):  # the guard checked nothing
        verdict = replace(verdict, warnings=(*verdict.warnings, "A/A guard: " + no_effect_line(
            case, baseline.paired.perturbation, same, len(pairs))))
    return replace(outcome, verdict=verdict, aa_check=guard)


def judge_results_folders(case: Case, baseline: Baseline, seed: int, base_dir: Path, head_dir: Path
                          ) -> PairedVerdict:
    """Two finished runs of one seed judged paired from their results folders (a bisect's ends re-run today)."""
    base, head = _trace_in(case, baseline, base_dir), _trace_in(case, baseline, head_dir)
    if base is None or head is None:
        missing = base_dir if base is None else head_dir
        return PairedVerdict(ERROR, (), (seed,), reason=f"{missing}: no readable metric log")
    return judge_paired(baseline.paired, [(seed, base, head)], how_to_calibrate(case), baseline)


def _trace_of(case: Case, baseline: Baseline, run: CaseRun) -> Trace | None:
    return _trace_in(case, baseline, run.results_dir) if run.results_dir is not None else None


def _trace_in(case: Case, baseline: Baseline, results_dir: Path) -> Trace | None:
    tracker = tracker_copy(results_dir)
    if tracker is None:
        return None
    try:
        return read_trace(tracker, case.tracker.format, dict(baseline.metric_aliases))
    except Exception:  # a log the run's own verdict already called unreadable: the pair is missing, said below
        return None


def _outcome(case: Case, base: Side, head: Side, baseline: Baseline, runs: Sequence[SideRun],
             traces: dict[tuple[str, int], Trace], folder: Path, interrupted: bool = False) -> AbOutcome:
    seeds = sorted({r.seed for r in runs})
    broken = [f"{r.side} seed {r.seed}: {r.reason}" for r in runs if r.reason]
    missing = [f"{label} seed {s}: no readable metric log" for s in seeds for label in (base.label, head.label)
               if (label, s) not in traces and not any(r.seed == s and r.side == label and r.reason for r in runs)]
    pairs = [(s, traces[(base.label, s)], traces[(head.label, s)]) for s in seeds
             if (base.label, s) in traces and (head.label, s) in traces]
    verdict = judge_paired(baseline.paired, pairs, how_to_calibrate(case), baseline)
    problems = broken + missing + (["interrupted before every seed ran"] if interrupted else [])
    if problems:
        verdict = replace(verdict, status=ERROR, reason="; ".join(problems + ([verdict.reason] if verdict.reason
                                                                               else [])))
    return AbOutcome(case.name, base, head, verdict, tuple(runs), folder)


def outcome_document(outcome: AbOutcome) -> dict:
    verdict = outcome.verdict
    return {
        "case": outcome.case, "status": verdict.status, "reason": verdict.reason, "next": verdict.next_step,
        "base": outcome.base.ref, "head": outcome.head.ref, "seeds": list(verdict.seeds),
        "warnings": list(verdict.warnings),
        "triage": [{"rank": f.rank, "rule": f.rule, "primary": f.primary, "next": f.next_step,
                    "suggestion": f.suggestion, "evidence": f.evidence, "why_ranked": f.why_ranked}
                   for f in verdict.triage],
        "measured": [{"hypothesis": m.hypothesis, "measured": m.measured, "holds": m.holds, "finding": m.finding}
                     for m in verdict.measured],
        "gates": [{"gate": r.gate_id, "metric": r.metric, "window": list(r.window), "status": r.status,
                   "mean_difference": r.mean_difference, "threshold": r.threshold, "mde": r.mde,
                   "differences": {str(k): v for k, v in r.differences.items()}, "message": r.message}
                  for r in verdict.results],
        "runs": [{"side": r.side, "seed": r.seed, "golden_verdict": r.status, "reason": r.reason,
                  "results_dir": str(r.results_dir) if r.results_dir else None} for r in outcome.runs],
        **({"split": split_document(outcome.split)} if outcome.split is not None else {}),
        **({"aa_check": {"status": outcome.aa_check.status, "reason": outcome.aa_check.reason,
                         "moved": [r.gate_id for r in outcome.aa_check.failed]}}
           if outcome.aa_check is not None else {}),
    }


def split_document(split: SplitOutcome) -> dict:
    finding = split.finding
    return {
        "side": finding.side, "summary": finding.summary, "next": finding.next_step,
        "pairings": [{"pairing": p.name, "status": p.verdict.status, "reason": p.verdict.reason,
                      "moved": [r.gate_id for r in p.moved], "eval_moved": [r.gate_id for r in p.eval_moved],
                      "gates": [{"gate": r.gate_id, "status": r.status, "mean_difference": r.mean_difference,
                                 "threshold": r.threshold} for r in p.verdict.results]}
                     for p in finding.pairings],
        "runs": [{"trainer": r.trainer, "batches": r.batches, "seed": r.seed, "golden_verdict": r.status,
                  "reason": r.reason, "results_dir": str(r.results_dir) if r.results_dir else None}
                 for r in split.runs],
    }


def _write(folder: Path, outcome: AbOutcome, baseline: Baseline, traces: dict[tuple[str, int], Trace]) -> Path:
    """ab.json, then the plots (from ``traces``; none when empty) and ab.md."""
    from autotest.ab.ab_report import render_ab_report, write_ab_plots

    write_atomic(folder / AB_JSON, json.dumps(outcome_document(outcome), indent=2) + "\n")
    plots = write_ab_plots(folder, outcome, traces) if traces else []
    report = folder / AB_REPORT
    write_atomic(report, render_ab_report(outcome, baseline, plots))
    return report
