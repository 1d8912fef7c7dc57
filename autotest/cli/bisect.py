"""``rl-autotest bisect``: the framework commit between a good and a bad ref where a case's gates start
failing. The search and its launches are imported when the command runs."""

from __future__ import annotations

import argparse
from pathlib import Path

from autotest.cli.common import CASE_HELP, results_help
from autotest.terminal import echo


def add_bisect_parser(sub: argparse._SubParsersAction) -> None:
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
    p.add_argument("--results-dir", type=Path, help=results_help())


def bisect(args: argparse.Namespace) -> int:
    from autotest.bisect.session import BisectOptions
    from autotest.bisect.session import bisect as run_bisect
    from autotest.files import require_folder
    from autotest.inputs.case import load_case
    from autotest.report.cost import format_device_seconds

    if args.results_dir is not None:
        require_folder(args.results_dir, "--results-dir")
    from autotest.inputs.run_limits import check_count, check_seed

    if args.max_runs is not None:
        check_count("--max-runs", args.max_runs)
    check_count("--jobs", args.jobs)
    if args.seed is not None:
        check_seed(args.seed, "--seed")
    case = load_case(args.case)
    outcome = run_bisect(case, BisectOptions(
        good=args.good, bad=args.bad, repo=args.framework_repo, all_commits=args.all_commits,
        slots=args.jobs, max_runs=args.max_runs, results_root=args.results_dir, seed=args.seed,
        progress=lambda line: echo(line), ray=_ray_placement(args, case.platform.gpus)))
    echo(f"bisect: {outcome.status}: {outcome.message}")
    for row in outcome.flipped:
        echo(f"  {row['check']}: last good {_number(row['good'])}, first bad {_number(row['bad'])} "
              f"(threshold {_number(row['threshold'])})")
    echo(f"bisect: {outcome.rounds} round(s), {outcome.runs} run(s), {format_device_seconds(outcome.device_seconds)}; "
          f"report: {outcome.folder / 'bisect.md'}")
    return outcome.exit_code


def _ray_placement(args: argparse.Namespace, gpus: int):  # -> RayPlacement | None (Ray's side imported lazily)
    from autotest.run.ray_tasks import RayPlacement, requested_resources

    resources = requested_resources(args.ray_address, args.ray_resource)
    return RayPlacement(args.ray_address, resources, num_gpus=float(gpus)) if args.ray_address else None


def _number(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.4g}"
