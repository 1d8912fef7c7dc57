"""The ``rl-autotest init`` command: argument parsing and printing over :func:`autotest.calibration.init.init_case`."""

from __future__ import annotations

import argparse
import re
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from autotest.errors import UsageError
from autotest.inputs.roles import PRESETS
from autotest.readers.registry import BUILTIN
from autotest.readers.registry import get as format_record
from autotest.terminal import echo

if TYPE_CHECKING:
    from autotest.calibration.init import InitOutcome

#: the built-in formats (autotest.readers.registry, whose records import no reader)
LOG_FORMATS = tuple(f.name for f in BUILTIN)
#: a case name names files (NAME.yaml, NAME.candidate.md) and folders (<results>/NAME/calibration-<stamp>-pid<N>):
#: well under a file system's 255-byte name limit
MAX_NAME_CHARS = 100
#: calibration.init's default limit for the one run (a unit test holds them equal)
DEFAULT_TIMEOUT_S = 1800.0

_ALLOWED = ("python", "work_dir", "seed")
_BRACES = re.compile(r"(?<!\$)\{([A-Za-z_][A-Za-z0-9_]*)\}")


def add_init_parser(sub: argparse._SubParsersAction, commands: dict[str, Callable[[argparse.Namespace], int]]) -> None:
    p = sub.add_parser(
        "init", help="run a training command once (or read its log) and write a case and a baseline spec",
        description="Run COMMAND once in a fresh work folder ({work_dir}; {seed} is 0; $WORK_DIR is set), or read "
                    "--log; list the metrics found with the role of each; write <cases>/NAME.yaml and "
                    "<baselines>/NAME.yaml with the checks proposed per role, every threshold a placeholder (an "
                    "ERROR until `rl-autotest calibrate NAME`). Never overwrites.",
        usage="rl-autotest init NAME [options] -- COMMAND [ARG ...]",
        epilog="COMMAND: the training command after --; {work_dir}, {seed} and {python} are substituted as in a "
               "case, e.g. -- {python} train.py --output-dir {work_dir} --seed {seed}")
    p.add_argument("name", help="the case name (the file names NAME.yaml)")
    p.add_argument("--log", type=Path, help="read this metric log instead of running the command once")
    p.add_argument("--format", default="auto", metavar="FORMAT",
                   help=f"the log's format: auto, {', '.join(LOG_FORMATS)} or a plugin's (console takes its pattern: "
                        "console:verl, console:megatron, console:<regex>)")
    p.add_argument("--preset", choices=list(PRESETS), help="the log vocabulary (default: inferred from the names)")
    p.add_argument("--marker", default="grpo", choices=["grpo", "mopd"], help="the case's pytest marker")
    p.add_argument("--timeout-s", type=float, default=DEFAULT_TIMEOUT_S, help="limit for the one run")
    p.add_argument("--cases-dir", type=Path, help="where the case goes (default: the project's first cases folder)")
    p.add_argument("--baselines-dir", type=Path, help="where the baseline spec goes (default: the project's)")
    p.add_argument("--results-dir", type=Path, help="root of the one run's folder (default: the project's results)")
    p.add_argument("--framework-spec", metavar="PATH:CASE",
                   help="propose the checks of the framework's own spec for CASE in PATH (e.g. "
                        "autotest/config.yaml:qwen3-rl-lmdeploy), read at the commit checked out here")
    commands["init"] = _init


def split_command(argv: list[str]) -> tuple[list[str], list[str]]:
    """``init``'s own arguments and the training command after ``--`` (kept verbatim, options and all)."""
    if argv[:1] == ["init"] and "--" in argv:
        cut = argv.index("--")
        return argv[:cut], argv[cut + 1:]
    return argv, []


def _command(args: argparse.Namespace) -> tuple[str, ...]:
    words = list(getattr(args, "launch_command", ()))
    if not words:
        raise UsageError("init: no command; write it after --, e.g. rl-autotest init my-case -- "
                         "{python} train.py --output-dir {work_dir} --seed {seed}")
    for i, word in enumerate(words):
        for match in _BRACES.finditer(word):
            if match.group(1) not in _ALLOWED:
                raise UsageError(f"init: command word {i + 1} {word!r}: unknown placeholder {{{match.group(1)}}}; "
                                 f"known: {', '.join('{' + a + '}' for a in _ALLOWED)}")
    return tuple(words)


