"""A whole bisect: re-check both ends today, multisect the commits between, and write bisect.json / bisect.md.

Before any search the good and the bad ref are run again on today's environment. If the good one now fails,
the environment changed (image, dependency, data), not the code, and bisecting would blame an innocent commit
(the two ends' runs are then judged against each other by the paired A/B gates: did the code between them move
training too?); if the bad one now passes, the failure does not reproduce. Either stops the bisect with its evidence (exit 1).
Then each round probes up to P commits side by side (:mod:`autotest.bisect.search`), each judged by
:mod:`autotest.bisect.probe`; the state is written after every round, so an interrupted bisect leaves what it
learnt. Exit 0: first bad commit found; 1: environment changed, not reproducible, or budget spent; 2: error.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import Any

from autotest.ab.interleave import judge_results_folders
from autotest.bisect.commits import Commit, commits_between, history_dir
from autotest.bisect.probe import ProbeResult, probe
from autotest.bisect.search import BAD, GOOD, SKIPPED, SearchState, next_probes, record, rounds_needed, start
from autotest.errors import UsageError
from autotest.files import write_atomic
from autotest.inputs.baseline import load_baseline
from autotest.inputs.case import Case
from autotest.judge.model import FAIL, PASS
from autotest.pipeline import RunOptions
from autotest.report.md_safe import md_code, md_text
from autotest.run.framework import check_ref, default_cache_dir, framework_request
from autotest.run.ray_tasks import RayCall, RayPlacement, attempts, run_on_cluster
from autotest.run.replicates import side_by_side
from autotest.run.results_dir import default_results_root, fresh_folder, run_stamp

FOUND, ENVIRONMENT, NOT_REPRODUCIBLE, BUDGET, UNRESOLVED = (
    "found", "environment_changed", "not_reproducible", "budget_exhausted", "unresolved")
_RANK = {"high": 2, "medium": 1, "low": 0}


@dataclass(frozen=True)
class BisectOptions:
    good: str
    bad: str
    repo: str | None = None
    all_commits: bool = False
    #: probes side by side (cores on CPU, GPU slices on a node)
    slots: int = 2
    #: stop after this many training runs (None: no budget)
    max_runs: int | None = None
    #: stop once the probes have cost this many device-seconds (None: no budget)
    max_device_seconds: float | None = None
    #: called with the round's probe folders once the round is written (the nightly records them in the history)
    after_round: Callable[[list[Path]], object] | None = None
    results_root: Path | None = None
    seed: int | None = None
    progress: Callable[[str], None] | None = None
    run_options: RunOptions = field(default_factory=RunOptions)
    #: probe as Ray tasks on this cluster, each on a node with these resources (None: on this node)
    ray: RayPlacement | None = None
    #: answers each judged probe again from its gates (a bisect from a drift: which side of the shift it lies on,
    #: where the per-run gates pass on both); None: the gates' own answer
    answer: Callable[[ProbeResult], ProbeResult] | None = None


@dataclass
class BisectOutcome:
    status: str
    folder: Path
    first_bad: Commit | None = None
    last_good: str | None = None
    confidence: str | None = None
    rounds: int = 0
    probes: list[ProbeResult] = field(default_factory=list)
    commits: list[Commit] = field(default_factory=list)
    flipped: list[dict[str, Any]] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    message: str = ""

    @property
    def runs(self) -> int:
        return sum(p.runs for p in self.probes)

    @property
    def device_seconds(self) -> float:
        """Wall x devices of every probe's runs (:mod:`autotest.report.cost`)."""
        return round(sum(p.device_seconds for p in self.probes), 1)

    @property
    def exit_code(self) -> int:
        return 0 if self.status == FOUND else 1


