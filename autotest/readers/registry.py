"""The metric-log formats: one :class:`ReaderFormat` record per format, built in or from a plugin.

Every list of formats derives from here: a case's ``tracker.format``, ``compare --format`` and ``init
--format``, where :mod:`autotest.inputs.log_search` looks for a run's log, what a results folder calls its
copy (:mod:`autotest.inputs.tracker_layout`), and the table in docs/readers.md (a unit test holds it equal).

A record names its reader as ``"module:function"`` and imports it only when a log of that format is read,
so this module imports nothing of the harness: the inputs and the launcher read the records without
loading any reader (or tensorboard, or a plugin's dependencies).

Third-party readers register through the entry-point group :data:`ENTRY_POINT_GROUP`; the entry point
names a :class:`ReaderFormat` object, e.g. in the plugin's ``pyproject.toml``::

    [project.entry-points."rl_autotest.readers"]
    my-format = "my_plugin.reader:FORMAT"

They are loaded once, the first time a format list is asked for (:func:`load_plugins`); a plugin that
cannot be loaded (whatever it raises, ``SystemExit`` included: only Ctrl-C passes) is one error line naming it and
its entry point, and so is a plugin's reader, sniffer or option check that raises, or a reader that returns
something other than a Trace (:func:`autotest.readers.reading.read_trace` checks).
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from importlib.metadata import entry_points
from typing import Callable

from autotest.errors import UsageError
from autotest.terminal import printable

ENTRY_POINT_GROUP = "rl_autotest.readers"
#: "name:option" — a format that takes an option (the console reader's pattern) carries it after a colon
OPTION_SEPARATOR = ":"


@dataclass(frozen=True)
class Layout:
    """Where one kind of log is found in a run's work dir (:func:`autotest.inputs.log_search.find_logs`)."""

    #: the kind's name, as messages say it ("TensorBoard events")
    kind: str
    #: file-name globs, relative to the work dir
    patterns: tuple[str, ...]
    #: how the matches are taken: "first" (the first pattern's file, at its exact place), "each" (every file
    #: matched up to ``depth`` folders down), "newest" (the newest such file; trainer_state.json: the highest
    #: checkpoint of the output dir written last), "folder" (the folder holding every file matched anywhere below)
    pick: str
    #: how a "not found" message says where it looked
    looked_for: str
    #: how many folders down "each" and "newest" look
    depth: int = 3
    #: a match counts only with this entry beside it, and the log is then their folder (an MLflow run's metrics/)
    beside: str | None = None
    #: searched in every work dir (False: only when its format is asked for; a ``*.log`` or ``*.csv`` is rarely a
    #: metric log)
    always: bool = True


@dataclass(frozen=True)
class ReaderFormat:
    """One metric-log format: how it is recognised, found, copied and read."""

    #: what a case's ``tracker.format`` and ``--format`` say
    name: str
    #: one line for the docs' table and the help
    doc: str
    #: the reader, ``"module:function"``; called as ``function(path, keep, option)`` and returns a Trace
    reader: str
    #: where a run's work dir holds it, most preferred first (kinds shared with other formats are searched once)
    layouts: tuple[Layout, ...]
    #: the copy's name in a results folder; a file takes the one with its suffix, else the first
    copy_names: tuple[str, ...]
    #: file-name globs that say a file is of this format without opening it (``*tfevents*``)
    names: tuple[str, ...] = ()
    #: ``"module:function"`` told a file's first row (dict, None if not JSON) and its first line with content;
    #: returns the format (with its option) when the file is of it, else None
    sniff: str | None = None
    #: the log is a folder (copied whole: the files matching ``copy_glob`` below it)
    folder: bool = False
    copy_glob: str = "*"
    #: the log is UTF-8 text (a NUL byte in it means a binary file was given)
    text: bool = True
    #: what the option after ``name:`` is (None: the format takes none)
    option: str | None = None
    #: ``"module:function"`` that raises ValueError (what is wrong) for an option it cannot use; checked when
    #: a case loads, so it must import nothing heavy
    check_option: str | None = None
    #: what to write instead of a bad option
    option_fix: str = ""
    #: the pip extra its reader needs (None: none)
    extra: str | None = None
    #: how a "no ... at <place>" message names the log (None: "<name> metric log")
    called: str | None = None
    #: asked last when sniffing: the format of any JSON text no other format claims
    fallback: bool = False

    @property
    def layouts_kinds(self) -> tuple[str, ...]:
        return tuple(layout.kind for layout in self.layouts)

    @property
    def origin(self) -> str | None:
        """For a plugin's format, "reader plugin 'x' (entry point ...)"; None for a built-in one."""
        return _origins.get(self.name) if self not in BUILTIN else None

    def describe_reader(self) -> str:
        """How an error names this format's reader: its plugin and entry point, or the built-in function."""
        return self.origin or f"the {self.name} reader {self.reader!r}"

    def load_reader(self) -> Callable:
        return _guarded(_resolve(self.reader, self.name, self.origin), self.origin, f"reader {self.reader!r}")

    def load_sniffer(self) -> Callable | None:
        if not self.sniff:
            return None
        return _guarded(_resolve(self.sniff, self.name, self.origin), self.origin, f"sniffer {self.sniff!r}")

    def option_error(self, option: str) -> str | None:
        """What is wrong with ``option`` (None: it can be used)."""
        if self.check_option is None:
            return None
        check = _resolve(self.check_option, self.name, self.origin)
        try:
            _guarded(check, self.origin, f"option check {self.check_option!r}", passing=(ValueError,))(option)
        except ValueError as exc:
            return str(exc)
        return None

    def copy_name(self, suffix: str) -> str:
        return next((n for n in self.copy_names if suffix and n.endswith(suffix)), self.copy_names[0])


