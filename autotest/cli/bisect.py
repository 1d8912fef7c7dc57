"""``rl-autotest bisect``: the framework commit between a good and a bad ref where a case's gates start
failing. The search and its launches are imported when the command runs."""

from __future__ import annotations

import argparse

from autotest.cli.common import CASE_HELP
from autotest.cli.flags import add_declared, base_request, ray_resources
from autotest.terminal import echo


def add_bisect_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("bisect", help="find the framework commit between a good and a bad ref where the case's "
                       "gates start failing (noise-aware, P probes a round)",
                       epilog="exit 0: first bad commit found; 1: the environment changed (the good ref fails "
                       "today), not reproducible (the bad ref passes), or --max-runs spent; 2: error")
    p.add_argument("case", help=CASE_HELP)
    p.add_argument("--good", required=True, help="a framework ref whose runs passed")
    p.add_argument("--bad", required=True, help="a later framework ref whose runs failed")
    p.add_argument("--all-commits", action="store_true", help="descend into merged branches (default: first parent)")
    add_declared(p, "bisect")


def bisect(args: argparse.Namespace) -> int:
    from autotest.bisect.session import BisectOptions
    from autotest.bisect.session import bisect as run_bisect
    from autotest.inputs.case import load_case
    from autotest.report.cost import format_device_seconds
    from autotest.run.ray_tasks import RayPlacement

    request = base_request(args, "bisect")
    resources = ray_resources(args)
    case = load_case(args.case)
    placement = None
    if args.ray_tasks:
        placement = RayPlacement(args.ray_tasks, resources, num_gpus=float(case.platform.gpus))
    outcome = run_bisect(case, BisectOptions(
        good=args.good, bad=args.bad, repo=args.framework_repo, all_commits=args.all_commits,
        slots=2 if args.jobs is None else args.jobs, max_runs=args.max_runs, results_root=args.results_dir,
        seed=args.seed, progress=lambda line: echo(line), ray=placement, run_options=request))
    echo(f"bisect: {outcome.status}: {outcome.message}")
    for row in outcome.flipped:
        echo(f"  {row['check']}: last good {_number(row['good'])}, first bad {_number(row['bad'])} "
              f"(threshold {_number(row['threshold'])})")
    echo(f"bisect: {outcome.rounds} round(s), {outcome.runs} run(s), {format_device_seconds(outcome.device_seconds)}; "
          f"report: {outcome.folder / 'bisect.md'}")
    return outcome.exit_code


def _number(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.4g}"