def bisect(case: Case, options: BisectOptions) -> BisectOutcome:
    say = options.progress or (lambda line: None)
    if options.slots < 1:
        raise UsageError(f"--jobs: {options.slots} is below 1")
    check_ref(options.good, "--good")  # before either reaches git, under its own flag
    check_ref(options.bad, "--bad")
    request = framework_request(case, os.environ, repo=options.repo, ref=options.bad)
    if request is None:
        raise UsageError(f"{case.source}: platform.framework: bisect needs the framework repository: set "
                         "platform.framework.repo or pass --framework-repo")
    git_dir = history_dir(request.repo, default_cache_dir(os.environ) / f"{request.name}-history")
    commits = commits_between(git_dir, options.good, options.bad, all_commits=options.all_commits)
    # made only once the bisect can start: a refused one leaves no empty results folder
    folder = fresh_folder(Path(options.results_root or default_results_root()).resolve() / case.name,
                          f"bisect-{run_stamp()}")
    outcome = BisectOutcome(status=UNRESOLVED, folder=folder, commits=commits, last_good=options.good)
    say(f"[bisect {case.name}] {len(commits)} commit(s) after {options.good} up to {options.bad}; "
        f"{options.slots} probe(s) a round: about {rounds_needed(len(commits), options.slots)} round(s) "
        f"(one at a time: {rounds_needed(len(commits), 1)}); results in {folder}")

    def run_round(targets: Sequence[str], label: str) -> list[ProbeResult]:
        folders = [folder / "probes" / f"{label}-{c[:12]}" for c in targets]
        if options.ray is not None:
            ray_options = _run_options(options).changed(publish={"progress": None})  # the line would stay on the node
            calls = [RayCall(f"{label} {c[:12]}", f, partial(probe, case, c, request.repo, f, ray_options))
                     for c, f in zip(targets, folders)]
            found = run_on_cluster(calls, options.ray, say=say, lost=lambda i, why: ProbeResult(
                targets[i], SKIPPED, "high", 0, 0.0, reason=f"lost on the Ray cluster: {why}"))
            found = [replace(p, nodes=tuple(a["node_id"] for a in attempts(f))) for p, f in zip(found, folders)]
        else:
            tasks = [partial(probe, case, c, request.repo, f, _run_options(options)) for c, f in zip(targets, folders)]
            found = side_by_side(tasks, min(options.slots, len(tasks)))
        if options.answer is not None:
            found = [p if p.answer == SKIPPED else options.answer(p) for p in found]
        outcome.probes.extend(found)
        for p in found:
            moved = f"; re-ran on node {p.nodes[-1][:8]} after node {p.nodes[0][:8]} was lost" if len(p.nodes) > 1 else ""
            say(f"[bisect {case.name}] {label} {p.commit[:12]}: {p.answer} ({p.confidence}; {p.runs} run(s)): "
                f"{p.reason}{moved}")
        _write(outcome, case)
        if options.after_round is not None:
            options.after_round(folders)
        return found

    try:
        good_now, bad_now = run_round([options.good, commits[-1].sha], "ends")
        if good_now.answer == SKIPPED or bad_now.answer == SKIPPED:
            broken = good_now if good_now.answer == SKIPPED else bad_now
            raise UsageError(f"bisect: {broken.commit} cannot be judged today ({broken.reason}); "
                             "fix the case or pick other ends")
        if good_now.answer == BAD:
            outcome.status = ENVIRONMENT
            outcome.message = (f"the environment changed, not the code: the good ref {options.good} fails today "
                               f"({good_now.reason}); compare this machine's environment with the good run's "
                               "(image, packages, data) before blaming a commit; "
                               + ends_paired(case, options, good_now, bad_now))
            return _finish(outcome, case)
        if bad_now.answer == GOOD:
            outcome.status = NOT_REPRODUCIBLE
            outcome.message = (f"not reproducible: the bad ref {options.bad} passes today ({bad_now.reason}); the "
                               "failure came from the environment of that run, or it is rarer than one run shows")
            return _finish(outcome, case)
        state = start([c.sha for c in commits])
        results = {commits[-1].sha: bad_now, options.good: good_now}
        while not state.done:
            if options.max_runs is not None and outcome.runs >= options.max_runs:
                outcome.status = BUDGET
                outcome.message = (f"budget of {options.max_runs} runs spent; the first bad commit lies in "
                                   f"{_interval(state, commits, options.good)}")
                return _finish(outcome, case, state, results)
            if options.max_device_seconds is not None and outcome.device_seconds >= options.max_device_seconds:
                outcome.status = BUDGET
                outcome.message = (f"budget of {options.max_device_seconds:.0f} device-seconds spent; the first bad "
                                   f"commit lies in {_interval(state, commits, options.good)}")
                return _finish(outcome, case, state, results)
            picks = next_probes(state, options.slots)
            outcome.rounds += 1
            found = run_round([state.commits[i] for i in picks], f"round{outcome.rounds}")
            results.update({p.commit: p for p in found})
            state = record(state, {i: p.answer for i, p in zip(picks, found)})
        outcome.status = FOUND
        return _finish(outcome, case, state, results)
    except BaseException:
        outcome.status = "interrupted" if outcome.status == UNRESOLVED else outcome.status
        _write(outcome, case)
        raise


def ends_paired(case: Case, options: BisectOptions, good: ProbeResult, bad: ProbeResult) -> str:
    """Whether the code between the ends moved training today, beside the environment: the two ends' runs (one
    seed) judged by the paired A/B gates, so the golden's environment is out of the comparison."""
    seed = options.seed if options.seed is not None else case.seed.default
    try:
        baseline = load_baseline(options.run_options.judge.baseline_path or case.baseline_path)
    except UsageError as exc:
        return f"the ends were not judged paired ({exc})"
    verdict = judge_results_folders(case, baseline, seed, Path(good.results_dir), Path(bad.results_dir))
    if verdict.status == PASS:
        return (f"paired against each other today (seed {seed}), the good and the bad ref train alike within the A/A "
                "noise: the code between them moved nothing the paired gates see; recalibrate the golden on "
                "today's environment")
    if verdict.status == FAIL:
        moved = ", ".join(r.gate_id for r in verdict.failed)
        return (f"paired against each other today (seed {seed}), the bad ref also trains apart from the good one "
                f"beyond the A/A noise ({moved}): a code change is there too; recalibrate on today's "
                "environment, then bisect again")
    return f"the ends were not judged paired ({verdict.reason or 'a paired gate could not be decided'})"