def _resolve(target: str, name: str, origin: str | None = None) -> Callable:
    module, _, attr = target.partition(":")
    try:
        return getattr(importlib.import_module(module), attr)
    except KeyboardInterrupt:
        raise
    except BaseException as exc:  # noqa: BLE001 - a plugin's module may raise anything (SystemExit) on import
        if origin is None and not isinstance(exc, (ImportError, AttributeError)):
            raise  # a built-in reader's module failing so is a bug of ours: its traceback is the report
        where = f"{origin}: its {target!r}" if origin else f"the {name} reader {target!r}"
        raise UsageError(f"{where} cannot be loaded ({_raised(exc)}); "
                         + ("fix or uninstall the plugin" if origin else "reinstall the package that provides it")
                         ) from None


def _raised(exc: BaseException) -> str:
    """``Kind: message`` of an exception, on one line."""
    return printable(f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__)


def _guarded(function: Callable, origin: str | None, role: str,
             passing: tuple[type[BaseException], ...] = ()) -> Callable:
    """``function`` as called for a plugin (``origin``): whatever it raises but a UsageError (its own one line),
    Ctrl-C or ``passing`` is one UsageError naming the plugin, its entry point and the function. A built-in
    reader's function is returned as it is."""
    if origin is None:
        return function

    def call(*args: object) -> object:
        try:
            return function(*args)
        except (UsageError, KeyboardInterrupt, *passing):
            raise
        except BaseException as exc:  # noqa: BLE001 - SystemExit too: a plugin never ends the harness
            raise UsageError(f"{origin}: its {role} raised {_raised(exc)}; fix or uninstall the plugin") from None

    return call


_XTUNER_TRACKER = "logs/exp_tracking/tracker.jsonl"
XTUNER_LAYOUT = Layout("xtuner tracker", (_XTUNER_TRACKER, "exp_tracking/tracker.jsonl", "tracker.jsonl"), "first",
                       f"xtuner tracker (<14-digit timestamp>/{_XTUNER_TRACKER}, {_XTUNER_TRACKER}, tracker.jsonl)")
JSONL_LAYOUT = Layout("JSONL log", ("*.jsonl",), "each",
                      "JSONL logs of verl, a Hugging Face TrainerCallback or a W&B history export (*.jsonl up to "
                      "3 levels down)")
TRAINER_STATE_LAYOUT = Layout("trainer_state.json", ("trainer_state.json",), "newest",
                              "Hugging Face trainer_state.json (at the top, else the newest up to 3 levels down, "
                              "e.g. <output_dir>/checkpoint-<N>/)")
