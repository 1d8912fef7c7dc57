"""The ``rl-autotest`` command: a thin shell over the library. Exit 0 pass, 1 fail, 2 error or bad usage.

``calibrate`` exits 0 when the candidate is written (and promoted when asked), 1 when it is
written but the leave-one-out self-check raised false alarms (review it), 2 on error.
"""

from __future__ import annotations

import argparse
import math
import shlex
import sys
from pathlib import Path
from typing import Callable, Sequence

from autotest.calibration.runs import (
    CalibrationOptions,
    baseline_files,
    calibrate_case,
    promote,
)
from autotest.bisect.nightly_cli import add_nightly_parser
from autotest.bisect.session import BisectOptions, bisect
from autotest.calibration.init_cli import add_init_parser, split_command
from autotest.calibration.thresholds import CalibrationError
from autotest.consistency.cli import main as analyze_main
from autotest.consistency.job import run_consistency_job
from autotest.errors import UsageError
from autotest.files import require_folder, require_writable
from autotest.history.cli import add_history_parser
from autotest.history.database import HISTORY_ENV
from autotest.history.drift import history_recorder
from autotest.inputs.case import TRACKER_FORMATS, Case, list_cases, load_case
from autotest.inputs.project import find_project
from autotest.inputs.replicate_limits import CAPS_HELP
from autotest.judge.model import FAIL, PASS
from autotest.inputs.baseline import load_baseline
from autotest.judge.power import baseline_power, caught_phrase, power_warnings, target_misses
from autotest.report.cost import format_device_seconds
from autotest.report.power_table import power_report
from autotest.judge.verdict import compare_paths
from autotest.pipeline import DRY_RUN, SKIP, RunOptions, run_case
from autotest.redaction import MaskedStream, collect_secrets
from autotest.report.publish import publish
from autotest.run.interrupts import describe, signals_as_interrupt
from autotest.run.platform import check_platform
from autotest.run.ray_tasks import RayPlacement, parse_resources
from autotest.run.results_dir import DEFAULT_ROOT_HELP

EXIT_PASS, EXIT_FAIL, EXIT_ERROR = 0, 1, 2
CASE_HELP = "a case: its name (the project's cases, then the packaged demo cases) or its YAML file"
EXIT_NOT_COLLECTED = 3  # `consistency`: no collection hook wired for the framework (neutral in the nightly)


def exit_code_for(status: str) -> int:
    return {PASS: EXIT_PASS, FAIL: EXIT_FAIL}.get(status, EXIT_ERROR)


def _compare(args: argparse.Namespace) -> int:
    if args.wall_time_s is not None and not (args.wall_time_s >= 0 and math.isfinite(args.wall_time_s)):
        raise UsageError(f"--wall-time-s: {args.wall_time_s:g} is not a wall time; give the measured seconds (>= 0)")
    if args.out is not None:  # before judging: a verdict must have somewhere to go
        require_writable(args.out, "--out", advice="pass a folder on a writable disk")
    if args.strict_history and not args.out:
        raise UsageError("--strict-history: only with --out (compare records a verdict only when it writes a "
                         "results folder)")
    recorder = _recorder(args)
    comparison = compare_paths(args.baseline, args.current, fmt=args.format, wall_time_s=args.wall_time_s)
    verdict = comparison.verdict
    unsaved: tuple[str, ...] = ()
    if args.out:
        published = publish(comparison, args.out, with_plots=not args.no_plots, after_results=recorder)
        verdict = published.verdict or verdict
        unsaved = published.unsaved
        if published.report_md is not None:
            print(f"report: {published.report_md}")
    for warning in (*verdict.warnings, *power_warnings(verdict)):
        print(f"warning: {warning}", file=sys.stderr)
    for result in verdict.results:
        if result.status != PASS:
            print(f"{result.status:5} {result.check_id}: {result.message}")
    for finding in verdict.triage:
        if finding.primary:
            print(f"next step: {finding.suggestion}")
    caught = caught_phrase(verdict.results) if verdict.status == PASS else ""
    line = f"{verdict.case}: {verdict.status}" + (f" — {caught}" if caught else "")
    if unsaved:  # the verdict stands; its results folder is incomplete
        print(f"{line} — results not saved: {unsaved[0]}")
        return EXIT_ERROR
    print(line)
    return exit_code_for(verdict.status)


