"""``rl-autotest calibrate`` (N runs → candidate baseline), ``baseline promote`` and ``power``.

``calibrate`` exits 0 when the candidate is written (and promoted when asked), 1 when it is written but the
leave-one-out self-check raised false alarms (review it), 2 on error. The calibration package is imported
when a command runs, never for ``--help``.
"""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path

from autotest.cli.common import CASE_HELP, EXIT_ERROR, EXIT_FAIL, EXIT_PASS, HISTORY_HELP
from autotest.cli.flags import add_declared, base_request, ray_resources
from autotest.errors import UsageError
from autotest.terminal import echo


def add_calibrate_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("calibrate", help="run a case N times and write a candidate baseline from the noise",
                       description="Run CASE N times, set golden = mean, per-step checks' thresholds = max "
                                   "run-to-run deviation x margin and pooled checks' = a t quantile for the "
                                   "case's false-alarm budget x the statistic's spread (floors apply), and write "
                                   "<baseline>.candidate.yaml with a diff report beside the baseline.")
    p.add_argument("case", help=CASE_HELP)
    add_declared(p, "calibrate")
    p.add_argument("--paired", action="store_true",
                   help="measure the paired (A/B) noise instead: N A/A pairs (the same seed twice, the second "
                        "run nudged), written as the candidate's paired: section; the checks are unchanged")
    p.add_argument("--promote", action="store_true",
                   help="also replace the baseline with the candidate (only when the self-check is clean)")
    p.add_argument("--from-history", action="store_true",
                   help="build the candidate from the last passing runs in the run history; run nothing")


def add_power_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("power", help="what each gate of a case can catch: its minimum detectable effect by "
                       "replicates and calibration runs, from the baseline alone",
                       epilog="exit 0: every detect: target of the case is reached (or none declared); 1: a target "
                       "is missed; 2: error")
    p.add_argument("case", help=CASE_HELP)
    add_declared(p, "power")


def add_baseline_parser(sub: argparse._SubParsersAction) -> None:
    b = sub.add_parser("baseline", help="manage golden baselines")
    actions = b.add_subparsers(dest="baseline_command", required=True, metavar="ACTION")
    p = actions.add_parser("promote", help="replace a case's baseline with its reviewed candidate (atomic)")
    p.add_argument("case", help=CASE_HELP)
    add_declared(p, "baseline promote")
    p.add_argument("--force", metavar="REASON", help="promote a candidate without calibrate provenance or with "
                   "self-check false alarms (or a shadow gate not ready); REASON is recorded in the baseline")
    p.add_argument("--shadow", action="append", metavar="CHECK", default=[],
                   help="make this shadow gate a gate, in place, when it held in the history (history "
                   "promote-ready); repeatable; no candidate is read")
    p.add_argument("--shadow-ready", action="store_true",
                   help="make every shadow gate that history promote-ready lists as ready a gate")
    p.add_argument("--to-shadow", action="store_true",
                   help="put the reviewed candidate in shadow beside the baseline (<case>.shadow.yaml): judged on "
                   "every run, never failing one, until --from-shadow")
    p.add_argument("--from-shadow", action="store_true",
                   help="replace the baseline with the candidate in shadow once each of its gates held (history "
                   "promote-ready)")
    p.add_argument("--history", metavar="URL", help="with --shadow: " + HISTORY_HELP)
    p.add_argument("--results-dir", type=Path, help="with --shadow: results root holding history.sqlite")


