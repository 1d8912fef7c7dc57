"""Calibrate a case: preflight, N runs (in parallel), calibrate, self-check, write a candidate; promote.

Each run goes through the same pipeline as ``rl-autotest run`` (:func:`autotest.pipeline.run_case`,
into ``<results>/<case>/calibration-*/run<i>-seed<s>/``), so its folder, verdict, GPU slice and
retries are those of any run. Runs go side by side: threads locally, or one Ray task per run when
a Ray address is given (results folder on a shared filesystem). The
candidate goes beside the current baseline (``<name>.candidate.yaml`` and a ``.candidate.md``
diff report), written atomically; ``promote`` replaces the baseline with it, also atomically.
"""

from __future__ import annotations

import json
import os
import shlex
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from autotest.calibration.golden_shifts import golden_shifts
from autotest.calibration.promote import promote
from autotest.calibration.provenance import commit_the_runs_ran, provenance_of
from autotest.calibration.review import render_report
from autotest.calibration.thresholds import (
    Calibration,
    CalibrationError,
    SelfCheck,
    calibrate,
    leave_one_out,
    sample_size_warnings,
)
from autotest.errors import UsageError
from autotest.files import require_folder, write_atomic
from autotest.history.store import passing_runs
from autotest.inputs.baseline import Baseline, CalibrationSpec, load_baseline
from autotest.inputs.baseline_writer import baseline_yaml
from autotest.inputs.case import Case, case_argument
from autotest.inputs.detect import check_detect_targets
from autotest.inputs.tracker_layout import COPY_NAMES, tracker_copy
from autotest.judge.power import baseline_power, target_misses
from autotest.readers.reading import read_trace
from autotest.judge.seed_use import identical_runs
from autotest.judge.verdict import golden_trace
from autotest.pipeline import RunOptions, run_case
from autotest.report.power_table import power_provenance, power_report
from autotest.report.publish import AfterResults
from autotest.run.framework import checkout, default_cache_dir, framework_request
from autotest.run.framework_spec_read import read_case_spec
from autotest.run.interrupts import describe
from autotest.run.platform import check_platform
from autotest.run.preflight import run_preflight
from autotest.run.ray_tasks import RayCall, RayPlacement, run_on_cluster
from autotest.run.replicates import default_jobs, side_by_side
from autotest.run.results_dir import default_results_root, fresh_folder, require_room, run_stamp

CONFIG_NAME = "config.json"


@dataclass(frozen=True)
class CalibrationOptions:
    #: root of the per-case results folders; None: the one default (autotest.run.results_dir)
    results_root: Path | None = None
    #: number of runs; None: the spec's calibration.runs (default 3)
    runs: int | None = None
    #: runs side by side on this node; None: as many as the CPUs (or the node's GPU slices) allow
    jobs: int | None = None
    #: run each calibration run as a Ray task on this cluster ("local" starts a private one)
    ray_address: str | None = None
    #: where the baseline and its candidate live; None: beside the case's baseline
    baselines_dir: Path | None = None
    allow_dirty: bool = False
    #: replace the baseline with the candidate when the self-check raised no false alarm
    promote: bool = False
    #: build the candidate from the last N passing runs in the history instead of running N times
    from_history: bool = False
    #: the history database URL (None: $RL_AUTOTEST_HISTORY, else <results root>/history.sqlite)
    history: str | None = None
    #: passed to each run's pipeline (the shells record every run in the history this way)
    after_results: AfterResults | None = None
    #: the command line, recorded in the provenance
    command: str = ""
    progress: Callable[[str], None] | None = None
    #: the code under test, resolved for every run as ``run`` resolves it (--framework-repo / --framework-ref)
    framework_repo: str | None = None
    framework_ref: str | None = None
    #: with ``ray_address`` (Ray tasks): the custom resources each task asks for
    ray_resources: dict[str, float] = field(default_factory=dict)
    #: the base request every calibration run derives from (the command's declared flags: Ray jobs, the history
    #: hook, ...); the fields above, where set, take precedence over its own
    run: RunOptions = field(default_factory=RunOptions)


