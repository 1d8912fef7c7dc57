"""The ``rl-autotest`` command: a thin shell over the library. Exit 0 pass, 1 fail, 2 error or bad usage."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Callable, Sequence

from autotest.errors import UsageError
from autotest.results import FAIL, PASS

EXIT_PASS, EXIT_FAIL, EXIT_ERROR = 0, 1, 2


def exit_code_for(status: str) -> int:
    return {PASS: EXIT_PASS, FAIL: EXIT_FAIL}.get(status, EXIT_ERROR)


def _compare(args: argparse.Namespace) -> int:
    from autotest.compare import compare_paths
    from autotest.publish import publish

    comparison = compare_paths(args.baseline, args.current, fmt=args.format, wall_time_s=args.wall_time_s)
    verdict = comparison.verdict
    if args.out:
        published = publish(comparison, args.out, with_plots=not args.no_plots)
        print(f"report: {published.report_md}")
    for warning in verdict.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    for result in verdict.results:
        if result.status != PASS:
            print(f"{result.status:5} {result.check_id}: {result.message}")
    for finding in verdict.triage:
        if finding.primary:
            print(f"next step: {finding.suggestion}")
    print(f"{verdict.case}: {verdict.status}")
    return exit_code_for(verdict.status)


def _confirm_on_terminal(card: str) -> bool:
    print(card)
    if not sys.stdin.isatty():
        raise UsageError("not on a terminal: pass --yes to launch without confirmation")
    return input("Launch this run? [y/N] ").strip().lower() in ("y", "yes")


def _run(args: argparse.Namespace) -> int:
    from autotest.cases import load_case
    from autotest.runner import DRY_RUN, SKIP, RunOptions, run_case

    def show(card: str) -> bool:
        print(card)
        return True

    run = run_case(load_case(args.case), RunOptions(
        results_root=args.results_dir.resolve(), seed=args.seed, fault=args.fault, dry_run=args.dry_run,
        fail_fast=args.fail_fast, progress=print, ray_address=args.ray_address,
        confirm=show if args.yes else _confirm_on_terminal))
    if run.status == DRY_RUN and args.dry_run:
        print(run.card)
    if run.verdict is not None:
        for result in run.verdict.failing():
            print(f"{result.status:5} {result.check_id}: {result.message}")
    print(run.summary_line())
    if run.status == DRY_RUN:
        return EXIT_PASS if args.dry_run else EXIT_ERROR
    return EXIT_ERROR if run.status == SKIP else exit_code_for(run.status)


def _cases(args: argparse.Namespace) -> int:
    from autotest.cases import list_cases
    from autotest.platform import check_platform

    for case in list_cases():
        check = check_platform(case)
        where = "runnable here" if check.runnable else f"skips here: {check.skip_reason}"
        print(f"{case.name:34} [{','.join(case.markers)}] {where}")
    return EXIT_PASS


def _consistency(args: argparse.Namespace) -> int:
    from autotest.consistency.job import run_consistency_job

    outcome = run_consistency_job(args.results_dir, execute=not args.no_execute,
                                  max_forwards_per_side=args.max_forwards, progress=print)
    print(f"root-cause report: {outcome.report_md}")
    print(f"consistency: {outcome.summary}")
    return EXIT_PASS if outcome.executed and outcome.verdict != "cannot_conclude" else EXIT_ERROR


COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {
    "compare": _compare, "run": _run, "cases": _cases, "consistency": _consistency}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="rl-autotest", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser("compare", help="check a run's metric log against a golden baseline")
    p.add_argument("--baseline", required=True, type=Path, help="baseline YAML (baselines/<case>.yaml)")
    p.add_argument("--current", required=True, type=Path, help="tracker.jsonl, or a run's WORK_DIR")
    p.add_argument("--out", type=Path, help="results folder to write results.json, report.md and plots/")
    p.add_argument("--format", default="auto", choices=["auto", "xtuner", "verl"], help="metric-log format")
    p.add_argument("--wall-time-s", type=float, help="measured end-to-end wall time, for the wall-time check")
    p.add_argument("--no-plots", action="store_true", help="skip the PNG plots")

    p = sub.add_parser("run", help="run one case end to end (card, launch, compare, report)")
    p.add_argument("case", help="case name (autotest/cases/<name>.yaml) or a case file")
    p.add_argument("--results-dir", type=Path, default=Path("results"), help="root of the per-case results folders")
    p.add_argument("--seed", type=int, help="seed for cases that take one (default: the case's)")
    p.add_argument("--fault", help="inject a fault NAME[:ARG] (embedded workloads)")
    p.add_argument("--fail-fast", action="store_true", help="stop the run at the first per-step gate failure")
    p.add_argument("--ray-address", help="submit the launch as a Ray job to this cluster")
    p.add_argument("--dry-run", action="store_true", help="show the card and the exact command; launch nothing")
    p.add_argument("--yes", action="store_true", help="launch without asking for confirmation")

    sub.add_parser("cases", help="list the cases and whether each can run here")

    p = sub.add_parser("consistency", help="run the consistency dump job an accuracy run requested "
                       "('consistency analyze --help': analyse MSProbe dumps made anywhere)")
    p.add_argument("results_dir", type=Path, help="the accuracy run's results folder (has consistency_request.json)")
    p.add_argument("--no-execute", action="store_true", help="generate the wrapper and configs; collect nothing")
    p.add_argument("--max-forwards", type=int, default=2, help="forwards dumped per side in the window")

    from autotest.cli_calibrate import add_commands

    add_commands(sub, COMMANDS)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:2] == ["consistency", "analyze"]:  # its own options beside the job's RESULTS_DIR form
        from autotest.consistency.cli import main as analyze_main

        return analyze_main(argv[2:])
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return COMMANDS[args.command](args)
    except UsageError as exc:
        print(f"rl-autotest: error: {exc}", file=sys.stderr)
        return EXIT_ERROR
    except KeyboardInterrupt:
        print("rl-autotest: interrupted", file=sys.stderr)
        return EXIT_ERROR


if __name__ == "__main__":
    sys.exit(main())