def calibrate(args: argparse.Namespace) -> int:
    from autotest.calibration.runs import CalibrationOptions, calibrate_case
    from autotest.calibration.thresholds import CalibrationError
    from autotest.inputs.case import load_case

    if args.paired:
        return _calibrate_paired(args)
    if args.perturbation is not None:
        raise UsageError("--perturbation: only with --paired (how an A/A pair's second run is nudged)")
    if args.last is not None:
        if not args.from_history:
            raise UsageError("--last: only with --from-history (the number of passing runs to take)")
        args.runs = args.last
    if args.from_history and (args.framework_ref or args.framework_repo):
        flag = "--framework-ref" if args.framework_ref else "--framework-repo"
        raise UsageError(f"{flag}: not with --from-history (it runs nothing: each recorded run names the commit it "
                         "ran); drop one")
    request = base_request(args, "calibrate")
    options = CalibrationOptions(
        results_root=args.results_dir, runs=args.runs, jobs=args.jobs, ray_address=args.ray_tasks,
        ray_resources=ray_resources(args) if args.ray_tasks else {},
        baselines_dir=args.baselines_dir, allow_dirty=args.allow_dirty, promote=args.promote,
        from_history=args.from_history, history=args.history, command=_calibrate_command_line(args),
        progress=lambda line: echo(line), run=request)
    try:
        outcome = calibrate_case(load_case(args.case), options)
    except CalibrationError as exc:
        echo(f"rl-autotest: calibration failed: {exc}", file=sys.stderr)
        return EXIT_ERROR
    for warning in outcome.warnings:
        echo(f"warning: {warning}", file=sys.stderr)
    for c in outcome.calibration.checks:
        echo(f"{c.check.check_id}: {c.previous.shown_threshold} -> {c.check.shown_threshold} ({c.status})")
    for useless in outcome.calibration.useless:
        echo(useless.line())
    rate = outcome.self_check.false_alarm_rate
    echo(f"self-check: leave-one-out false alarms {outcome.self_check.false_alarms}/"
          f"{len(outcome.self_check.held_out)}" + ("" if rate is None else f" ({rate:.0%})"))
    echo(f"candidate: {outcome.candidate}")
    echo(f"report: {outcome.report}")
    if outcome.promoted_to is not None:
        echo(f"promoted: {outcome.promoted_to}")
    elif args.promote:
        echo("not promoted: the self-check raised false alarms; review the report, then promote explicitly")
    return outcome.exit_code


def _calibrate_paired(args: argparse.Namespace) -> int:
    from autotest.ab.aa import PairedCalibrationOptions, calibrate_paired
    from autotest.inputs.case import load_case

    for flag, value in (("--from-history", args.from_history), ("--ray-tasks", args.ray_tasks),
                        ("--framework-ref", args.framework_ref), ("--framework-repo", args.framework_repo)):
        if value:
            raise UsageError(f"{flag}: not with --paired (A/A pairs run here, on the case's own checkout); drop one")
    request = base_request(args, "calibrate")
    outcome = calibrate_paired(load_case(args.case), PairedCalibrationOptions(
        runs=args.runs, results_root=args.results_dir, baselines_dir=args.baselines_dir, promote=args.promote,
        perturbation=args.perturbation, progress=lambda line: echo(line), run=request))
    for warning in outcome.warnings:
        echo(f"warning: {warning}", file=sys.stderr)
    for line in outcome.lines:
        echo(line)
    echo(f"candidate: {outcome.candidate}")
    if outcome.promoted_to is not None:
        echo(f"promoted: {outcome.promoted_to}")
    return EXIT_PASS


def _calibrate_command_line(args: argparse.Namespace) -> str:
    """The calibrate command as given (recorded in the baseline's provenance)."""
    words = ["rl-autotest", "calibrate", args.case]
    for flag, value in (("--runs", args.runs), ("--jobs", args.jobs), ("--ray-jobs", args.ray_jobs),
                        ("--ray-tasks", args.ray_tasks),
                        ("--results-dir", args.results_dir), ("--baselines-dir", args.baselines_dir),
                        ("--framework-ref", args.framework_ref), ("--framework-repo", args.framework_repo)):
        if value is not None:
            words += [flag, str(value)]
    words += [flag for flag, on in (("--promote", args.promote), ("--allow-dirty", args.allow_dirty),
                                    ("--from-history", args.from_history)) if on]
    return shlex.join(words)


