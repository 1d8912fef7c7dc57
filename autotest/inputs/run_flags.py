"""The flags of the commands that run a case, declared once: one row per option.

Each :class:`Option` says its spelling, kind, help, bounds, the commands that take it, its pytest option, the
environment variable that gives its default, the :class:`autotest.pipeline.options.RunOptions` field it sets and
its old spellings. From this table come the ``argparse`` flags (:mod:`autotest.cli.flags`), the pytest options
(:mod:`autotest.plugin`), the base run request every run of a command derives from, the one-line refusal of a bad
value (:func:`convert`, before anything runs), the fuzzing of every flag (tests/unit/cli/test_flag_fuzz.py) and
the flag reference in docs/cli-reference.md. A row added here reaches every command it names.

``--ray-jobs`` submits each launch as a Ray job (a run, a replicate, a calibration run, an A/B side, a bisect
probe); ``--ray-tasks`` runs each calibration run or bisect probe, checkout and judge included, as a Ray task. The
old ``--ray-address`` meant the first in ``run`` and pytest and the second in ``calibrate`` and ``bisect``: it is
kept, for one release, as an alias of each there, with a notice naming the new spelling.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from dataclasses import field as _field
from pathlib import Path
from typing import Any, Mapping

from autotest.inputs.aa_nudge import FORMS as NUDGE_FORMS, PATTERN as NUDGE_PATTERN
from autotest.inputs.run_limits import COUNTS, SEED_LIMIT, check_count, check_seed, parse_seeds
from autotest.errors import UsageError
from autotest.files import require_folder
from autotest.inputs.replicate_limits import CAPS_HELP

#: kinds of option: a switch, a line of text, a whole number, a real number, a folder, a repeatable KEY=VALUE,
#: a comma-separated list of seeds
FLAG, TEXT, COUNT, NUMBER, FOLDER, PAIRS, SEEDS = "flag", "text", "count", "number", "folder", "pairs", "seeds"
#: the commands that run a case (``pytest`` stands for the plugin's options)
RUN, AB, CALIBRATE, BISECT, NIGHTLY, PYTEST = "run", "ab", "calibrate", "bisect", "nightly-bisect", "pytest"
#: numpy and the frameworks take 32-bit seeds (autotest.inputs.run_limits declares the bound)
SEED_MAX = SEED_LIMIT - 1
#: the most of any count a command takes (replicates with --force-replicates, runs, probes): past it is a typo
COUNT_MAX = 256
#: the placeholder a help text uses for the results root's default (looked up only when a parser is built)
RESULTS_DEFAULT = "{results_default}"
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
_WHOLE = re.compile(r"[+-]?[0-9]+")
_ENV_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
#: a fault NAME[:ARG]: a word the launch passes on as one argument, never a shell's or git's option
FAULT_SPEC = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*(?::[A-Za-z0-9_.,=+/:-]*)?")


@dataclass(frozen=True)
class Option:
    """One option of the commands that run a case (see the module doc)."""

    flag: str
    kind: str
    help: str
    #: the CLI commands that take it (a subcommand as "baseline promote")
    commands: tuple[str, ...]
    #: its pytest option, when the plugin takes it
    pytest: str | None = None
    #: the RunOptions field it sets ("launch.seed"); None: the command reads it itself
    field: str | None = None
    #: the environment variable that gives its default when it is absent, read by the library wherever the value
    #: is resolved; or, with ``env_in``, only by those shells ("pytest")
    env: str | None = None
    env_in: tuple[str, ...] | None = None
    default: Any = None
    minimum: float | None = None
    maximum: float | None = None
    #: what to do, after a refused value; ``below``: after a value under the minimum, when that says more
    fix: str = ""
    below: str = ""
    #: a NUMBER's range, in words ("a positive number of device-seconds"); a TEXT's shape ("a fault")
    range_text: str = ""
    #: a TEXT's shape: the value must match it whole
    pattern: re.Pattern[str] | None = None
    metavar: str | None = None
    #: an old spelling -> where it is still accepted (commands, "pytest"), with a notice, for one release
    renamed: Mapping[str, tuple[str, ...]] = _field(default_factory=dict)
    #: a command's own help where the shared one would mislead
    help_in: Mapping[str, str] = _field(default_factory=dict)

    @property
    def dest(self) -> str:
        return self.flag.lstrip("-").replace("-", "_")

    def env_for(self, command: str) -> str | None:
        """The environment variable that gives the default in ``command`` (None: none there)."""
        return self.env if self.env_in is None or command in self.env_in else None

    def help_for(self, command: str) -> str:
        return self.help_in.get(command, self.help)

    def bounds(self) -> str:
        """The bounds in words for the reference ("1 to 256"), or ""."""
        if self.kind == SEEDS:
            return f"0 to {SEED_MAX} each, 1 to {COUNT_MAX} distinct"
        if self.range_text:
            return self.range_text
        if self.minimum is None and self.maximum is None:
            return ""
        low = "" if self.minimum is None else _number(self.minimum)
        high = "" if self.maximum is None or math.isinf(self.maximum) else _number(self.maximum)
        return f"{low} to {high}" if high else f">= {low}"


_RESULTS = (RUN, AB, CALIBRATE, BISECT, NIGHTLY)
_HISTORY = ("compare", RUN, AB, CALIBRATE)

OPTIONS: tuple[Option, ...] = (
    # where runs go and what they are judged against
    Option("--results-dir", FOLDER, f"root of the per-case results folders (default: {RESULTS_DEFAULT})",
           _RESULTS, pytest="--results-dir", field="launch.results_root", env="RL_AUTOTEST_RESULTS", metavar="DIR",
           fix="pass a folder"),
    Option("--baselines-dir", FOLDER, "judge against <DIR>/<baseline file name> instead of the case's baseline",
           (RUN, AB, CALIBRATE, "power", "baseline promote"), metavar="DIR", fix="pass a folder",
           renamed={"--out": (CALIBRATE, "baseline promote")},
           help_in={CALIBRATE: "folder for the candidate (and the baseline --promote replaces); default: beside "
                               "the case's baseline",
                    "baseline promote": "folder holding the baseline and its candidate (default: beside the "
                                        "case's baseline)"}),
    # what runs
    Option("--seed", COUNT, "seed for cases that take one (default: the case's)", (RUN, BISECT),
           field="launch.seed", minimum=0, maximum=SEED_MAX, fix=f"give a seed from 0 to {SEED_MAX}",
           help_in={BISECT: "seed of each probe's first run (default: the case's)"}),
    Option("--seeds", SEEDS, "comma-separated seeds (instead of --replicates)", (AB,), metavar="S,S,...",
           fix="give distinct whole numbers, e.g. 11,12,13"),
    Option("--replicates", COUNT, "run K seeds side by side and judge their mean (default: the case's "
           f"replicates, else 1; {CAPS_HELP} without --force-replicates)", (RUN, AB),
           pytest="--replicates", field="judge.replicates", minimum=1, maximum=COUNT_MAX, metavar="K",
           fix="give the number of seeds to run and average",
           help_in={AB: "seeds per side (default 3: the case's first calibration seeds after those the paired "
                        "noise was measured on)"}),
    Option("--force-replicates", FLAG, "run more replicates than the platform's cap", (RUN,),
           pytest="--force-replicates", field="judge.force_replicates", renamed={"--force": (RUN,)}),
    Option("--adaptive-replicates", COUNT, "adaptive replicates: one seed, then K_MAX seeds judged on their mean "
           "when it lands near a pooled threshold (the false-alarm budget spent over both looks)", (RUN,),
           pytest="--adaptive-replicates", field="judge.adaptive_max", minimum=2, maximum=COUNT_MAX,
           metavar="K_MAX", fix="give the most seeds to run near a threshold", renamed={"--adaptive": (RUN,)}),
    Option("--fault", TEXT, "inject a fault NAME[:ARG] (embedded workloads)", (RUN,), field="launch.fault",
           pattern=FAULT_SPEC, range_text="a fault", fix="write NAME or NAME:ARG (letters, digits, '.', '_', '-'; "
           "the ARG also ',', '=', '+', '/')"),
    Option("--env", PAIRS, "environment for the launched command (repeatable; A/B: every run of both sides)",
           (RUN, AB), field="launch.env", metavar="KEY=VALUE", fix="KEY a variable name (letters, digits, '_')"),
    Option("--framework-ref", TEXT, "framework ref to test: branch, tag, sha or refs/pull/N/head (default: "
           "$RL_AUTOTEST_FRAMEWORK_REF, else the case's platform.framework.ref)", (RUN, CALIBRATE),
           pytest="--framework-ref", field="launch.framework_ref", env="RL_AUTOTEST_FRAMEWORK_REF", metavar="REF",
           fix="give a branch, tag, sha or refs/pull/N/head"),
    Option("--framework-repo", TEXT, "framework repository URL or local path to fetch the ref from (default: "
           "$RL_AUTOTEST_FRAMEWORK_REPO, else the case's, else the local clone in its env var)",
           (RUN, CALIBRATE, BISECT), pytest="--framework-repo", field="launch.framework_repo",
           env="RL_AUTOTEST_FRAMEWORK_REPO", metavar="URL", fix="give a repository URL or a local path"),
    # how it runs
    Option("--jobs", COUNT, "runs side by side on this node (default: as CPUs or GPU slices allow)",
           (CALIBRATE, BISECT, NIGHTLY), minimum=COUNTS["--jobs"].minimum, maximum=COUNTS["--jobs"].maximum,
           metavar="N", fix="give how many runs go side by side",
           help_in={BISECT: "probes side by side a round (default: 2)", NIGHTLY: "probes side by side a round "
                    "(default: 2)"}),
    Option("--ray-jobs", TEXT, "submit each launch (each replicate's, calibration run's, A/B side's, probe's) as "
           "a Ray job to this cluster (default for pytest: $RAY_ADDRESS)", (RUN, AB, CALIBRATE, BISECT),
           pytest="--ray-jobs", field="launch.ray_address", env="RAY_ADDRESS", env_in=(PYTEST,), metavar="ADDRESS",
           fix="give the cluster's address, e.g. http://HEAD:8265",
           renamed={"--ray-address": (RUN, PYTEST)}),
    Option("--ray-tasks", TEXT, "run each calibration run or bisect probe (checkout, launch, judge) as a Ray task "
           "on this cluster: the head's host:port, or 'local' (a shared filesystem)", (CALIBRATE, BISECT),
           metavar="ADDRESS", fix="give the head's host:port, or 'local'",
           renamed={"--ray-address": (CALIBRATE, BISECT)}),
    Option("--ray-resource", PAIRS, "a custom resource each Ray job or task asks for, so it lands on a node that "
           "offers it (repeatable)", (RUN, AB, CALIBRATE, BISECT), pytest="--ray-resource", metavar="NAME=AMOUNT",
           fix="e.g. --ray-resource probe=1"),
    Option("--gpu-wait-s", NUMBER, "how long a case waits for free GPUs on this node (default 21600 s: 6 h)",
           (RUN,), pytest="--gpu-wait-s", field="launch.gpu_wait_s", minimum=0, maximum=7 * 86400,
           range_text="a number of seconds from 0 to 604800", metavar="SECONDS", fix="e.g. 3600"),
    Option("--fail-fast", FLAG, "stop the run once a gate is decided failed (a per-step breach, a percentile gate "
           "past rescue, a window that ended, a pooled gate at an early look)", (RUN,), pytest="--fail-fast",
           field="judge.fail_fast"),
    Option("--strict-power", FLAG, "a PASS whose gates cannot catch the case's declared detect: targets is an "
           "ERROR (default: a warning)", (RUN,), pytest="--strict-power", field="judge.strict_power"),
    Option("--tier", TEXT, "run the case's shorter tier NAME (tiers: in the case): its steps only, judged on the "
           "gates they hold; the verdict states what it gave up", (RUN,), pytest="--tier", field="launch.tier",
           metavar="NAME", pattern=re.compile(r"[A-Za-z][A-Za-z0-9_-]*"), range_text="a tier name",
           fix="name a tier the case declares, e.g. --tier pr"),
    Option("--dry-run", FLAG, "show the card and the exact command; launch nothing", (RUN,), pytest="--dry-run",
           field="launch.dry_run"),
    Option("--yes", FLAG, "launch without asking for confirmation", (RUN,)),
    # the run history
    Option("--history", TEXT, "run history database URL (default: $RL_AUTOTEST_HISTORY, else <results "
           "root>/history.sqlite)", (*_HISTORY, NIGHTLY), pytest="--history", env="RL_AUTOTEST_HISTORY",
           metavar="URL", fix="give a database URL, e.g. sqlite:///history.sqlite",
           help_in={"compare": "with --out: run history database URL (default: $RL_AUTOTEST_HISTORY, else <results "
                               "root>/history.sqlite)"}),
    Option("--no-history", FLAG, "do not record the verdicts in the run history", _HISTORY, pytest="--no-history"),
    Option("--strict-history", FLAG, "a verdict the history could not record is an ERROR (exit 2), not a warning "
           "(the nightly uses it)", _HISTORY, pytest="--strict-history"),
    # budgets and counts of the commands that make many runs
    Option("--runs", COUNT, "number of runs (default: the baseline's calibration.runs, else 3)", (CALIBRATE,),
           minimum=COUNTS["--runs"].minimum, maximum=COUNTS["--runs"].maximum,
           metavar="N", fix="give how many runs to measure the noise on",
           below="run-to-run noise needs at least two runs"),
    Option("--last", COUNT, "with --from-history: how many passing runs (default: --runs)", (CALIBRATE,),
           minimum=COUNTS["--runs"].minimum, maximum=COUNTS["--runs"].maximum,
           metavar="N", fix="give how many passing runs to take",
           below="run-to-run noise needs at least two runs"),
    Option("--max-runs", COUNT, "stop after this many training runs, the two ends included (a budget)",
           (BISECT, NIGHTLY), minimum=COUNTS["--max-runs"].minimum,
           maximum=COUNTS["--max-runs"].maximum, metavar="N",
           fix="give the most training runs one bisect may make",
           below="the good and bad ends take two runs",
           help_in={NIGHTLY: "training runs one bisect may make, its two ends included (default: 12)"}),
    Option("--budget-device-s", NUMBER, "device-seconds the whole night may spend, its own runs and the bisects "
           "together (wall x GPUs, or wall x cores on CPU); inf: no limit", (NIGHTLY,), minimum=0,
           maximum=math.inf, range_text="a positive number of device-seconds", metavar="SECONDS"),
    Option("--nights", COUNT, "with --shadow: the last K trusted gate runs it must have held (default 7)",
           ("baseline promote",), default=7, minimum=1, maximum=3650, metavar="K", fix="give e.g. --nights 7"),
    Option("--allowed", COUNT, "with --shadow: false alarms it may have had (default 0)", ("baseline promote",),
           default=0, minimum=0, maximum=3650, metavar="N", fix="give e.g. --allowed 0"),
    Option("--steps", FLAG, "also print the MDE of every gate by run length: one row per prefix where another gate "
           "can be judged, 'not judged' where its steps lie beyond", ("power",)),
    Option("--perturbation", TEXT, "with --paired: how the second run of each A/A pair is nudged (default: the "
           "baseline's paired.perturbation, else RL_AUTOTEST_AA_PERTURB=1 for an embedded workload and optimizer-ulp:1 "
           "for any other trainer; docs/ab.md, \"The nudge\")", (CALIBRATE,), metavar="NUDGE",
           pattern=NUDGE_PATTERN, range_text="a perturbation", fix="write one of " + NUDGE_FORMS),
    Option("--allow-dirty", FLAG, "calibrate from an uncommitted tree (recorded in the provenance)", (CALIBRATE,),
           pytest="--allow-dirty"),
    # the plugin's own
    Option("--strict-cases", FLAG, "a case that cannot run here fails instead of skipping (nightly)", (),
           pytest="--strict-cases"),
    Option("--packaged-cases", FLAG, "in a project ([tool.rl-autotest]), also run the harness's packaged demo "
           "cases", ("cases",), pytest="--packaged-cases", renamed={"--packaged": ("cases",)},
           help_in={"cases": "in a project, also list the packaged demo cases"}),
    Option("--ab-base", TEXT, "judge each case paired A/B: this REF as base, the --framework-ref (or the case as it "
           "is) as head, on --replicates seeds (default 3); see docs/ab.md", (), pytest="--ab-base", metavar="REF",
           fix="give clean, fault:NAME, variant:NAME or a framework ref"),
    Option("--ab-split", FLAG, "with --ab-base: a failed A/B also trains each side on the other's rollout batches, "
           "to say whether the change lives in the trainer or the rollout (cases with a replay: section)", (),
           pytest="--ab-split"),
    Option("--ab-if-environment-changed", FLAG, "nightly: a case whose golden was calibrated in another environment "
           "(packages, GPU, driver) is judged A/B against the last trusted commit in the history instead", (),
           pytest="--ab-if-environment-changed"),
)

BY_FLAG = {option.flag: option for option in OPTIONS}


def options_for(command: str) -> tuple[Option, ...]:
    """The declared options ``command`` takes (``pytest``: the plugin's), in the table's order."""
    if command == PYTEST:
        return tuple(o for o in OPTIONS if o.pytest)
    return tuple(o for o in OPTIONS if command in o.commands)


def request_fields(command: str, values: Mapping[str, Any]) -> dict[str, Any]:
    """The RunOptions fields (``"launch.seed"`` -> value) the declared options of ``command`` set, from their
    values by dest; an unset value (None) leaves the field's default."""
    fields: dict[str, Any] = {}
    for option in options_for(command):
        value = values.get(option.dest)
        if option.field is None or value is None:
            continue
        fields[option.field] = dict(item.partition("=")[::2] for item in value) if option.kind == PAIRS else value
    return fields


def renamed_in(option: Option, command: str) -> tuple[str, ...]:
    """The old spellings ``command`` still accepts for ``option``."""
    return tuple(old for old, where in option.renamed.items() if command in where)


def rename_notice(old: str, option: Option) -> str:
    return f"rl-autotest: {old} is now {option.flag} (the old spelling goes in the next release)"


def convert(option: Option, raw: Any) -> Any:
    """``raw`` (the text given to the flag; a bool for a FLAG) as the option's value, or a UsageError of one line
    naming the flag, the value and what to do."""
    if option.kind == FLAG:
        return bool(raw)
    if not isinstance(raw, str):  # a default, already typed
        return raw
    flag, fix = option.flag, f"; {option.fix}" if option.fix else ""
    if option.pattern is not None and not option.pattern.fullmatch(raw):
        raise UsageError(f"{flag}: {raw!r} is not {option.range_text}{fix}")
    if not raw.strip():
        raise UsageError(f"{flag}: empty{fix}")
    if _CONTROL.search(raw):
        raise UsageError(f"{flag}: {raw!r} holds a control character{fix}")
    if option.kind == TEXT:
        return raw
    if option.kind == FOLDER:
        require_folder(Path(raw), flag)
        return Path(raw)
    if option.kind == PAIRS:
        key, sep, _ = raw.partition("=")
        if not sep or not key.strip() or (option.field == "launch.env" and not _ENV_KEY.fullmatch(key)):
            raise UsageError(f"{flag} {raw!r}: give {option.metavar}{fix}")
        return raw
    if option.kind == SEEDS:
        return _seeds(option, raw)
    if option.kind == COUNT:
        if not _WHOLE.fullmatch(raw.strip()):
            raise UsageError(f"{flag}: {raw!r} is not a whole number{fix}")
        value = int(raw)
        # seeds and the counts run_limits declares keep its one wording (the case files' seeds use it too)
        if option.field == "launch.seed":
            return check_seed(value, flag)
        if flag in COUNTS:
            return check_count(flag, value, why=option.below or None)
        if option.minimum is not None and value < option.minimum:
            why = option.below or option.fix
            raise UsageError(f"{flag}: {value} is below {_number(option.minimum)}" + (f"; {why}" if why else ""))
        if option.maximum is not None and value > option.maximum:
            raise UsageError(f"{flag}: {value} is above {_number(option.maximum)}{fix}")
        return value
    assert option.kind == NUMBER, option.kind
    try:
        if not raw.isascii():  # float() reads other scripts' digits ("١" is 1.0): never what was meant
            raise ValueError(raw)
        number = float(raw)
    except ValueError:
        raise UsageError(f"{flag}: {raw!r} is not {option.range_text}{fix}") from None
    low = option.minimum if option.minimum is not None else -math.inf
    high = option.maximum if option.maximum is not None else math.inf
    # a NUMBER's minimum is exclusive when its range says "positive"
    positive = "positive" in option.range_text
    if math.isnan(number) or number > high or number < low or (positive and number <= low):
        raise UsageError(f"{flag}: {number:g} is not {option.range_text}{fix}")
    return number


def _seeds(option: Option, raw: str) -> tuple[int, ...]:
    words = [w.strip() for w in raw.split(",")]
    if not all(_WHOLE.fullmatch(w) for w in words):
        raise UsageError(f"{option.flag}: {raw!r} is not a comma-separated list of whole numbers; {option.fix}")
    return parse_seeds(raw, option.flag, COUNT_MAX)  # distinct, each a seed: the bounds of run_limits


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else f"{value:g}"
