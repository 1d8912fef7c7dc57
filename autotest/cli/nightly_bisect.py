"""``rl-autotest nightly-bisect``: the nightly workflow's step that bisects tonight's PASS -> FAIL flips and drifts
(once for cases that changed together).
The history, the search and its launches are imported when the command runs."""

from __future__ import annotations

import argparse
import math
import os
from collections.abc import Callable
from pathlib import Path

from autotest.errors import UsageError
from autotest.terminal import echo

DEFAULT_MAX_RUNS = 12


def add_nightly_parser(subparsers: argparse._SubParsersAction,
                       commands: dict[str, Callable[[argparse.Namespace], int]]) -> None:
    p = subparsers.add_parser(
        "nightly-bisect", help="bisect every case whose last two nightlies in the history went PASS -> FAIL, or "
        "whose gated statistic drifted toward its threshold; once for cases that changed together (docs/bisect.md)",
        epilog="exit 0: done (a culprit found or not is in the summary); 1: the night went over its "
               "--budget-device-s; 2: error. Annotations (::error / ::warning) go to stdout, the summary to "
               "$GITHUB_STEP_SUMMARY when set")
    p.add_argument("--history", metavar="URL", help="history database URL (default: $RL_AUTOTEST_HISTORY, else "
                   "<results root>/history.sqlite)")
    p.add_argument("--results-dir", type=Path, help="results root: the history's default home and where the "
                   "bisect folders go")
    p.add_argument("--case", action="append", default=[], help="only this case (repeatable; default: every case "
                   "in the history)")
    p.add_argument("--tonight", action="append", default=[], type=Path, metavar="DIR",
                   help="tonight's results folders or roots, whose recorded cost counts against the budget")
    p.add_argument("--max-runs", type=int, default=DEFAULT_MAX_RUNS,
                   help=f"training runs one bisect may make, its two ends included (default: {DEFAULT_MAX_RUNS})")
    p.add_argument("--budget-device-s", type=float, help="device-seconds the whole night may spend, its own runs "
                   "and the bisects together (wall x GPUs, or wall x cores on CPU); none or inf: no limit")
    p.add_argument("--jobs", type=int, default=2, help="probes side by side a round (default: 2)")
    commands["nightly-bisect"] = _nightly_bisect


def _nightly_bisect(args: argparse.Namespace) -> int:
    from autotest.bisect.nightly import NightlyBudget, annotations, run_nightly_bisect, summary_lines
    from autotest.bisect.session import BisectOptions
    from autotest.files import require_folder
    from autotest.inputs.case import load_case
    from autotest.run.results_dir import default_results_root

    for folder in args.tonight:
        if not Path(folder).is_dir():
            raise UsageError(f"--tonight {folder}: no such folder; give tonight's results folders (or their root)")
    if args.results_dir is not None:
        require_folder(args.results_dir, "--results-dir")
    if args.budget_device_s is not None and not args.budget_device_s > 0:  # nan and 0 alike
        raise UsageError(f"--budget-device-s: {args.budget_device_s:g} is not a positive number of device-seconds")
    from autotest.inputs.run_limits import check_count

    check_count("--max-runs", args.max_runs)
    check_count("--jobs", args.jobs)
    report = run_nightly_bisect(
        args.history, Path(args.results_dir or default_results_root()).resolve(), args.tonight,
        NightlyBudget(args.max_runs, None if args.budget_device_s in (None, math.inf) else args.budget_device_s),
        load_case, cases=args.case or None,
        options=BisectOptions(good="", bad="", slots=args.jobs), say=lambda line: echo(line))
    lines = summary_lines(report)
    echo(*lines)
    for line in annotations(report):
        echo(line)
    summary = os.environ.get("GITHUB_STEP_SUMMARY")
    if summary:
        with open(summary, "a", encoding="utf-8") as out:
            out.write("\n".join(lines) + "\n")
    return 1 if report.over_budget else 0
