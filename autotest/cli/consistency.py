"""``rl-autotest consistency RESULTS_DIR``: the consistency dump job an accuracy run requested.
(``consistency analyze`` is its own command line, in autotest.consistency.cli.) MSProbe and torch load only
when the job runs."""

from __future__ import annotations

import argparse
from pathlib import Path

from autotest.cli.common import EXIT_ERROR, EXIT_NOT_COLLECTED, EXIT_PASS
from autotest.terminal import echo


def add_consistency_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("consistency", help="run the consistency dump job an accuracy run requested "
                       "('consistency analyze --help': analyse MSProbe dumps made anywhere)",
                       epilog="exit codes: 0 collected and analysed; 2 error, or collection/analysis could not "
                       "conclude; 3 not collected: a side collected nothing (the case cannot run here, or an attach "
                       "point is missing from the installed framework; consistency/how_to_collect.md lists the "
                       "manual steps)")
    p.add_argument("results_dir", type=Path, help="the accuracy run's results folder (has consistency_request.json)")
    p.add_argument("--no-execute", action="store_true", help="generate the wrapper and configs; collect nothing")
    p.add_argument("--max-forwards", type=int, default=2, help="forwards dumped per side in the window")


def consistency(args: argparse.Namespace) -> int:
    from autotest.consistency.job import run_consistency_job

    outcome = run_consistency_job(args.results_dir, execute=not args.no_execute,
                                  max_forwards_per_side=args.max_forwards, progress=print)
    echo(f"root-cause report: {outcome.report_md}")
    echo(f"consistency: {outcome.summary}")
    if outcome.not_collected:  # the framework has no hook: neither a pass nor an error of the job
        return EXIT_NOT_COLLECTED
    return EXIT_PASS if outcome.executed and outcome.verdict != "cannot_conclude" else EXIT_ERROR