@dataclass(frozen=True)
class RunRecord:
    """One calibration run: where it lives and whether it completed its expected shape."""

    index: int
    seed: int
    results_dir: Path
    tracker: Path | None
    status: str  # PASS (complete) or ERROR
    reasons: tuple[str, ...]
    wall_s: float
    config: Mapping[str, Any] = field(default_factory=dict)
    #: for a run taken from the history: the commits it ran
    framework_sha: str | None = None
    harness_sha: str | None = None
    #: the run's own verdict against the current baseline (for the record: an uncalibrated one is ERROR)
    verdict: str | None = None

    @property
    def label(self) -> str:
        return f"run {self.index} (seed {self.seed})"

    def describe(self) -> str:
        """The progress line's tail: whether the run is usable for calibration, and its own verdict beside it
        (never a bare PASS for a run whose verdict was ERROR)."""
        usable = "complete" if self.status == "PASS" else "ERROR"
        own = f", its verdict against the current baseline {self.verdict} (for the record only)" \
            if self.verdict and self.status == "PASS" else ""
        reasons = f" ({'; '.join(self.reasons)})" if self.reasons else ""
        return f"{usable} in {self.wall_s:.0f} s{own}{reasons}"


@dataclass(frozen=True)
class CalibrationOutcome:
    case: str
    calibration: Calibration
    self_check: SelfCheck
    runs: tuple[RunRecord, ...]
    candidate: Path
    report: Path
    results_dir: Path
    warnings: tuple[str, ...]
    promoted_to: Path | None = None

    @property
    def exit_code(self) -> int:
        """0: candidate written; 1: written, but the self-check found false alarms (review it)."""
        return 1 if self.self_check.false_alarms else 0


def baseline_files(case: Case, baselines_dir: Path | None = None) -> tuple[Path, Path, Path]:
    """(baseline, candidate YAML, candidate report) for ``case`` in ``baselines_dir``."""
    name = Path(case.baseline).name
    target = (Path(baselines_dir) / name) if baselines_dir else case.baseline_path
    stem = target.name.rsplit(".", 1)[0]
    return target, target.with_name(f"{stem}.candidate.yaml"), target.with_name(f"{stem}.candidate.md")


def promote_command(case: Case, baselines_dir: Path | None = None) -> str:
    where = f" --baselines-dir {shlex.quote(str(Path(baselines_dir).resolve()))}" if baselines_dir else ""
    return f"rl-autotest baseline promote {case_argument(case)}{where}"


def load_spec(case: Case, baselines_dir: Path | None = None) -> Baseline:
    """The checks to calibrate: the baseline in ``baselines_dir``, else the case's own baseline."""
    target, _, _ = baseline_files(case, baselines_dir)
    for path in (target, case.baseline_path):
        if path.is_file():
            return load_baseline(path)
    raise UsageError(f"{case.source}: baseline: {case.baseline_path} does not exist; write the checks to "
                     "calibrate there first (a golden 'table: {}' is fine), e.g. like baselines/tiny-grpo.yaml")


def calibration_seeds(case: Case, runs: int) -> tuple[int, ...]:
    """Seeds varied where the case takes one (its seed.calibration), the default repeated otherwise."""
    listed = case.seed.calibration
    if not case.takes_seed or not listed:
        return (case.seed.default,) * runs
    if len(listed) < runs:
        raise UsageError(f"{case.source}: seed.calibration: lists {len(listed)} seeds but {runs} runs were asked; "
                         "add seeds or ask for fewer runs")
    return tuple(listed[:runs])


def calibration_request(options: CalibrationOptions, seed: int, run_dir: Path,
                        baseline_path: Path | None = None) -> RunOptions:
    """One calibration run: the base request with its seed and folder, one replicate, judged for the record."""
    base = options.run
    return base.changed(
        launch={"results_root": options.results_root or base.launch.results_root, "results_dir": run_dir,
                "seed": seed, "fault": None, "dry_run": False, "confirm": None,
                "framework_repo": options.framework_repo or base.launch.framework_repo,
                "framework_ref": options.framework_ref or base.launch.framework_ref},
        judge={"replicates": 1, "adaptive_max": None, "fail_fast": False, "baseline_path": baseline_path,
               "purpose": "calibration"},
        publish={"after_results": options.after_results or base.publish.after_results, "progress": None})


