"""``rl-autotest calibrate CASE --paired``: the paired noise of a case, measured on A/A pairs.

An A/A pair is the same code twice on one seed. On a GPU the second run differs by the platform's own
non-determinism (atomics, kernel choice); on CPU a trainer is usually bitwise deterministic, so the second run of
a pair is nudged (:mod:`autotest.ab.nudge`): the embedded workloads read ``RL_AUTOTEST_AA_PERTURB=1`` and nudge
their initial weights at one-ulp scale (autotest.workloads.perturb); any other trainer gets the harness-made
``optimizer-ulp:1`` (10% of the weights one ulp at the first optimizer step, no trainer edit), or whatever
``--perturbation`` or the baseline's ``paired.perturbation`` names. The two runs share data order and sampling
streams and part the way real runs do. A pair whose two runs agree bitwise on every paired metric is one warning
line: the nudge had no effect, and which to set instead.

The pairs' noise (:func:`autotest.judge.paired.measure_paired`) goes into the ``paired:`` section of a candidate
beside the baseline (``<name>.candidate.yaml``, everything else unchanged) and, with ``promote``, into the baseline.
"""

from __future__ import annotations

import datetime as dt
import os
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

from autotest.ab.nudge import default_perturbation, no_effect_line, nudge_env
from autotest.calibration.promote import promote
from autotest.calibration.runs import baseline_files, calibration_seeds, load_spec
from autotest.errors import UsageError
from autotest.files import write_atomic
from autotest.inputs.aa_nudge import FORMS, nudge_problem
from autotest.inputs.baseline import load_baseline
from autotest.inputs.baseline_writer import baseline_yaml
from autotest.inputs.case import Case
from autotest.inputs.tracker_layout import tracker_copy
from autotest.judge.model import ERROR
from autotest.judge.paired import bitwise_pairs, measure_paired, paired_mde, paired_threshold
from autotest.judge.verdict import golden_trace
from autotest.pipeline import RunOptions, run_case
from autotest.readers.reading import read_trace
from autotest.run.results_dir import default_results_root, fresh_folder, run_stamp


@dataclass(frozen=True)
class PairedCalibrationOptions:
    runs: int | None = None
    results_root: Path | None = None
    baselines_dir: Path | None = None
    promote: bool = False
    progress: Callable[[str], None] | None = None
    #: how each pair's second run is nudged (autotest.inputs.aa_nudge); None: autotest.ab.nudge's default
    perturbation: str | None = None
    #: the base request every A/A run derives from (the command's declared flags: Ray, the history hook, ...)
    run: RunOptions = field(default_factory=RunOptions)


@dataclass(frozen=True)
class PairedCalibrationOutcome:
    candidate: Path
    folder: Path
    lines: tuple[str, ...]
    warnings: tuple[str, ...]
    promoted_to: Path | None = None


