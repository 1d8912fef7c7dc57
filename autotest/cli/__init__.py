"""The ``rl-autotest`` command: a thin shell over the library. Exit codes: ``EXIT_CODES_HELP`` (--help's epilog).

One module per command group (compare, run and cases, calibrate/baseline/power, bisect, nightly-bisect,
consistency; history and init live beside their packages); each imports its heavy parts inside the function that
runs it, and a command builds only its own parser, so ``--help`` and the light commands load no SQLAlchemy, pandas,
matplotlib, torch, Ray, MSProbe or SciPy (tests/integration/test_cli_imports.py pins it).
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from typing import Callable, Sequence

from autotest.cli.common import (CASE_HELP, EXIT_CODES_HELP, EXIT_ENVIRONMENT, EXIT_ERROR, EXIT_FAIL,
                                 EXIT_NOT_COLLECTED, EXIT_PASS, exit_code_for)
from autotest.cli.flags import Refused
from autotest.errors import UsageError
from autotest.redaction import MaskedStream, collect_secrets
from autotest.run.interrupts import describe, signals_as_interrupt
from autotest.terminal import echo

__all__ = ["CASE_HELP", "COMMANDS", "EXIT_ENVIRONMENT", "EXIT_ERROR", "EXIT_FAIL", "EXIT_NOT_COLLECTED", "EXIT_PASS", "build_parser",
           "exit_code_for", "main"]

#: each command, in --help's order: the module that builds its parser, and the builder (those given the
#: command table register their own runner in it)
PARSERS: tuple[tuple[str, str, str], ...] = (
    ("compare", "autotest.cli.compare", "add_compare_parser"),
    ("run", "autotest.cli.run", "add_run_parser"),
    ("ab", "autotest.cli.ab", "add_ab_parser"),
    ("cases", "autotest.cli.run", "add_cases_parser"),
    ("consistency", "autotest.cli.consistency", "add_consistency_parser"),
    ("calibrate", "autotest.cli.calibrate", "add_calibrate_parser"),
    ("power", "autotest.cli.calibrate", "add_power_parser"),
    ("bisect", "autotest.cli.bisect", "add_bisect_parser"),
    ("baseline", "autotest.cli.calibrate", "add_baseline_parser"),
    ("history", "autotest.history.cli", "add_history_parser"),
    ("nightly-bisect", "autotest.cli.nightly_bisect", "add_nightly_parser"),
    ("init", "autotest.calibration.init_cli", "add_init_parser"),
)
_REGISTER_THEMSELVES = frozenset({"history", "nightly-bisect", "init"})


def _runner(module: str, name: str) -> Callable[[argparse.Namespace], int]:
    def run(args: argparse.Namespace) -> int:
        return getattr(importlib.import_module(module), name)(args)

    return run


COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {
    name: _runner(module, name) for name, module, _ in PARSERS if name not in _REGISTER_THEMSELVES}


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The whole command line, or, given one command's name, that command alone: a command imports only its own
    parser's module (the others' cost start-up; ``--help`` and an unknown command build them all)."""
    parser = argparse.ArgumentParser(prog="rl-autotest", description=__doc__.splitlines()[0].split(" Exit codes")[0],
                                     epilog=EXIT_CODES_HELP)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, module, builder in PARSERS:
        if command in (None, name):
            add = getattr(importlib.import_module(module), builder)
            if name in _REGISTER_THEMSELVES:
                add(sub, COMMANDS)
            else:
                add(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:2] == ["consistency", "analyze"]:  # its own options beside the job's RESULTS_DIR form
        from autotest.consistency.cli import main as analyze_main

        return analyze_main(argv[2:])
    collect_secrets(argv=argv)  # before anything is printed or written: their values are masked everywhere
    command = argv[0] if argv and argv[0] in {name for name, _, _ in PARSERS} else None
    parser = build_parser(command)
    launch_command: list[str] = []
    if command == "init":
        from autotest.calibration.init_cli import split_command

        argv, launch_command = split_command(argv)
    out, err = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = MaskedStream(out), MaskedStream(err)
    try:
        try:
            args = parser.parse_args(argv)
        except Refused as exc:  # a declared flag's bad value: one line, before any command code runs
            print(f"rl-autotest: error: {exc}", file=sys.stderr)
            return EXIT_ERROR
        args.launch_command = launch_command
        with signals_as_interrupt():  # SIGTERM/SIGHUP (CI cancelling) take Ctrl-C's path: cleanup, verdict
            return COMMANDS[args.command](args)
    except UsageError as exc:
        echo(f"rl-autotest: error: {exc}", file=sys.stderr)
        return EXIT_ERROR
    except KeyboardInterrupt as exc:
        echo(f"rl-autotest: interrupted ({describe(exc)})", file=sys.stderr)
        return EXIT_ERROR
    except BrokenPipeError:  # the reader left (`rl-autotest cases | head`): no traceback, nothing more to say
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.__stdout__.fileno())  # Python's own flush at exit fails quietly
        return EXIT_ERROR
    finally:
        sys.stdout, sys.stderr = out, err