def calibration_run(case: Case, index: int, seed: int, run_dir: Path, request: RunOptions | None = None
                    ) -> RunRecord:
    """One calibration run: the same pipeline as ``rl-autotest run``, into ``run_dir`` (``request``: from
    :func:`calibration_request`; None: the defaults)."""
    run = run_case(case, request or calibration_request(CalibrationOptions(), seed, run_dir))
    verdict = run.verdict
    assert verdict is not None  # the platform was checked and preflight passed before any run
    # calibration needs complete runs; their verdict against the old baseline is for the record only
    broken = [r for r in verdict.results if r.check_id.startswith(("run[", "preflight")) and r.status == "ERROR"]
    tracker = tracker_copy(run_dir)  # tracker.jsonl, trainer_state.json or tensorboard/, as the format is
    reasons = [r.message for r in broken]
    if tracker is None and not reasons:
        reasons.append(f"no copy of the run's {case.tracker.format} metric log in {run_dir} (looked for "
                       f"{', '.join(COPY_NAMES)})")
    config = _saved_config(run_dir, reasons)
    wall_s = float((verdict.context.get("launch") or {}).get("wall_s") or 0.0)
    status = "PASS" if not reasons else "ERROR"
    return RunRecord(index, seed, run_dir, tracker, status, tuple(reasons), wall_s, config, verdict=verdict.status)