TENSORBOARD_LAYOUT = Layout("TensorBoard events", ("*tfevents*",), "folder",
                            "TensorBoard event files (events.out.tfevents.* below it)")
MLFLOW_LAYOUT = Layout("MLflow run", ("meta.yaml",), "newest",
                       "MLflow file-store runs (mlruns/<experiment>/<run>/meta.yaml beside metrics/, the newest "
                       "up to 4 levels down)", depth=4, beside="metrics")
WANDB_LAYOUT = Layout("W&B offline run", ("run-*.wandb",), "newest",
                      "W&B offline runs (wandb/offline-run-*/run-*.wandb, the newest up to 3 levels down)")
CSV_LAYOUT = Layout("CSV history", ("*.csv",), "each", "W&B history exports (*.csv with a _step column; only with "
                    "--format wandb)", always=False)
CONSOLE_LAYOUT = Layout("console log", ("*.log",), "each", "console logs (*.log up to 3 levels down; only "
                        "with --format console:<pattern>)", always=False)

_R = "autotest.readers."
BUILTIN: tuple[ReaderFormat, ...] = (
    ReaderFormat("xtuner", "xtuner tracker.jsonl: one JSON object per line, every row has step", _R + "xtuner:read_xtuner",
                 (XTUNER_LAYOUT, JSONL_LAYOUT), ("tracker.jsonl",), sniff=_R + "xtuner:sniff", fallback=True,
                 called="tracker.jsonl"),
    ReaderFormat("verl", "verl's JSONL file logger: {\"step\": N, \"data\": {metric: value}} per line",
                 _R + "verl:read_verl", (JSONL_LAYOUT,), ("tracker.jsonl",), sniff=_R + "verl:sniff"),
    ReaderFormat("hf-trainer", "Hugging Face Trainer (TRL): trainer_state.json's log_history, or a TrainerCallback's "
                 "JSONL", _R + "hf_trainer:read_hf_trainer", (TRAINER_STATE_LAYOUT, JSONL_LAYOUT),
                 ("trainer_state.json", "tracker.jsonl"), names=("*.json",), sniff=_R + "hf_trainer:sniff"),
    ReaderFormat("tensorboard", "TensorBoard event files (a file, or every one below a folder)",
                 _R + "tensorboard:read_tensorboard", (TENSORBOARD_LAYOUT,), ("tensorboard",), names=("*tfevents*",),
                 folder=True, copy_glob="*tfevents*", text=False, extra="tensorboard",
                 called="TensorBoard event files"),
    ReaderFormat("mlflow", "MLflow file store: a run's metrics/<key> files of 'timestamp value step' lines",
                 _R + "mlflow_store:read_mlflow", (MLFLOW_LAYOUT,), ("mlflow-run",), folder=True, text=False),
    ReaderFormat("wandb", "Weights & Biases: an offline run's run-*.wandb, or an exported history (CSV or JSON lines "
                 "with _step)", _R + "wandb_history:read_wandb", (WANDB_LAYOUT, CSV_LAYOUT, JSONL_LAYOUT),
                 ("wandb-run.wandb", "history.csv", "tracker.jsonl"), names=("*.wandb", "*.csv"),
                 sniff=_R + "wandb_history:sniff", text=False, extra="wandb"),
    ReaderFormat("console", "console lines matched by a pattern: console:verl, console:megatron or console:<regex>",
                 _R + "console:read_console", (CONSOLE_LAYOUT,), ("console.log",), sniff=_R + "console:sniff",
                 option="the line pattern: a preset (verl, megatron) or a regex with a named group step and one "
                        "named group per metric", check_option=_R + "console_pattern:compile_pattern",
                 option_fix="write a preset (verl, megatron) or a regex with a named group (?P<step>\\d+) and one "
                            "named group per metric, e.g. 'step (?P<step>\\d+) loss (?P<loss>\\S+)'"),
)

_plugins: tuple[ReaderFormat, ...] | None = None
#: each plugin format's name -> how errors name it: "reader plugin 'x' (entry point ... = '...', from <dist>)"
_origins: dict[str, str] = {}


