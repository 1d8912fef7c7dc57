"""The declared run flags (:mod:`autotest.inputs.run_flags`) as ``argparse`` arguments, and the one base run
request a command derives every run from.

A value is converted and checked while the command line is parsed (:func:`autotest.inputs.run_flags.convert`):
a bad one is :class:`Refused`, which ``main`` prints as one line (exit 2) before any command code runs. An old
spelling is accepted with a one-line notice naming the new one.
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any, Callable

from autotest.errors import UsageError
from autotest.inputs.run_flags import (FLAG, PAIRS, RESULTS_DEFAULT, Option, convert, options_for, rename_notice,
                                       renamed_in, request_fields)

if TYPE_CHECKING:
    from autotest.pipeline.options import RunOptions


class Refused(Exception):
    """A declared flag's bad value, raised through ``argparse`` (which would turn a ValueError into its own
    usage text); ``main`` prints it as one line."""

    def __init__(self, error: UsageError) -> None:
        super().__init__(str(error))


def help_text(option: Option, command: str, results_default: str | None = None) -> str:
    text = option.help_for(command)
    if RESULTS_DEFAULT in text:  # the default root is looked up only by the parsers that show it
        if results_default is None:
            from autotest.run.results_dir import DEFAULT_ROOT_HELP

            results_default = DEFAULT_ROOT_HELP
        text = text.replace(RESULTS_DEFAULT, results_default)
    return text


def _typed(option: Option) -> Callable[[str], Any]:
    def typed(raw: str) -> Any:
        try:
            return convert(option, raw)
        except UsageError as exc:
            raise Refused(exc) from None

    typed.__name__ = option.kind
    return typed


class _Declared(argparse.Action):
    """Stores a declared option's converted value (appends, for a repeatable one); an old spelling also says the
    new one, once."""

    def __init__(self, option_strings: list[str], dest: str, option: Option, renamed: bool = False,
                 **kwargs: Any) -> None:
        self.option, self.renamed = option, renamed
        super().__init__(option_strings, dest, **kwargs)

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:
        if self.renamed:
            print(rename_notice(option_string or "", self.option), file=sys.stderr)
        if self.option.kind == FLAG:
            values = True
        elif isinstance(values, list):  # argparse drops a lone "--" given as the value (--seed=--): nothing given
            raise Refused(UsageError(f"{self.option.flag}: empty" + (f"; {self.option.fix}" if self.option.fix
                                                                        else "")))
        if self.option.kind == PAIRS:
            values = [*(getattr(namespace, self.dest) or []), values]
        setattr(namespace, self.dest, values)


def add_declared(p: argparse.ArgumentParser, command: str) -> None:
    """Every declared option ``command`` takes, with its old spellings."""
    for option in options_for(command):
        for names, renamed in (((option.flag,), False), (renamed_in(option, command), True)):
            if not names:
                continue
            kwargs: dict[str, Any] = {"nargs": 0} if option.kind == FLAG else {"type": _typed(option),
                                                                               "metavar": option.metavar}
            if not renamed:
                kwargs["default"] = False if option.kind == FLAG else [] if option.kind == PAIRS else option.default
            p.add_argument(*names, dest=option.dest, action=_Declared, option=option, renamed=renamed,
                           help=argparse.SUPPRESS if renamed else help_text(option, command), **kwargs)


def ray_resources(args: argparse.Namespace) -> dict[str, float]:
    """``--ray-resource`` as a resource dict, for the Ray jobs or the Ray tasks the command was given (one)."""
    from autotest.run.ray_tasks import requested_resources

    jobs, tasks = getattr(args, "ray_jobs", None), getattr(args, "ray_tasks", None)
    if jobs and tasks:
        raise UsageError("--ray-jobs and --ray-tasks: give one (each launch as a Ray job, or each run as a Ray "
                         "task)")
    flags = " or ".join(f for f in ("--ray-jobs", "--ray-tasks") if hasattr(args, f[2:].replace("-", "_")))
    return requested_resources(jobs or tasks, getattr(args, "ray_resource", []), flags)


def base_request(args: argparse.Namespace, command: str, *, progress: Callable[[str], None] | None = None,
                 confirm: Callable[[str], bool] | None = None) -> RunOptions:
    """The run request every run of ``command`` derives from: each declared option it takes set in its field,
    the history hook (``--history``, ``--no-history``, ``--strict-history``) and the Ray job resources."""
    from autotest.cli.common import recorder
    from autotest.pipeline.options import RunOptions

    fields = request_fields(command, vars(args))
    resources = ray_resources(args) if hasattr(args, "ray_resource") else {}
    if getattr(args, "ray_jobs", None):
        fields["launch.ray_resources"] = resources
    if hasattr(args, "no_history"):
        fields["publish.after_results"] = recorder(args)
    fields["publish.progress"] = progress
    fields["launch.confirm"] = confirm
    return RunOptions().with_fields(fields)