def calibrate_paired(case: Case, options: PairedCalibrationOptions) -> PairedCalibrationOutcome:
    baseline = load_spec(case, options.baselines_dir)
    if not baseline.golden_table and baseline.golden_tracker is None:
        raise UsageError(f"{baseline.path}: golden: empty; calibrate the case first (`rl-autotest calibrate`), "
                         "then its paired noise")
    runs = options.runs or (baseline.calibration.runs if baseline.calibration else 3)
    if runs < 2:
        raise UsageError(f"--runs: {runs} is below 2; paired noise needs at least two A/A pairs")
    seeds = calibration_seeds(case, runs)
    if len(set(seeds)) < len(seeds):  # a pair repeated on one seed measures one difference twice, not the noise
        raise UsageError(f"{case.source}: seed.calibration: paired noise needs {runs} distinct seeds, one per A/A "
                         f"pair, and the case gives {sorted(set(seeds))}; list them (e.g. seed.calibration: "
                         f"{list(range(runs))}) or ask for fewer --runs")
    perturbation = options.perturbation or default_perturbation(case, baseline)
    if (problem := nudge_problem(perturbation)) is not None:
        raise UsageError(f"--perturbation: {problem}; write one of {FORMS}")
    perturbation = perturbation.strip()
    root = options.results_root or options.run.launch.results_root or default_results_root()
    folder = fresh_folder(Path(root).resolve() / case.name,
                          f"aa-{run_stamp()}")
    say = options.progress or (lambda line: None)
    say(f"{case.name}: {runs} A/A pairs (the second run of each nudged: {perturbation}) in {folder}")
    environ = {**os.environ, **case.launch.env, **options.run.launch.env}
    pairs = []
    for seed in seeds:
        aliases = dict(baseline.metric_aliases)
        first = _run(case, pair_request(options.run, seed, folder / f"a-seed{seed}", {}), aliases)
        second = _run(case, pair_request(options.run, seed, folder / f"a2-seed{seed}",
                                         nudge_env(perturbation, environ)), aliases)
        pairs.append((seed, first, second))
        say(f"{case.name}: A/A pair seed {seed} done")
    measurement = measure_paired(baseline, golden_trace(baseline), pairs, perturbation,
                                 budget=baseline.calibration.false_alarm_budget if baseline.calibration else 0.05)
    if same := bitwise_pairs(baseline, pairs):
        measurement = replace(measurement, warnings=(no_effect_line(case, perturbation, same, len(pairs)),
                                                     *measurement.warnings))
    spec = measurement.spec
    if not spec.windows:
        raise UsageError(f"{case.name}: no paired gate could be measured ({'; '.join(measurement.warnings)})")
    provenance = {**baseline.provenance, "paired": {
        "date": dt.date.today().isoformat(), "pairs": runs, "seeds": list(seeds), "results": folder.name}}
    candidate_baseline = replace(baseline, paired=spec, provenance=provenance)
    target, candidate, _ = baseline_files(case, options.baselines_dir)
    write_atomic(candidate, baseline_yaml(candidate_baseline, header=(
        f"candidate: {case.name}'s baseline with paired noise from {runs} A/A pairs (rl-autotest calibrate "
        "--paired); everything else is the current baseline's")))
    load_baseline(candidate)  # what was written reads back, or this is a harness bug worth a traceback
    lines = tuple(f"{w.gate_id}: A/A noise {w.noise:.3g}, threshold at K=1 {paired_threshold(spec, w, 1):.3g}, "
                  f"MDE K=1 {paired_mde(spec, w, 1):.3g}, K=4 {paired_mde(spec, w, 4):.3g}" for w in spec.windows)
    promoted = promote(target).path if options.promote else None
    return PairedCalibrationOutcome(candidate, folder, lines, measurement.warnings, promoted)


def pair_request(base: RunOptions, seed: int, run_dir: Path, env: dict[str, str]) -> RunOptions:
    """One run of an A/A pair: the base request on the case's own code, one replicate, its kind "ab"."""
    return base.changed(
        launch={"results_dir": run_dir, "seed": seed, "env": {**base.launch.env, **env}, "fault": None,
                "dry_run": False, "confirm": None},
        judge={"replicates": 1, "adaptive_max": None, "fail_fast": False, "purpose": "ab"},
        publish={"step_summary": False, "with_plots": False, "progress": None})


def _run(case: Case, request: RunOptions, aliases: dict[str, str]):
    run = run_case(case, request)
    run_dir = request.launch.results_dir
    assert run_dir is not None
    broken = [r.message for r in (run.verdict.results if run.verdict else ()) if r.status == ERROR
              and r.check_id.startswith(("run[", "preflight"))]
    tracker = tracker_copy(run_dir)
    if broken or tracker is None:
        reason = "; ".join(broken) or "no metric log was copied"
        raise UsageError(f"{case.name}: A/A run {run_dir.name} could not be used ({reason}); see {run_dir}")
    return read_trace(tracker, case.tracker.format, aliases)