def baseline(args: argparse.Namespace) -> int:
    from autotest.calibration.promote import promote
    from autotest.calibration.runs import baseline_files
    from autotest.inputs.baseline import load_baseline
    from autotest.inputs.case import load_case
    from autotest.judge.power import baseline_power, target_misses

    if args.force is not None and not args.force.strip():
        raise UsageError("--force: give the reason for overriding the checks, e.g. --force 'reviewed by X'")
    target, _, _ = baseline_files(load_case(args.case), args.baselines_dir)
    if sum(map(bool, (args.shadow or args.shadow_ready, args.to_shadow, args.from_shadow))) > 1:
        raise UsageError("--shadow/--shadow-ready, --to-shadow and --from-shadow are different promotions; give one")
    if args.shadow or args.shadow_ready:
        promotion = _promote_shadow(args, target)
    elif args.to_shadow:
        from autotest.calibration.promote import promote_to_shadow

        promotion = promote_to_shadow(target, force=args.force)
    elif args.from_shadow:
        from autotest.calibration.promote import promote_from_shadow

        promotion = promote_from_shadow(target, _standing(args, load_case(args.case).name), force=args.force)
    else:
        promotion = promote(target, force=args.force)
    # check ids, paths and the --force reason are user text: echo shows their terminal escapes, never obeys them
    echo(*(f"  {line}" for line in promotion.changes))
    if promotion.backup is not None:
        echo(f"previous baseline kept: {promotion.backup}")
    if promotion.forced:
        echo(f"forced: {promotion.forced} (recorded in the baseline)")
    echo(f"{'in shadow' if args.to_shadow else 'promoted'}: {promotion.path}")
    if promotion.review is not None:
        echo(f"review report: {promotion.review} (commit it with the baseline)")
    case = load_case(args.case)
    echo(*(f"warning: power: {line}" for line in target_misses(baseline_power(load_baseline(promotion.path)),
                                                                  case.detect)), file=sys.stderr)
    return EXIT_PASS


def _standing(args: argparse.Namespace, case: str) -> dict[str, str]:
    """Each shadow check of ``case`` -> ``yes`` or ``no: <why>`` over the last --nights trusted gate runs."""
    from autotest.history.shadow_ready import shadow_standings
    from autotest.history.store import open_for_reading
    from autotest.run.results_dir import default_results_root

    nights, allowed = args.nights, args.allowed  # bounded where parsed (autotest/inputs/run_flags.py)
    try:
        with open_for_reading(args.history, args.results_dir or default_results_root()) as store:
            if case in store.cases():
                return {s.check_id: s.why for s in shadow_standings(store, case, nights, allowed)}
    except UsageError:
        if not args.force:  # no evidence: only a reviewed, forced promotion goes ahead
            raise
    return {}


def _promote_shadow(args: argparse.Namespace, target: Path):
    """``baseline promote --shadow``: the named (or every ready) shadow gate made a gate, on the history's evidence."""
    from autotest.calibration.promote import promote_shadow
    from autotest.inputs.case import load_case

    if args.shadow and args.shadow_ready:
        raise UsageError("--shadow and --shadow-ready contradict each other; name the checks or take every ready one")
    case = load_case(args.case)
    standing = _standing(args, case.name)
    names = args.shadow or [c for c, why in standing.items() if why == "yes"]
    if not names:
        raise UsageError(f"{case.name}: no shadow gate is ready to block over the last {args.nights} trusted "
                         "night(s) (rl-autotest history promote-ready lists them)")
    return promote_shadow(target, names, standing, force=args.force,
                          case_in_shadow=case.source if case.shadow else None)


def power(args: argparse.Namespace) -> int:
    from autotest.calibration.runs import baseline_files
    from autotest.inputs.baseline import load_baseline
    from autotest.inputs.case import load_case
    from autotest.inputs.detect import check_detect_targets
    from autotest.judge.power import baseline_power, target_misses
    from autotest.judge.tier import tier_record
    from autotest.judge.power_design import advise
    from autotest.report.power_table import design_rows, paired_power_rows, power_by_steps_report, power_report

    case = load_case(args.case)
    path, _, _ = baseline_files(case, args.baselines_dir)
    baseline = load_baseline(path)
    check_detect_targets(case.detect, [c.metric for c in baseline.checks], case.source, path)
    powers = baseline_power(baseline)
    # judged at the replicates the case's verdicts use (its replicates:), as every run of it is
    echo(f"{case.name}: {path}" + (f" (verdicts on {case.replicates} replicates)" if case.replicates > 1 else ""))
    designs = advise(baseline, case.detect)
    for line in [*power_report(powers, case.detect, case.replicates), "", *paired_power_rows(baseline.paired), "",
                 *design_rows(designs, baseline.paired is not None)]:
        echo(line)
    if args.steps:
        echo("", *power_by_steps_report(baseline, case.detect, case.replicates))
        # each declared tier as its verdict will state it (autotest.judge.tier)
        echo(*(f"- tier {t.name}: {tier_record(t.name, baseline, t.steps, case.replicates)['statement']}"
               for t in case.tiers.values()))
    return EXIT_FAIL if target_misses(powers, case.detect, case.replicates) else EXIT_PASS
