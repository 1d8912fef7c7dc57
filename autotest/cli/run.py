"""``rl-autotest run`` (one case end to end) and ``rl-autotest cases`` (what can run here).

The pipeline and the launchers are imported when ``run`` runs; ``cases`` needs only the case files and
the platform check.
"""

from __future__ import annotations

import argparse
import sys

from autotest.cli.common import CASE_HELP, EXIT_ERROR, EXIT_PASS, exit_code_for
from autotest.cli.flags import add_declared, base_request
from autotest.errors import UsageError
from autotest.terminal import echo


def add_run_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("run", help="run one case end to end (card, launch, compare, report)")
    p.add_argument("case", help=CASE_HELP)
    add_declared(p, "run")


def add_cases_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("cases", help="list the cases (the project's, else the packaged demo) and whether each "
                       "can run here")
    add_declared(p, "cases")


def _show_card(card: str) -> None:
    """The card, each line escaped: a case's description or a path is stored text (:mod:`autotest.terminal`)."""
    echo(*card.splitlines())


def _confirm_on_terminal(card: str) -> bool:
    _show_card(card)
    if not sys.stdin.isatty():
        raise UsageError("not on a terminal: pass --yes to launch without confirmation")
    return input("Launch this run? [y/N] ").strip().lower() in ("y", "yes")


def _show(card: str) -> bool:
    _show_card(card)
    return True


def run(args: argparse.Namespace) -> int:
    from autotest.calibration.runs import baseline_files
    from autotest.inputs.case import load_case
    from autotest.judge.power import power_warnings
    from autotest.judge.tier import tier_lines
    from autotest.judge.shadow import SHADOW, shadow_alarms, shadow_line
    from autotest.pipeline import DRY_RUN, SKIP, run_case

    if args.adaptive_replicates is not None and args.replicates is not None:
        raise UsageError(f"--adaptive-replicates: {args.adaptive_replicates} and --replicates both set; keep one")
    options = base_request(args, "run", progress=echo, confirm=_show if args.yes else _confirm_on_terminal)
    case = load_case(args.case)
    if args.baselines_dir is not None:
        options = options.changed(judge={"baseline_path": baseline_files(case, args.baselines_dir)[0]})
    outcome = run_case(case, options)
    if outcome.status == DRY_RUN and args.dry_run:
        _show_card(outcome.card)
    if outcome.verdict is not None:
        shadows = shadow_alarms(outcome.verdict.results)
        for result in outcome.verdict.failing():
            if result.severity != SHADOW:
                echo(f"{result.status:5} {result.check_id}: {result.message}")
        for result in shadows:  # never the job's status: a gate-in-waiting says what it would have done
            echo(shadow_line(result))
        for warning in power_warnings(outcome.verdict):
            echo(f"warning: {warning}", file=sys.stderr)
        echo(*tier_lines(outcome.verdict))
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
    found = list_cases(packaged=args.packaged_cases or project is None)
    if not found:
        assert project is not None  # the packaged demo always has cases
        raise UsageError(f"{project.source}: no case files (*.yaml) in {', '.join(map(str, project.cases))}; "
                         "write one with `rl-autotest init NAME -- COMMAND`")
    for case in found:
        check = check_platform(case)
        where = "runnable here" if check.runnable else f"skips here: {check.skip_reason}"
        echo(f"{case.name:34} [{','.join(case.markers)}] {where}")
    return EXIT_PASS
