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


COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {"compare": _compare}


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
    return parser


def main(argv: Sequence[str] | None = None) -> int:
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