def _recorder(args: argparse.Namespace):
    """The history hook of ``run`` and ``compare``: None with --no-history; a record that cannot be written is
    a warning on stderr, and an ERROR verdict with --strict-history."""
    if args.no_history:
        if args.strict_history:
            raise UsageError("--strict-history and --no-history contradict each other; drop one")
        return None
    return history_recorder(args.history, strict=args.strict_history,
                            warn=lambda line: print(f"warning: {line}", file=sys.stderr, flush=True))


def _confirm_on_terminal(card: str) -> bool:
    print(card)
    if not sys.stdin.isatty():
        raise UsageError("not on a terminal: pass --yes to launch without confirmation")
    return input("Launch this run? [y/N] ").strip().lower() in ("y", "yes")


def _show(card: str) -> bool:
    print(card)
    return True


def _run(args: argparse.Namespace) -> int:
    if args.results_dir is not None:
        require_folder(args.results_dir, "--results-dir")
    if args.seed is not None and args.seed < 0:
        raise UsageError(f"--seed: {args.seed} is below 0; give a seed >= 0")
    if args.replicates is not None and args.replicates < 1:
        raise UsageError(f"--replicates: {args.replicates} is below 1; give the number of seeds to run and average")
    if args.adaptive is not None and (args.adaptive < 2 or args.replicates is not None):
        raise UsageError(f"--adaptive: {args.adaptive} " + ("is below 2; give the most seeds to run near a threshold"
                         if args.adaptive < 2 else "and --replicates both set; keep one"))
    case = load_case(args.case)
    baseline_path = None
    if args.baselines_dir is not None:
        require_folder(args.baselines_dir, "--baselines-dir")
        baseline_path, _, _ = baseline_files(case, args.baselines_dir)
    run = run_case(case, RunOptions(
        baseline_path=baseline_path,
        results_root=args.results_dir, seed=args.seed, replicates=args.replicates, fault=args.fault,
        force_replicates=args.force, dry_run=args.dry_run,
        fail_fast=args.fail_fast, progress=print, ray_address=args.ray_address,
        confirm=_show if args.yes else _confirm_on_terminal,
        after_results=_recorder(args),
        framework_repo=args.framework_repo, framework_ref=args.framework_ref, strict_power=args.strict_power,
        adaptive_max=args.adaptive))
    if run.status == DRY_RUN and args.dry_run:
        print(run.card)
    if run.verdict is not None:
        for result in run.verdict.failing():
            print(f"{result.status:5} {result.check_id}: {result.message}")
        for warning in power_warnings(run.verdict):
            print(f"warning: {warning}", file=sys.stderr)
    print(run.summary_line())
    if run.status == DRY_RUN:
        return EXIT_PASS if args.dry_run else EXIT_ERROR
    if run.unsaved:  # the summary line named the file and the error
        return EXIT_ERROR
    return EXIT_ERROR if run.status == SKIP else exit_code_for(run.status)


def _cases(args: argparse.Namespace) -> int:
    project = find_project()
    cases = list_cases(packaged=args.packaged or project is None)
    if not cases:
        assert project is not None  # the packaged demo always has cases
        raise UsageError(f"{project.source}: no case files (*.yaml) in {', '.join(map(str, project.cases))}; "
                         "write one with `rl-autotest init NAME -- COMMAND`")
    for case in cases:
        check = check_platform(case)
        where = "runnable here" if check.runnable else f"skips here: {check.skip_reason}"
        print(f"{case.name:34} [{','.join(case.markers)}] {where}")
    return EXIT_PASS


