"""``rl-autotest calibrate CASE`` and ``rl-autotest baseline promote CASE``: argparse wiring only.

``add_commands(subparsers, commands)`` registers both; ``autotest.cli`` calls the handler stored
under the sub-command's name. Exit codes: 0 candidate written (and promoted when asked), 1 written
but the leave-one-out self-check raised false alarms (not promoted; review it), 2 error.
"""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path
from typing import Callable

from autotest.errors import UsageError

EXIT_OK, EXIT_REVIEW, EXIT_ERROR = 0, 1, 2


def _calibrate(args: argparse.Namespace) -> int:
    from autotest.calibration.runs import CalibrationOptions, calibrate_case
    from autotest.calibration.thresholds import CalibrationError
    from autotest.inputs.case import REPO_ROOT, load_case

    if args.runs is not None and args.runs < 2:
        raise UsageError(f"--runs: {args.runs} is below 2; run-to-run noise needs at least two runs")
    if args.jobs is not None and args.jobs < 1:
        raise UsageError(f"--jobs: {args.jobs} is below 1")
    case = load_case(args.case)
    options = CalibrationOptions(
        results_root=args.results_dir or REPO_ROOT / "results", runs=args.runs, jobs=args.jobs,
        ray_address=args.ray_address, baselines_dir=args.baselines_dir, allow_dirty=args.allow_dirty,
        promote=args.promote, command=_command_line(args),
        progress=lambda line: print(line, flush=True))
    try:
        outcome = calibrate_case(case, options)
    except CalibrationError as exc:
        print(f"rl-autotest: calibration failed: {exc}", file=sys.stderr)
        return EXIT_ERROR
    for warning in outcome.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    for c in outcome.calibration.checks:
        print(f"{c.check.check_id}: {c.previous.threshold:g} -> {c.check.threshold:g} ({c.status})")
    rate = outcome.self_check.false_alarm_rate
    print(f"self-check: leave-one-out false alarms {outcome.self_check.false_alarms}/"
          f"{len(outcome.self_check.held_out)}" + ("" if rate is None else f" ({rate:.0%})"))
    print(f"candidate: {outcome.candidate}")
    print(f"report: {outcome.report}")
    if outcome.promoted_to is not None:
        print(f"promoted: {outcome.promoted_to}")
    elif args.promote:
        print("not promoted: the self-check raised false alarms; review the report, then promote explicitly")
    return outcome.exit_code


def _command_line(args: argparse.Namespace) -> str:
    """The calibrate command as given (recorded in the baseline's provenance)."""
    words = ["rl-autotest", "calibrate", args.case]
    for flag, value in (("--runs", args.runs), ("--jobs", args.jobs), ("--ray-address", args.ray_address),
                        ("--results-dir", args.results_dir), ("--baselines-dir", args.baselines_dir)):
        if value is not None:
            words += [flag, str(value)]
    words += [flag for flag, on in (("--promote", args.promote), ("--allow-dirty", args.allow_dirty)) if on]
    return shlex.join(words)


def _promote(args: argparse.Namespace) -> int:
    from autotest.calibration.runs import baseline_files, promote
    from autotest.inputs.case import load_case

    target, _, _ = baseline_files(load_case(args.case), args.baselines_dir)
    print(f"promoted: {promote(target)}")
    return EXIT_OK


def _baseline(args: argparse.Namespace) -> int:
    return {"promote": _promote}[args.baseline_command](args)


def add_commands(subparsers: argparse._SubParsersAction,
                 commands: dict[str, Callable[[argparse.Namespace], int]]) -> None:
    """Register ``calibrate`` and ``baseline promote`` and store their handlers in ``commands``."""
    p = subparsers.add_parser("calibrate", help="run a case N times and write a candidate baseline from the noise",
                              description="Run CASE N times, set golden = mean and threshold = max run-to-run "
                                          "deviation x margin (floors apply), and write <baseline>.candidate.yaml "
                                          "with a diff report beside the baseline.")
    p.add_argument("case", help="case name (autotest/cases/<name>.yaml) or a case file")
    p.add_argument("--runs", type=int, help="number of runs (default: the baseline's calibration.runs, else 3)")
    p.add_argument("--jobs", type=int, help="runs side by side here (default: as CPUs or GPU slices allow)")
    p.add_argument("--ray-address", help="run each calibration run as a Ray task on this cluster "
                                         "(shared filesystem; 'local' starts a private one)")
    p.add_argument("--results-dir", type=Path, help="root of the runs' results folders (default: <repo>/results)")
    p.add_argument("--baselines-dir", "--out", dest="baselines_dir", type=Path,
                   help="folder for the candidate (and the baseline --promote replaces); default: beside the "
                        "case's baseline")
    p.add_argument("--promote", action="store_true",
                   help="also replace the baseline with the candidate (only when the self-check is clean)")
    p.add_argument("--allow-dirty", action="store_true", help="calibrate from an uncommitted tree (recorded)")
    commands["calibrate"] = _calibrate

    b = subparsers.add_parser("baseline", help="manage golden baselines")
    sub = b.add_subparsers(dest="baseline_command", required=True, metavar="ACTION")
    pr = sub.add_parser("promote", help="replace a case's baseline with its reviewed candidate (atomic)")
    pr.add_argument("case", help="case name or case file")
    pr.add_argument("--baselines-dir", "--out", dest="baselines_dir", type=Path,
                    help="folder holding the baseline and its candidate (default: beside the case's baseline)")
    commands["baseline"] = _baseline
