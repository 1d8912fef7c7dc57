"""``rl-autotest compare``: judge a metric log against a golden baseline, outside any run.

Its heavy parts (the judge, the report, the history) are imported when the command runs, not when the
parser is built: ``--help`` loads none of them, and ``compare`` without ``--out`` no report writer.
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

from autotest.cli.common import EXIT_ERROR, exit_code_for, recorder
from autotest.cli.flags import add_declared
from autotest.readers.registry import BUILTIN
from autotest.terminal import echo


def add_compare_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("compare", help="check a run's metric log against a golden baseline")
    p.add_argument("--baseline", required=True, type=Path, help="baseline YAML (baselines/<case>.yaml)")
    p.add_argument("--current", required=True, type=Path,
                   help="the metric log (tracker.jsonl, trainer_state.json, an event file), or a run's WORK_DIR")
    p.add_argument("--out", type=Path, help="results folder to write results.json, report.md and plots/")
    p.add_argument("--format", default="auto", metavar="FORMAT",
                   help=f"metric-log format: auto (by name and first row; a work dir is searched for each), "
                        f"{', '.join(f.name for f in BUILTIN)} or a plugin's (console takes its pattern: console:verl, "
                        "console:megatron, console:<regex>)")
    p.add_argument("--wall-time-s", type=float, help="measured end-to-end wall time, for the wall-time check")
    p.add_argument("--no-plots", action="store_true", help="skip the PNG plots")
    add_declared(p, "compare")  # the history hook: --history, --no-history, --strict-history (with --out)


def compare(args: argparse.Namespace) -> int:
    from autotest.errors import UsageError
    from autotest.files import require_writable
    from autotest.judge.model import PASS
    from autotest.judge.power import cost_and_power_phrase, power_warnings
    from autotest.judge.shadow import SHADOW, shadow_alarms, shadow_line
    from autotest.judge.verdict import compare_paths

    if args.wall_time_s is not None and not (args.wall_time_s >= 0 and math.isfinite(args.wall_time_s)):
        raise UsageError(f"--wall-time-s: {args.wall_time_s:g} is not a wall time; give the measured seconds (>= 0)")
    if args.out is not None:  # before judging: a verdict must have somewhere to go
        require_writable(args.out, "--out", advice="pass a folder on a writable disk")
    if args.strict_history and not args.out:
        raise UsageError("--strict-history: only with --out (compare records a verdict only when it writes a "
                         "results folder)")
    # the history hook (and its URL check) only where a verdict is recorded: with --out, or a URL given
    after_results = recorder(args) if args.out or args.history else None
    if args.out and not args.no_plots:
        from autotest.report import plot_worker

        plot_worker.prepare()  # its matplotlib import while the logs are read and judged, when a core is idle
    comparison = compare_paths(args.baseline, args.current, fmt=args.format, wall_time_s=args.wall_time_s)
    verdict = comparison.verdict
    unsaved: tuple[str, ...] = ()
    if args.out:
        from autotest.report.publish import publish

        published = publish(comparison, args.out, with_plots=not args.no_plots, after_results=after_results)
        verdict = published.verdict or verdict
        unsaved = published.unsaved
        if published.report_md is not None:
            echo(f"report: {published.report_md}")
    for warning in (*verdict.warnings, *power_warnings(verdict)):
        echo(f"warning: {warning}", file=sys.stderr)
    shadows = shadow_alarms(verdict.results)
    for result in verdict.results:
        if result.status != PASS and result.severity != SHADOW:
            echo(f"{result.status:5} {result.check_id}: {result.message}")
    for result in shadows:  # never the job's status: a gate-in-waiting says what it would have done
        echo(shadow_line(result))
    for finding in verdict.triage:
        if finding.primary:
            echo(f"next step: {finding.next_step}")
    phrase = cost_and_power_phrase(verdict)  # offline: no run, so no cost; a PASS states its MDE
    line = f"{verdict.case}: {verdict.status}" + (f" — {phrase}" if phrase else "")
    if unsaved:  # the verdict stands; its results folder is incomplete
        echo(f"{line} — results not saved: {unsaved[0]}")
        return EXIT_ERROR
    echo(line)
    return exit_code_for(verdict.status, verdict.environment_only)