def _consistency(args: argparse.Namespace) -> int:
    outcome = run_consistency_job(args.results_dir, execute=not args.no_execute,
                                  max_forwards_per_side=args.max_forwards, progress=print)
    print(f"root-cause report: {outcome.report_md}")
    print(f"consistency: {outcome.summary}")
    if outcome.not_collected:  # the framework has no hook: neither a pass nor an error of the job
        return EXIT_NOT_COLLECTED
    return EXIT_PASS if outcome.executed and outcome.verdict != "cannot_conclude" else EXIT_ERROR


def _calibrate(args: argparse.Namespace) -> int:
    if args.last is not None:
        if not args.from_history:
            raise UsageError("--last: only with --from-history (the number of passing runs to take)")
        args.runs = args.last
    if args.runs is not None and args.runs < 2:
        flag = "--last" if args.last is not None else "--runs"
        raise UsageError(f"{flag}: {args.runs} is below 2; run-to-run noise needs at least two runs")
    if args.jobs is not None and args.jobs < 1:
        raise UsageError(f"--jobs: {args.jobs} is below 1")
    for flag, folder in (("--results-dir", args.results_dir), ("--baselines-dir", args.baselines_dir)):
        if folder is not None:  # before N runs, not after them
            require_folder(folder, flag)
    options = CalibrationOptions(
        results_root=args.results_dir, runs=args.runs, jobs=args.jobs, ray_address=args.ray_address,
        baselines_dir=args.baselines_dir, allow_dirty=args.allow_dirty, promote=args.promote,
        from_history=args.from_history, history=args.history, after_results=history_recorder(args.history),
        command=_calibrate_command_line(args), progress=lambda line: print(line, flush=True))
    try:
        outcome = calibrate_case(load_case(args.case), options)
    except CalibrationError as exc:
        print(f"rl-autotest: calibration failed: {exc}", file=sys.stderr)
        return EXIT_ERROR
    for warning in outcome.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    for c in outcome.calibration.checks:
        print(f"{c.check.check_id}: {c.previous.shown_threshold} -> {c.check.shown_threshold} ({c.status})")
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


def _calibrate_command_line(args: argparse.Namespace) -> str:
    """The calibrate command as given (recorded in the baseline's provenance)."""
    words = ["rl-autotest", "calibrate", args.case]
    for flag, value in (("--runs", args.runs), ("--jobs", args.jobs), ("--ray-address", args.ray_address),
                        ("--results-dir", args.results_dir), ("--baselines-dir", args.baselines_dir)):
        if value is not None:
            words += [flag, str(value)]
    words += [flag for flag, on in (("--promote", args.promote), ("--allow-dirty", args.allow_dirty),
                                    ("--from-history", args.from_history)) if on]
    return shlex.join(words)


def _baseline(args: argparse.Namespace) -> int:
    if args.force is not None and not args.force.strip():
        raise UsageError("--force: give the reason for overriding the checks, e.g. --force 'reviewed by X'")
    if args.baselines_dir is not None:
        require_folder(args.baselines_dir, "--baselines-dir")
    target, _, _ = baseline_files(load_case(args.case), args.baselines_dir)
    promotion = promote(target, force=args.force)
    for line in promotion.changes:
        print(f"  {line}")
    if promotion.backup is not None:
        print(f"previous baseline kept: {promotion.backup}")
    if promotion.forced:
        print(f"forced: {promotion.forced} (recorded in the baseline)")
    print(f"promoted: {promotion.path}")
    case = load_case(args.case)
    for line in target_misses(baseline_power(load_baseline(promotion.path)), case.detect):
        print(f"warning: power: {line}", file=sys.stderr)
    return EXIT_PASS


