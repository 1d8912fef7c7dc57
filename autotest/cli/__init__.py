"""The ``rl-autotest`` command: a thin shell over the library. Exit 0 pass, 1 fail, 2 error or bad usage.

One module per command group (compare, run and cases, calibrate/baseline/power, bisect, nightly-bisect,
consistency; history and init live beside their packages); each imports its heavy parts inside the function that runs it, so
``--help`` and the light commands load no SQLAlchemy, pandas, matplotlib, torch, Ray, MSProbe or SciPy
(tests/integration/test_cli_imports.py pins it).
"""

from __future__ import annotations

import argparse
import sys
from typing import Callable, Sequence

from autotest.calibration.init_cli import add_init_parser, split_command
from autotest.cli.bisect import add_bisect_parser, bisect
from autotest.cli.calibrate import (
    add_baseline_parser,
    add_calibrate_parser,
    add_power_parser,
    baseline,
    calibrate,
    power,
)
from autotest.cli.common import CASE_HELP, EXIT_ERROR, EXIT_FAIL, EXIT_NOT_COLLECTED, EXIT_PASS, exit_code_for
from autotest.cli.compare import add_compare_parser, compare
from autotest.cli.consistency import add_consistency_parser, consistency
from autotest.cli.nightly_bisect import add_nightly_parser
from autotest.cli.run import add_cases_parser, add_run_parser, cases, run
from autotest.errors import UsageError
from autotest.history.cli import add_history_parser
from autotest.redaction import MaskedStream, collect_secrets
from autotest.run.interrupts import describe, signals_as_interrupt

__all__ = ["CASE_HELP", "COMMANDS", "EXIT_ERROR", "EXIT_FAIL", "EXIT_NOT_COLLECTED", "EXIT_PASS", "build_parser",
           "exit_code_for", "main"]

COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {
    "compare": compare, "run": run, "cases": cases, "consistency": consistency, "calibrate": calibrate,
    "baseline": baseline, "power": power, "bisect": bisect}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="rl-autotest", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    add_compare_parser(sub)
    add_run_parser(sub)
    add_cases_parser(sub)
    add_consistency_parser(sub)
    add_calibrate_parser(sub)
    add_power_parser(sub)
    add_bisect_parser(sub)
    add_baseline_parser(sub)
    add_history_parser(sub, COMMANDS)
    add_nightly_parser(sub, COMMANDS)
    add_init_parser(sub, COMMANDS)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:2] == ["consistency", "analyze"]:  # its own options beside the job's RESULTS_DIR form
        from autotest.consistency.cli import main as analyze_main

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
