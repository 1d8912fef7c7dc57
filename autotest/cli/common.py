"""What every ``rl-autotest`` command shares: exit codes, help texts and the history hook of ``run`` and
``compare``. Light on purpose: the parser imports it for ``--help``."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from autotest.history import HISTORY_ENV
from autotest.terminal import echo

EXIT_PASS, EXIT_FAIL, EXIT_ERROR = 0, 1, 2
CASE_HELP = "a case: its name (the project's cases, then the packaged demo cases) or its YAML file"
EXIT_NOT_COLLECTED = 3  # `consistency`: no collection hook wired for the framework (neutral in the nightly)
HISTORY_HELP = f"run history database URL (default: ${HISTORY_ENV}, else <results root>/history.sqlite)"


#: an environment outcome (sysexits' EX_TEMPFAIL): a performance gate the runner's contention explains; CI
#: retries it on a quiet runner and never merges on it (docs/running.md, "A busy runner")
EXIT_ENVIRONMENT = 75
#: every exit code, said once: the top-level --help's epilog (docs/running.md says the same in words)
EXIT_CODES_HELP = (f"exit codes: {EXIT_PASS} PASS, {EXIT_FAIL} FAIL, {EXIT_ERROR} ERROR or bad usage, "
                   f"{EXIT_ENVIRONMENT} an environment outcome (a performance gate the runner's contention explains: "
                   f"CI retries it on a quiet runner, never merges on it), {EXIT_NOT_COLLECTED} nothing collected "
                   "(consistency: no collection hook for the framework)")


def exit_code_for(status: str, environment: bool = False) -> int:
    """0 PASS, 1 FAIL, 75 an ERROR that is only the machine's (``environment``), else 2."""
    from autotest.judge.model import ERROR, FAIL, PASS

    if status == ERROR and environment:
        return EXIT_ENVIRONMENT
    return {PASS: EXIT_PASS, FAIL: EXIT_FAIL}.get(status, EXIT_ERROR)


def recorder(args: argparse.Namespace):
    """The history hook of ``run`` and ``compare``: None with --no-history; a record that cannot be written is
    a warning on stderr, and an ERROR verdict with --strict-history."""
    from autotest.errors import UsageError

    if args.no_history:
        if args.strict_history:
            raise UsageError("--strict-history and --no-history contradict each other; drop one")
        return None
    from autotest.history.database import resolve_url

    resolve_url(args.history, Path.cwd())  # a malformed URL is one line before anything runs, as in the hook

    def record(results_dir: Path) -> list[str]:
        # the store, drift and SQLAlchemy load only when a verdict is recorded (compare without --out: never)
        from autotest.history.drift import history_recorder

        return history_recorder(args.history, strict=args.strict_history,
                                warn=lambda line: echo(f"warning: {line}", file=sys.stderr))(results_dir)

    return record