def _folders(args: argparse.Namespace) -> tuple[Path, Path, bool]:
    """(cases folder, baselines folder, whether the case must name its baseline)."""
    from autotest.inputs.project import find_project

    project = find_project()
    if project is None and (args.cases_dir is None or args.baselines_dir is None):
        raise UsageError("init: no project table found from here upwards ([tool.rl-autotest] in pyproject.toml, or "
                         "rl-autotest.toml); add one (cases, baselines, results), or pass --cases-dir and "
                         "--baselines-dir")
    cases = (args.cases_dir or project.cases[0]).resolve()  # type: ignore[union-attr]
    baselines = (args.baselines_dir or project.baselines).resolve()  # type: ignore[union-attr]
    for flag, folder in (("--cases-dir", cases), ("--baselines-dir", baselines)):
        if folder.exists() and not folder.is_dir():
            raise UsageError(f"{flag}: {folder} is a file, not a folder")
    project_default = project is not None and project.contains(cases) and baselines == project.baselines
    return cases, baselines, not project_default


def _init(args: argparse.Namespace) -> int:
    from autotest.calibration.init import InitOptions, init_case
    from autotest.run.results_dir import default_results_root

    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", args.name):
        raise UsageError(f"init: {args.name!r} is not a case name; use letters, digits, '.', '_' and '-'")
    if len(args.name) > MAX_NAME_CHARS:
        raise UsageError(f"init: the case name is {len(args.name)} characters; keep it to {MAX_NAME_CHARS} or "
                         "fewer (it names the case and baseline files and every results folder)")
    if not args.timeout_s > 0:
        raise UsageError(f"--timeout-s: {args.timeout_s:g} is not a positive number of seconds")
    if args.format != "auto":
        format_record(args.format)  # an unknown format is one line before anything runs
    command = _command(args)
    cases, baselines, baseline_key = _folders(args)
    outcome = init_case(InitOptions(
        name=args.name, command=command, cases_dir=cases, baselines_dir=baselines,
        results_root=(args.results_dir or default_results_root()).resolve(), log=args.log, format=args.format,
        preset=args.preset, marker=args.marker, timeout_s=args.timeout_s, baseline_key=baseline_key,
        framework_spec=args.framework_spec,
        progress=lambda line: echo(line)))
    if not outcome.written:
        return _already(args.name, outcome)
    _print_proposal(outcome)
    echo(f"wrote: {outcome.case_path}")
    checks = outcome.proposal.checks if outcome.proposal else ()
    echo(f"wrote: {outcome.baseline_path} ({len(checks)} checks; every threshold is a placeholder, so any run "
          "against it is an ERROR until calibrated)")
    echo(f"next: rl-autotest calibrate {args.name}")
    return 0


def _already(name: str, outcome: InitOutcome) -> int:
    from autotest.inputs.baseline import load_baseline

    echo(f"init: {name}: {outcome.case_path} and {outcome.baseline_path} already exist; nothing run or written "
          "(init never overwrites)")
    pending = any(c.placeholder for c in load_baseline(outcome.baseline_path).checks)
    echo(f"next: rl-autotest calibrate {name}" if pending else f"next: rl-autotest run {name}")
    return 0


def _print_proposal(outcome: InitOutcome) -> None:
    proposal = outcome.proposal
    assert proposal is not None and outcome.log is not None
    ran = f", one run of {outcome.wall_s:.0f} s" if outcome.wall_s is not None else ""
    echo(f"log: {outcome.log} ({outcome.log_format}, {proposal.expected_steps} steps, {len(proposal.rows)} "
          f"metrics{ran})")
    echo(proposal.roles_line)
    width = max(len(r.metric) for r in proposal.rows)
    for row in proposal.rows:
        what = "checks: " + ", ".join(row.checks) if row.checks else row.note
        echo(f"  {row.metric:{width}}  {row.role or '-':16}  {what}")