def _bisect(args: argparse.Namespace) -> int:
    if args.results_dir is not None:
        require_folder(args.results_dir, "--results-dir")
    if args.max_runs is not None and args.max_runs < 2:
        raise UsageError(f"--max-runs: {args.max_runs} is below 2; the good and bad ends take two runs")
    case = load_case(args.case)
    outcome = bisect(case, BisectOptions(
        good=args.good, bad=args.bad, repo=args.framework_repo, all_commits=args.all_commits,
        slots=args.jobs, max_runs=args.max_runs, results_root=args.results_dir, seed=args.seed,
        progress=lambda line: print(line, flush=True), ray=_ray_placement(args, case)))
    print(f"bisect: {outcome.status}: {outcome.message}")
    for row in outcome.flipped:
        print(f"  {row['check']}: last good {_number(row['good'])}, first bad {_number(row['bad'])} "
              f"(threshold {_number(row['threshold'])})")
    print(f"bisect: {outcome.rounds} round(s), {outcome.runs} run(s), {format_device_seconds(outcome.device_seconds)}; "
          f"report: {outcome.folder / 'bisect.md'}")
    return outcome.exit_code


def _ray_placement(args: argparse.Namespace, case: Case) -> RayPlacement | None:
    if not args.ray_address:
        if args.ray_resource:
            raise UsageError("--ray-resource: needs --ray-address (the cluster whose nodes offer it)")
        return None
    return RayPlacement(args.ray_address, parse_resources(args.ray_resource), num_gpus=float(case.platform.gpus))


def _number(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.4g}"


def _power(args: argparse.Namespace) -> int:
    case = load_case(args.case)
    if args.baselines_dir is not None:
        require_folder(args.baselines_dir, "--baselines-dir")
    path, _, _ = baseline_files(case, args.baselines_dir)
    baseline = load_baseline(path)
    print(f"{case.name}: {path}")
    for line in power_report(baseline_power(baseline), case.detect):
        print(line)
    return EXIT_FAIL if target_misses(baseline_power(baseline), case.detect) else EXIT_PASS


COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {
    "compare": _compare, "run": _run, "cases": _cases, "consistency": _consistency, "calibrate": _calibrate,
    "baseline": _baseline, "power": _power, "bisect": _bisect}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="rl-autotest", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    results_help = f"root of the per-case results folders (default: {DEFAULT_ROOT_HELP})"
    history_help = f"run history database URL (default: ${HISTORY_ENV}, else <results root>/history.sqlite)"

    p = sub.add_parser("compare", help="check a run's metric log against a golden baseline")
    p.add_argument("--baseline", required=True, type=Path, help="baseline YAML (baselines/<case>.yaml)")
    p.add_argument("--current", required=True, type=Path,
                   help="the metric log (tracker.jsonl, trainer_state.json, an event file), or a run's WORK_DIR")
    p.add_argument("--out", type=Path, help="results folder to write results.json, report.md and plots/")
    p.add_argument("--format", default="auto", choices=["auto", *TRACKER_FORMATS],
                   help="metric-log format (auto: by name and first row; a work dir is searched for each)")
    p.add_argument("--wall-time-s", type=float, help="measured end-to-end wall time, for the wall-time check")
    p.add_argument("--no-plots", action="store_true", help="skip the PNG plots")
    p.add_argument("--history", metavar="URL", help="with --out: " + history_help)
    p.add_argument("--no-history", action="store_true", help="with --out: do not record the verdict in the history")
    p.add_argument("--strict-history", action="store_true", help="with --out: a verdict the history could not "
                   "record is an ERROR (exit 2), not a warning")

    p = sub.add_parser("run", help="run one case end to end (card, launch, compare, report)")
    p.add_argument("case", help=CASE_HELP)
    p.add_argument("--results-dir", type=Path, help=results_help)
    p.add_argument("--baselines-dir", type=Path,
                   help="judge against <DIR>/<baseline file name> instead of the case's baseline")
    p.add_argument("--seed", type=int, help="seed for cases that take one (default: the case's)")
    p.add_argument("--replicates", type=int, metavar="K", help="run K seeds side by side and judge their mean "
                   f"(default: the case's replicates, else 1; {CAPS_HELP} without --force)")
    p.add_argument("--force", action="store_true", help="run more replicates than the platform's cap")
    p.add_argument("--adaptive", type=int, metavar="K_MAX", help="adaptive replicates: one seed, then K_MAX seeds "
                   "judged on their mean when it lands near a pooled threshold (the false-alarm budget spent over "
                   "both looks)")
    p.add_argument("--fault", help="inject a fault NAME[:ARG] (embedded workloads)")
    p.add_argument("--fail-fast", action="store_true", help="stop the run at the first per-step gate failure")
    p.add_argument("--ray-address", help="submit the launch as a Ray job to this cluster")
    p.add_argument("--dry-run", action="store_true", help="show the card and the exact command; launch nothing")
    p.add_argument("--yes", action="store_true", help="launch without asking for confirmation")
    p.add_argument("--history", metavar="URL", help=history_help)
    p.add_argument("--no-history", action="store_true", help="do not record this verdict in the run history")
    p.add_argument("--strict-history", action="store_true", help="a verdict the history could not record is an "
                   "ERROR (exit 2), not a warning (the nightly uses it)")
    p.add_argument("--framework-ref", help="framework ref to test: branch, tag, sha or refs/pull/N/head "
                   "(default: $RL_AUTOTEST_FRAMEWORK_REF, else the case's platform.framework.ref)")
    p.add_argument("--strict-power", action="store_true", help="a PASS whose gates cannot catch the case's "
                   "declared detect: targets is an ERROR (default: a warning)")
    p.add_argument("--framework-repo", help="framework repository URL or local path to fetch the ref from "
                   "(default: $RL_AUTOTEST_FRAMEWORK_REPO, else the case's, else the local clone in its env var)")

    p = sub.add_parser("cases", help="list the cases (the project's, else the packaged demo) and whether each "
                       "can run here")
    p.add_argument("--packaged", action="store_true", help="in a project, also list the packaged demo cases")

    p = sub.add_parser("consistency", help="run the consistency dump job an accuracy run requested "
                       "('consistency analyze --help': analyse MSProbe dumps made anywhere)",
                       epilog="exit codes: 0 collected and analysed; 2 error, or collection/analysis could not "
                       "conclude; 3 not collected: the framework has no diagnostic hook wired (consistency/"
                       "how_to_collect.md lists the manual steps)")
    p.add_argument("results_dir", type=Path, help="the accuracy run's results folder (has consistency_request.json)")
    p.add_argument("--no-execute", action="store_true", help="generate the wrapper and configs; collect nothing")
    p.add_argument("--max-forwards", type=int, default=2, help="forwards dumped per side in the window")

    p = sub.add_parser("calibrate", help="run a case N times and write a candidate baseline from the noise",
                       description="Run CASE N times, set golden = mean, per-step checks' thresholds = max "
                                   "run-to-run deviation x margin and pooled checks' = a t quantile for the "
                                   "case's false-alarm budget x the statistic's spread (floors apply), and write "
                                   "<baseline>.candidate.yaml with a diff report beside the baseline.")
    p.add_argument("case", help=CASE_HELP)
    p.add_argument("--runs", type=int, help="number of runs (default: the baseline's calibration.runs, else 3)")
    p.add_argument("--jobs", type=int, help="runs side by side here (default: as CPUs or GPU slices allow)")
    p.add_argument("--ray-address", help="run each calibration run as a Ray task on this cluster "
                                         "(shared filesystem; 'local' starts a private one)")
    p.add_argument("--results-dir", type=Path, help=results_help)
    p.add_argument("--baselines-dir", "--out", dest="baselines_dir", type=Path,
                   help="folder for the candidate (and the baseline --promote replaces); default: beside the "
                        "case's baseline")
    p.add_argument("--promote", action="store_true",
                   help="also replace the baseline with the candidate (only when the self-check is clean)")
    p.add_argument("--allow-dirty", action="store_true", help="calibrate from an uncommitted tree (recorded)")
    p.add_argument("--from-history", action="store_true",
                   help="build the candidate from the last passing runs in the run history; run nothing")
    p.add_argument("--last", type=int, metavar="N", help="with --from-history: how many passing runs (default: --runs)")
    p.add_argument("--history", metavar="URL", help=history_help)

    p = sub.add_parser("power", help="what each gate of a case can catch: its minimum detectable effect by "
                       "replicates and calibration runs, from the baseline alone",
                       epilog="exit 0: every detect: target of the case is reached (or none declared); 1: a target "
                       "is missed; 2: error")
    p.add_argument("case", help=CASE_HELP)
    p.add_argument("--baselines-dir", type=Path, help="read <DIR>/<baseline file name> instead of the case's baseline")

    p = sub.add_parser("bisect", help="find the framework commit between a good and a bad ref where the case's "
                       "gates start failing (noise-aware, P probes a round)",
                       epilog="exit 0: first bad commit found; 1: the environment changed (the good ref fails "
                       "today), not reproducible (the bad ref passes), or --max-runs spent; 2: error")
    p.add_argument("case", help=CASE_HELP)
    p.add_argument("--good", required=True, help="a framework ref whose runs passed")
    p.add_argument("--bad", required=True, help="a later framework ref whose runs failed")
    p.add_argument("--framework-repo", help="framework repository URL or local path (default: the case's)")
    p.add_argument("--all-commits", action="store_true", help="descend into merged branches (default: first parent)")
    p.add_argument("--jobs", type=int, default=2, help="probes side by side a round (default: 2)")
    p.add_argument("--max-runs", type=int, help="stop after this many training runs (a budget)")
    p.add_argument("--seed", type=int, help="seed of each probe's first run (default: the case's)")
    p.add_argument("--ray-address", help="run each probe as a Ray task on this cluster (the head's host:port, or "
                   "'local'); --jobs probes a round go out at once")
    p.add_argument("--ray-resource", action="append", default=[], metavar="NAME=AMOUNT",
                   help="a custom resource each probe asks for, so it lands on a node that offers it (repeatable)")
    p.add_argument("--results-dir", type=Path, help=results_help)

    b = sub.add_parser("baseline", help="manage golden baselines")
    actions = b.add_subparsers(dest="baseline_command", required=True, metavar="ACTION")
    p = actions.add_parser("promote", help="replace a case's baseline with its reviewed candidate (atomic)")
    p.add_argument("case", help=CASE_HELP)
    p.add_argument("--baselines-dir", "--out", dest="baselines_dir", type=Path,
                   help="folder holding the baseline and its candidate (default: beside the case's baseline)")
    p.add_argument("--force", metavar="REASON", help="promote a candidate without calibrate provenance or with "
                   "self-check false alarms; REASON is recorded in the baseline")

    add_history_parser(sub, COMMANDS)
    add_nightly_parser(sub, COMMANDS)
    add_init_parser(sub, COMMANDS)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:2] == ["consistency", "analyze"]:  # its own options beside the job's RESULTS_DIR form
        return analyze_main(argv[2:])
    collect_secrets(argv=argv)  # before anything is printed or written: their values are masked everywhere
    parser = build_parser()
    argv, launch_command = split_command(argv)
    args = parser.parse_args(argv)
    args.launch_command = launch_command
    out, err = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = MaskedStream(out), MaskedStream(err)
    try:
        with signals_as_interrupt():  # SIGTERM/SIGHUP (CI cancelling) take Ctrl-C's path: cleanup, verdict
            return COMMANDS[args.command](args)
    except UsageError as exc:
        print(f"rl-autotest: error: {exc}", file=sys.stderr)
        return EXIT_ERROR
    except KeyboardInterrupt as exc:
        print(f"rl-autotest: interrupted ({describe(exc)})", file=sys.stderr)
        return EXIT_ERROR
    finally:
        sys.stdout, sys.stderr = out, err


if __name__ == "__main__":
    sys.exit(main())