def _saved_config(run_dir: Path, problems: list[str]) -> dict[str, Any]:
    """The workload's saved config.json from a results folder ({} when absent; a problem when unreadable)."""
    saved = next(iter(sorted(Path(run_dir).glob(f"run_config/*/{CONFIG_NAME}"))), None)
    if saved is None:
        return {}
    try:
        loaded = json.loads(saved.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        problems.append(f"{saved}: saved config is not readable JSON")
        return {}
    return loaded if isinstance(loaded, dict) else {}


def history_records(case: Case, runs: int, options: CalibrationOptions) -> list[RunRecord]:
    """The last ``runs`` passing runs of ``case`` recorded in the history, as calibration runs."""
    root = options.results_root or default_results_root()
    records = []
    for index, run in enumerate(passing_runs(case.name, runs, options.history, root), start=1):
        problems: list[str] = []
        config = _saved_config(run.results_dir, problems)
        try:
            context = json.loads((run.results_dir / "results.json").read_text(encoding="utf-8")).get("context", {})
        except (OSError, json.JSONDecodeError, AttributeError):
            context = {}
        seed = context.get("seed") if isinstance(context.get("seed"), int) else case.seed.default
        wall_s = float((context.get("launch") or {}).get("wall_s") or 0.0)
        records.append(RunRecord(index, seed, run.results_dir, run.tracker, "ERROR" if problems else "PASS",
                                 tuple(problems), wall_s, config, run.framework_sha, run.harness_sha))
    if len(records) < 2:
        raise UsageError(f"{case.name}: the history holds {len(records)} trusted passing run(s) with trackers on disk; "
                         "calibration needs at least two")
    return records


def run_all(case: Case, seeds: Sequence[int], folder: Path, options: CalibrationOptions,
            baseline_path: Path | None = None) -> list[RunRecord]:
    """Every calibration run, in parallel where resources allow; results in seed order."""
    dirs = [folder / f"run{i + 1}-seed{seed}" for i, seed in enumerate(seeds)]
    say = options.progress or (lambda line: None)
    if options.ray_address:
        return _run_on_ray(case, seeds, dirs, options, say, baseline_path)
    jobs = options.jobs or default_jobs(case, len(seeds))
    say(f"{case.name}: {len(seeds)} calibration runs, {jobs} at a time, in {folder}")

    def one(i: int) -> RunRecord:
        record = calibration_run(case, i + 1, seeds[i], dirs[i],
                                 calibration_request(options, seeds[i], dirs[i], baseline_path))
        say(f"{case.name}: {record.label}: {record.describe()}")
        return record

    try:
        return side_by_side([lambda i=i: one(i) for i in range(len(seeds))], jobs)
    except KeyboardInterrupt as exc:  # side_by_side stopped every run; each published its ERROR verdict
        say(f"{case.name}: interrupted ({describe(exc)}): stopping every calibration run")
        raise


def _run_on_ray(case: Case, seeds: Sequence[int], dirs: Sequence[Path], options: CalibrationOptions,
                say: Callable[[str], None], baseline_path: Path | None) -> list[RunRecord]:
    """Every run as a Ray task (:mod:`autotest.run.ray_tasks`, the dispatch bisect probes use too)."""
    address = options.ray_address
    assert address is not None
    placement = RayPlacement(address, dict(options.ray_resources), num_gpus=float(case.platform.gpus))
    # on the node: no results root of this machine's, no history hook (the database lives here)
    calls = [RayCall(f"run {i + 1} (seed {seed})", dirs[i],
                     partial(calibration_run, case, i + 1, seed, dirs[i], calibration_request(
                         options, seed, dirs[i], baseline_path).changed(launch={"results_root": None},
                                                                         publish={"after_results": None})))
             for i, seed in enumerate(seeds)]
    say(f"{case.name}: {len(seeds)} calibration runs as Ray tasks on {address}")
    return run_on_cluster(calls, placement, say=say, lost=lambda i, why: RunRecord(
        i + 1, seeds[i], dirs[i], None, "ERROR", (f"lost on the Ray cluster: {why}",), 0.0))


def _eval_set_sizes(records: Sequence[RunRecord], metrics: set[str]) -> dict[str, int]:
    """Eval-set sizes a workload recorded in its saved config: ``eval_set_size`` (int or metric -> int)."""
    sizes: dict[str, int] = {}
    for record in records:
        value = record.config.get("eval_set_size")
        if isinstance(value, int) and not isinstance(value, bool):
            sizes.update({m: value for m in metrics if m.startswith("eval/")})
        elif isinstance(value, dict):
            sizes.update({m: v for m, v in value.items() if m in metrics and isinstance(v, int)})
    return sizes


def calibrate_case(case: Case, options: CalibrationOptions) -> CalibrationOutcome:
    """Run ``case`` N times and write a candidate baseline with its diff report (see the module doc)."""
    base = options.run.launch  # the base request's root and code under test, unless the options name their own
    options = replace(options, results_root=options.results_root or base.results_root,
                      framework_repo=options.framework_repo or base.framework_repo,
                      framework_ref=options.framework_ref or base.framework_ref)
    # the code under test is resolved as `run` resolves it, once: the ref becomes one sha that every run checks
    # out (a ref that moves mid-calibration cannot mix commits); the provenance is what the runs recorded
    request = None if options.from_history else framework_request(
        case, os.environ, repo=options.framework_repo, ref=options.framework_ref)
    platform = check_platform(case, checkout_pending=request is not None)
    if not platform.runnable:
        raise UsageError(f"{case.name}: cannot calibrate here: {platform.skip_reason}")
    environ, framework = dict(os.environ), None
    if request is not None:
        framework = checkout(request, default_cache_dir(environ))
        environ[request.env] = framework.path
        options = replace(options, framework_ref=framework.sha)
    preflight = run_preflight(case, framework.path if framework else platform.framework_dir, environ,
                              framework.to_dict() if framework else None)
    commit = preflight.commit
    # from the history, each run names its own commit; otherwise the tree here (or the checkout) is what runs
    if (commit.dirty or commit.sha is None) and not (options.allow_dirty or options.from_history):
        state = "has uncommitted changes" if commit.dirty else f"is unknown ({commit.reason})"
        raise UsageError(f"{commit.repo_dir}: the commit under test {state}; a baseline must name the exact "
                         "code it came from: commit first, or pass --allow-dirty")
    if preflight.missing_inputs:
        listed = ", ".join(f"{s.name}={s.path or s.raw}" for s in preflight.missing_inputs)
        raise UsageError(f"{case.source}: inputs: missing {listed}; export the share roots or fix the paths")
    if options.baselines_dir is not None:  # before the runs: a bad destination must not cost N runs
        require_folder(Path(options.baselines_dir), "--baselines-dir")
    spec = load_spec(case, options.baselines_dir)
    check_detect_targets(case.detect, [c.metric for c in spec.checks], case.source, spec.path)  # before N runs
    settings = spec.calibration or CalibrationSpec()
    runs = options.runs or settings.runs
    if runs < 2:
        raise UsageError(f"--runs: {runs} is below 2; run-to-run noise needs at least two runs")
    target, candidate_path, report_path = baseline_files(case, options.baselines_dir)
    if not options.from_history:  # N runs need N runs' room: refused before the first, not after the last
        require_room(options.results_root or default_results_root(), runs=runs)

    folder = fresh_folder(Path(options.results_root or default_results_root()).resolve() / case.name,
                          f"calibration-{run_stamp()}")
    write_atomic(folder / "preflight.json", json.dumps(preflight.to_dict(), indent=2) + "\n")
    if options.from_history:
        records = history_records(case, runs, options)
    else:
        records = run_all(case, calibration_seeds(case, runs), folder, options, spec.path)
    broken = [r for r in records if r.status != "PASS"]
    if broken:
        detail = "; ".join(f"{r.label}: {'; '.join(r.reasons) or 'failed'} (logs: {r.results_dir / 'logs'})"
                           for r in broken)
        raise CalibrationError(f"{case.name}: {len(broken)} of {len(records)} calibration runs did not complete, "
                               f"nothing written: {detail}")
    traces = [read_trace(r.tracker, case.tracker.format) for r in records if r.tracker is not None]
    labels = [r.label for r in records]
    copies = identical_runs([(r.label, r.seed, t) for r, t in zip(records, traces)])
    if copies is not None:  # no noise to measure: every threshold would collapse onto its floor
        raise CalibrationError(f"{case.name}: {copies.message}; nothing written")
    sizes = _eval_set_sizes(records, {c.metric for c in spec.checks})
    calibration = calibrate(spec, traces, settings=settings, eval_set_size=sizes)
    self_check = leave_one_out(spec, traces, labels, settings=settings, eval_set_size=sizes)
    warnings = tuple(sample_size_warnings(len(traces), settings.margin, self_check))

    previous = load_baseline(target) if target.is_file() else None
    old_golden, old_note = None, ""
    if previous is not None:
        try:
            old_golden = golden_trace(previous)
        except UsageError as exc:
            old_note = f"the current baseline's golden values could not be read: {exc}"
    ran = None if options.from_history else commit_the_runs_ran(case, records)
    if ran is not None and framework is not None:  # the ref as asked (the runs were given its sha)
        ran = {**ran, "ref": framework.ref}
    # the framework's own spec for the case, read at the commit the runs ran (the checkout the preflight names; runs
    # from the history each name their own commit, so none is read for them)
    reading = None if options.from_history else read_case_spec(
        case, preflight.commit.repo_dir if preflight.commit.sha else None)
    provenance = provenance_of(case, options, preflight, records, settings, self_check, calibration, folder, ran,
                               reading.provenance() if reading is not None else None)
    candidate = replace(calibration.baseline, path=candidate_path, provenance=provenance)
    powers = baseline_power(candidate)  # what each gate can catch: recorded beside how it was made
    candidate = replace(candidate, provenance={**provenance, "power": power_provenance(powers)})
    warnings = (*warnings, *(f"power: {line}" for line in target_misses(powers, case.detect, case.replicates)))
    text = baseline_yaml(candidate, header=f"Golden baseline of {case.name}, made by `{provenance['command']}`; "
                                           "do not hand-edit thresholds, recalibrate (see docs/calibration.md).")
    report = render_report(replace(calibration, baseline=candidate), self_check,
                           golden_shifts(old_golden, candidate), previous, old_note, warnings,
                           candidate_path, target, promote_command(case, options.baselines_dir),
                           power=power_report(powers, case.detect))
    write_atomic(folder / "candidate.yaml", text)
    write_atomic(folder / "report.md", report)
    load_baseline(folder / "candidate.yaml")  # what is written must read back, before it goes beside the baseline
    write_atomic(candidate_path, text)
    write_atomic(report_path, report)
    outcome = CalibrationOutcome(case.name, replace(calibration, baseline=candidate), self_check, tuple(records),
                                 candidate_path, report_path, folder, warnings)
    if options.promote and outcome.exit_code == 0:
        outcome = replace(outcome, promoted_to=promote(target).path)
    return outcome
