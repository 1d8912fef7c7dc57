"""Before a run launches: its results folder, preflight, baseline, launch spec and card, and what stops it.

:func:`prepare` is the part of :func:`autotest.pipeline.single.run_single` that spends no GPU time: everything
here is written into the results folder (``preflight.json``, ``card.md``) whether or not the run then launches.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, replace
from pathlib import Path

from autotest.errors import UsageError
from autotest.files import make_folder, write_atomic
from autotest.inputs.baseline import load_baseline
from autotest.judge.tier import tier_baseline, tier_record
from autotest.judge.step_looks import with_step_looks
from autotest.inputs.baseline_model import Baseline, for_hardware, in_shadow
from autotest.inputs.case import Case
from autotest.inputs.detect import check_detect_targets
from autotest.judge.trace import Trace
from autotest.judge.spec_diff import SpecComparison, spec_comparison
from autotest.judge.verdict import golden_trace
from autotest.pipeline.options import RunOptions
from autotest.run.card import card_criteria, hardware_thresholds, render_card
from autotest.run.framework import Checkout
from autotest.run.framework_spec_read import SpecReading, follow_baseline, follow_problem
from autotest.run.launch import LaunchSpec, launch_spec
from autotest.run.preflight import Preflight, run_preflight
from autotest.run.recipe_guard import hold_recipe
from autotest.run.results_dir import new_results_dir
from autotest.run.resume_launch import checkpoint_args


@dataclass(frozen=True)
class Prepared:
    """What a run needs before launching; ``problems`` stop it at preflight."""

    case: Case
    results_dir: Path
    work_dir: Path
    preflight: Preflight
    baseline: Baseline | None
    golden: Trace | None
    spec: LaunchSpec | None
    card: str
    problems: tuple[str, ...]
    context: dict
    #: the framework's own spec at the commit under test against the baseline (None: the case names none)
    spec_note: SpecComparison | None = None


def prepare(case: Case, options: RunOptions, framework: Checkout | None, refused: tuple[str, ...],
            reading: SpecReading | None = None, own: Case | None = None) -> Prepared:
    """The results folder, preflight, baseline (as the framework's spec and the node's hardware hold it), launch
    spec and card of one run, and every problem that stops it before launch (``refused``: the caller's own)."""
    launch = options.launch
    results_dir = launch.results_dir or new_results_dir(case, launch.results_root, fault=launch.fault)
    results_dir = Path(results_dir).resolve()
    work_dir = make_folder(results_dir / "work")
    environ = {**os.environ, **launch.env}
    preflight = run_preflight(case, Path(framework.path) if framework else None, environ,
                              framework=framework.to_dict() if framework else None)
    write_atomic(results_dir / "preflight.json", json.dumps(preflight.to_dict(), indent=2) + "\n")
    baseline, golden, baseline_error, spec_note, tier = None, None, None, None, None
    try:
        # per-hardware thresholds (time/step, wall time) picked by this node's GPU fingerprint
        baseline = for_hardware(load_baseline(options.judge.baseline_path or case.baseline_path),
                                preflight.environment.get("gpu"))
        # compared as the baseline is written (and picked for this node), then held as the case says
        spec_note = spec_comparison(reading, baseline, own or case) if reading is not None else None
        baseline = follow_baseline(baseline, reading)
        if case.shadow:  # a case in shadow: judged and recorded, never failing the job
            baseline = in_shadow(baseline)
        if launch.tier:  # a shorter tier: only the gates its steps hold, and what it gave up
            tier = tier_record(launch.tier, baseline, case.expected.steps, options.judge.replicates or 1)  # one seed
            baseline = tier_baseline(baseline, case.expected.steps)
        if options.judge.fail_fast:  # pooled gates looked at before their window ends, the budget spent over the looks
            baseline = with_step_looks(baseline)
        golden = golden_trace(baseline)
    except UsageError as exc:
        baseline_error = str(exc)
        if spec_note is None and reading is not None:
            spec_note = spec_comparison(reading, None, own or case)
    detect_error = None
    try:  # a detect: typo fails fast, naming the metric, before any launch
        if baseline is not None:
            check_detect_targets(case.detect, [c.metric for c in baseline.checks], case.source, baseline.path)
    except UsageError as exc:
        detect_error = str(exc)
    spec, spec_error = None, None
    try:
        spec = launch_spec(case, work_dir, seed=launch.seed, fault=launch.fault,
                           extra_args=checkpoint_args(case, work_dir, seed=launch.seed, fault=launch.fault,
                                                      environ=environ),  # the resume phase's checkpoint
                           environ=environ)
        spec = replace(spec, env={**launch.env, **spec.env})
    except UsageError as exc:
        spec_error = str(exc)
    criteria = card_criteria(baseline, baseline_error) + ([spec_note.headline()] if spec_note is not None else [])
    card = render_card(case, preflight, criteria, spec=spec)
    write_atomic(results_dir / "card.md", card)
    context = {"results_dir": str(results_dir), "work_dir": str(work_dir), "card": str(results_dir / "card.md"),
               "commit": preflight.commit.to_dict(), "harness_commit": preflight.harness.to_dict(),
               "seed": launch.seed if launch.seed is not None else case.seed.default, "fault": launch.fault,
               "kind": options.kind, "framework": framework.to_dict() if framework else None,
               "hardware_thresholds": hardware_thresholds(baseline), **({"tier": tier} if tier else {})}
    problems = [*refused, *(m for m in (baseline_error, detect_error, spec_error, follow_problem(reading)) if m)]
    problems += preflight.requirement_problems(case)
    if spec is not None and not refused:  # the config held against the case, resolved in the framework's Python
        guard = hold_recipe(case, spec.cwd, {**environ, **spec.env})
        problems += guard.problems
        if case.recipe is not None:
            context["recipe"] = guard.to_dict()
        if guard.tracker_format is not None:
            case = replace(case, tracker=replace(case.tracker, format=guard.tracker_format))
    problems += [f"input {s.name} is missing: {s.path or s.raw} ({s.reason})" for s in preflight.missing_inputs]
    return Prepared(case, results_dir, work_dir, preflight, baseline, golden, spec, card, tuple(problems), context,
                     spec_note)