def load_plugins() -> tuple[ReaderFormat, ...]:
    """The formats third-party packages register under :data:`ENTRY_POINT_GROUP`, loaded once.

    A plugin that fails to import, names something that is not a :class:`ReaderFormat`, or takes a name
    already registered raises one :class:`~autotest.errors.UsageError` line naming it and its entry point.
    """
    global _plugins
    if _plugins is None:
        _origins.clear()
        found: list[ReaderFormat] = []
        taken = {f.name for f in BUILTIN}
        for point in sorted(entry_points(group=ENTRY_POINT_GROUP), key=lambda p: p.name):
            where = f"reader plugin {point.name!r} (entry point {ENTRY_POINT_GROUP} = {point.value!r}" + \
                (f", from {point.dist.name}" if point.dist is not None else "") + ")"
            try:
                record = point.load()
            except KeyboardInterrupt:
                raise
            except BaseException as exc:  # noqa: BLE001 - whatever a plugin raises (SystemExit(0) too), one line
                raise UsageError(f"{where} cannot be loaded: {_raised(exc)}; fix or uninstall the plugin") from None
            if not isinstance(record, ReaderFormat):
                raise UsageError(f"{where} names a {type(record).__name__}, not an "
                                 "autotest.readers.registry.ReaderFormat; point the entry point at one")
            if record.name != point.name:
                raise UsageError(f"{where} names format {record.name!r}; call the entry point after its format "
                                 f"({record.name} = ...)")
            if record.name in taken or OPTION_SEPARATOR in record.name:
                why = "is already registered" if record.name in taken else f"contains {OPTION_SEPARATOR!r}"
                raise UsageError(f"{where}: format name {record.name!r} {why}; rename it")
            taken.add(record.name)
            found.append(record)
            _origins[record.name] = where
        _plugins = tuple(found)
    return _plugins


def formats() -> tuple[ReaderFormat, ...]:
    """Every format: the built-in ones, then the plugins' (loaded on the first call)."""
    return BUILTIN + load_plugins()


def format_names() -> tuple[str, ...]:
    return tuple(f.name for f in formats())


def split_option(fmt: str) -> tuple[str, str | None]:
    """``"console:verl"`` -> ``("console", "verl")``; a format without an option -> ``(fmt, None)``."""
    name, sep, option = fmt.partition(OPTION_SEPARATOR)
    return name, (option if sep else None)


def find(name: str) -> ReaderFormat | None:
    """The record named ``name``, None when no format has that name."""
    return next((f for f in formats() if f.name == name), None)


def get(fmt: str) -> ReaderFormat:
    """The record of ``fmt`` (``name`` or ``name:option``); one error line for an unknown name or a missing option."""
    name, option = split_option(fmt)
    record = find(name)
    if record is None:
        raise UsageError(f"unknown metric-log format {name!r}; choose one of {', '.join(format_names())} (or auto)")
    if option is not None and record.option is None:
        raise UsageError(f"metric-log format {name!r} takes no option (got {fmt!r}); write {name}")
    if option is None and record.option is not None:
        raise UsageError(f"metric-log format {name!r} needs an option: {record.option}; e.g. {name}:<option>")
    return record


def layouts() -> tuple[Layout, ...]:
    """Every kind of log, in order of preference (a kind several formats read is searched once)."""
    seen: dict[str, Layout] = {}
    for record in formats():
        for layout in record.layouts:
            seen.setdefault(layout.kind, layout)
    return tuple(seen.values())


def markdown_table() -> str:
    """The formats as docs/readers.md's table shows them (a unit test holds the two equal)."""
    rows = ["| format | what it reads | found in a work dir as | its copy in a results folder | extra |",
            "|---|---|---|---|---|"]
    for record in BUILTIN:
        name = f"`{record.name}`" + (f" (`{record.name}:<pattern>`)" if record.option else "")
        found = ", ".join(layout.kind for layout in record.layouts)
        copies = ", ".join(f"`{n}{'/' if record.folder else ''}`" for n in record.copy_names)
        extra = f"`{record.extra}`" if record.extra else "none"
        rows.append(f"| {name} | {record.doc.replace('|', '/').replace('<', '&lt;')} | {found} | {copies} | {extra} |")
    return "\n".join(rows)


def copy_names() -> tuple[str, ...]:
    """Every name a results folder may give its copy of the run's metric log."""
    return tuple(dict.fromkeys(n for f in formats() for n in f.copy_names))