def _run_options(options: BisectOptions) -> RunOptions:
    return options.run_options.changed(launch={"seed": options.seed}, publish={"with_plots": False})


def _interval(state: SearchState, commits: Sequence[Commit], good: str) -> str:
    low = commits[state.lo].sha[:12] if state.lo >= 0 else good
    return f"({low}, {commits[state.hi].sha[:12]}]"


def _finish(outcome: BisectOutcome, case: Case, state: SearchState | None = None,
            results: dict[str, ProbeResult] | None = None) -> BisectOutcome:
    if state is not None and results is not None:
        by_sha = {c.sha: c for c in outcome.commits}
        outcome.skipped = [p.commit for p in outcome.probes if p.answer == SKIPPED]
        if outcome.status == FOUND:
            outcome.first_bad = by_sha[state.first_bad]
            if state.lo >= 0:
                outcome.last_good = state.commits[state.lo]
            good_probe = results.get(outcome.last_good or "")
            bad_probe = results[state.first_bad]
            outcome.confidence = min((p.confidence for p in (good_probe, bad_probe) if p is not None),
                                     key=_RANK.__getitem__, default="low")
            outcome.flipped = _flipped(good_probe, bad_probe)
            ambiguous = state.skipped_between
            outcome.message = (f"first bad commit {outcome.first_bad.short()}" + (
                f"; {len(ambiguous)} skipped commit(s) just before it could also be the cause: "
                + ", ".join(s[:12] for s in ambiguous) if ambiguous else ""))
    _write(outcome, case)
    return outcome


def _flipped(good: ProbeResult | None, bad: ProbeResult) -> list[dict[str, Any]]:
    """The gates that pass at the last good probe and fail at the first bad one, with both values."""
    rows = []
    for check_id, (status, observed, threshold) in bad.gates.items():
        before = good.gates.get(check_id) if good is not None else None
        if status == "FAIL" and (before is None or before[0] != "FAIL"):
            rows.append({"check": check_id, "threshold": threshold, "good": before[1] if before else None,
                         "bad": observed})
    return rows


def _write(outcome: BisectOutcome, case: Case) -> None:
    data = {
        "case": case.name, "status": outcome.status, "message": outcome.message,
        "first_bad": None if outcome.first_bad is None else {
            "sha": outcome.first_bad.sha, "subject": outcome.first_bad.subject, "author": outcome.first_bad.author},
        "last_good": outcome.last_good, "confidence": outcome.confidence, "rounds": outcome.rounds,
        "runs": outcome.runs, "device_seconds": outcome.device_seconds,
        "flipped_gates": outcome.flipped, "skipped": outcome.skipped,
        "commits": [{"sha": c.sha, "subject": c.subject, "author": c.author} for c in outcome.commits],
        "probes": [p.to_dict() for p in outcome.probes], "written_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }
    write_atomic(outcome.folder / "bisect.json", json.dumps(data, indent=2) + "\n")
    write_atomic(outcome.folder / "bisect.md", render_bisect(data))


def render_bisect(data: dict[str, Any]) -> str:
    """bisect.md. A commit's subject and author are anyone's text (as are refs and messages quoting them): each is
    markdown-inert (:mod:`autotest.report.md_safe`), never a heading, a link, HTML or a code span of its own."""
    lines = [f"# Bisect {md_text(data['case'])}: {data['status']}", "", md_text(data["message"] or "(in progress)"), ""]
    first = data["first_bad"]
    if first:
        lines += [f"- first bad commit: {md_code(first['sha'])} {md_text(first['subject'])} "
                  f"({md_text(first['author'])})",
                  f"- last good: {md_code(data['last_good'])}; confidence: {data['confidence']}"]
    lines += [f"- rounds: {data['rounds']}, training runs: {data['runs']}, device-seconds: {data['device_seconds']}",
              ""]
    if data["flipped_gates"]:
        lines += ["## Gates that flip at the first bad commit", "", "| gate | threshold | last good | first bad |",
                  "|---|---|---|---|"]
        lines += [f"| {md_code(r['check'])} | {r['threshold']} | {r['good']} | {r['bad']} |"
                  for r in data["flipped_gates"]]
        lines.append("")
    lines += ["## Probes", "", "| commit | answer | confidence | runs | why |", "|---|---|---|---|---|"]
    lines += [f"| {md_code(p['commit'][:12])} | {p['answer']} | {p['confidence']} | {p['runs']} | "
              f"{md_text(p['reason'])} |"
              for p in data["probes"]]
    return "\n".join(lines) + "\n"
