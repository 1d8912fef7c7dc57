"""``rl-autotest run`` (one case end to end) and ``rl-autotest cases`` (what can run here).

The pipeline and the launchers are imported when ``run`` runs; ``cases`` needs only the case files and
the platform check.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from autotest.cli.common import (
    CASE_HELP,
    EXIT_ERROR,
    EXIT_PASS,
    HISTORY_HELP,
    add_framework_arguments,
    exit_code_for,
    recorder,
    results_help,
)
from autotest.errors import UsageError
from autotest.inputs.replicate_limits import CAPS_HELP
from autotest.terminal import echo


def add_run_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("run", help="run one case end to end (card, launch, compare, report)")
    p.add_argument("case", help=CASE_HELP)
    p.add_argument("--results-dir", type=Path, help=results_help())
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
    p.add_argument("--fail-fast", action="store_true",
                   help="stop the run once a gate is decided failed (a per-step breach, a percentile gate past rescue)")
    p.add_argument("--ray-address", help="submit the launch (each replicate's) as a Ray job to this cluster")
    p.add_argument("--ray-resource", action="append", default=[], metavar="NAME=AMOUNT",
                   help="a custom resource each Ray job asks for, so it lands on a node that offers it (repeatable)")
    p.add_argument("--dry-run", action="store_true", help="show the card and the exact command; launch nothing")
    p.add_argument("--yes", action="store_true", help="launch without asking for confirmation")
    p.add_argument("--history", metavar="URL", help=HISTORY_HELP)
    p.add_argument("--no-history", action="store_true", help="do not record this verdict in the run history")
    p.add_argument("--strict-history", action="store_true", help="a verdict the history could not record is an "
                   "ERROR (exit 2), not a warning (the nightly uses it)")
    add_framework_arguments(p)
    p.add_argument("--strict-power", action="store_true", help="a PASS whose gates cannot catch the case's "
                   "declared detect: targets is an ERROR (default: a warning)")


def add_cases_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("cases", help="list the cases (the project's, else the packaged demo) and whether each "
                       "can run here")
    p.add_argument("--packaged", action="store_true", help="in a project, also list the packaged demo cases")


def _confirm_on_terminal(card: str) -> bool:
    print(card)
    if not sys.stdin.isatty():
        raise UsageError("not on a terminal: pass --yes to launch without confirmation")
    return input("Launch this run? [y/N] ").strip().lower() in ("y", "yes")


def _show(card: str) -> bool:
    print(card)
    return True


def run(args: argparse.Namespace) -> int:
    from autotest.calibration.runs import baseline_files
    from autotest.files import require_folder
    from autotest.inputs.case import load_case
    from autotest.judge.power import power_warnings
    from autotest.judge.shadow import SHADOW, shadow_alarms, shadow_line
    from autotest.pipeline import DRY_RUN, SKIP, JudgeOptions, LaunchOptions, PublishOptions, RunOptions, run_case

    if args.results_dir is not None:
        require_folder(args.results_dir, "--results-dir")
    from autotest.inputs.run_limits import check_seed

    if args.seed is not None:
        check_seed(args.seed, "--seed")
    if args.replicates is not None and args.replicates < 1:
        raise UsageError(f"--replicates: {args.replicates} is below 1; give the number of seeds to run and average")
    if args.adaptive is not None and (args.adaptive < 2 or args.replicates is not None):
        raise UsageError(f"--adaptive: {args.adaptive} " + ("is below 2; give the most seeds to run near a threshold"
                         if args.adaptive < 2 else "and --replicates both set; keep one"))
    from autotest.run.ray_tasks import requested_resources

    ray_resources = requested_resources(args.ray_address, args.ray_resource)
    case = load_case(args.case)
    baseline_path = None
    if args.baselines_dir is not None:
        require_folder(args.baselines_dir, "--baselines-dir")
        baseline_path, _, _ = baseline_files(case, args.baselines_dir)
    outcome = run_case(case, RunOptions(
        LaunchOptions(results_root=args.results_dir, seed=args.seed, fault=args.fault,
                      framework_repo=args.framework_repo, framework_ref=args.framework_ref,
                      ray_address=args.ray_address, ray_resources=ray_resources, dry_run=args.dry_run,
                      confirm=_show if args.yes else _confirm_on_terminal),
        JudgeOptions(baseline_path=baseline_path, replicates=args.replicates, force_replicates=args.force,
                     adaptive_max=args.adaptive, fail_fast=args.fail_fast, strict_power=args.strict_power),
        PublishOptions(after_results=recorder(args), progress=print)))
    if outcome.status == DRY_RUN and args.dry_run:
        print(outcome.card)
    if outcome.verdict is not None:
        shadows = shadow_alarms(outcome.verdict.results)
        for result in outcome.verdict.failing():
            if result.severity != SHADOW:
                echo(f"{result.status:5} {result.check_id}: {result.message}")
        for result in shadows:  # never the job's status: a gate-in-waiting says what it would have done
            echo(shadow_line(result))
        for warning in power_warnings(outcome.verdict):
            echo(f"warning: {warning}", file=sys.stderr)
    echo(outcome.summary_line())
    if outcome.status == DRY_RUN and args.dry_run and outcome.problems:
        echo(f"rl-autotest: error: {case.name}: the run would not start: {'; '.join(outcome.problems)}",
              file=sys.stderr)
        return EXIT_ERROR
    if outcome.status == DRY_RUN:
        return EXIT_PASS if args.dry_run else EXIT_ERROR
    if outcome.unsaved:  # the summary line named the file and the error
        return EXIT_ERROR
    environment = outcome.verdict is not None and outcome.verdict.environment_only
    return EXIT_ERROR if outcome.status == SKIP else exit_code_for(outcome.status, environment)


def cases(args: argparse.Namespace) -> int:
    from autotest.inputs.case import list_cases
    from autotest.inputs.project import find_project
    from autotest.run.platform import check_platform

    project = find_project()
    found = list_cases(packaged=args.packaged or project is None)
    if not found:
        assert project is not None  # the packaged demo always has cases
        raise UsageError(f"{project.source}: no case files (*.yaml) in {', '.join(map(str, project.cases))}; "
                         "write one with `rl-autotest init NAME -- COMMAND`")
    for case in found:
        check = check_platform(case)
        where = "runnable here" if check.runnable else f"skips here: {check.skip_reason}"
        echo(f"{case.name:34} [{','.join(case.markers)}] {where}")
    return EXIT_PASS
