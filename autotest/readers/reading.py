"""Read a framework's metric log into a :class:`~autotest.judge.trace.Trace`, whatever its format.

``read_trace`` takes a log file or a run's work dir: a work dir is searched as
:mod:`autotest.inputs.log_search` says (the choice is said when there are several logs), and the format is
the one asked for or told from the log (:func:`sniff_format`). Each format's reader is named by its record
in :mod:`autotest.readers.registry` and imported only when a log of that format is read.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from fnmatch import fnmatch, fnmatchcase
from pathlib import Path

from autotest.errors import UsageError
from autotest.inputs.log_search import XTUNER_LAYOUT, FoundLog, find_logs, kinds_of_format, not_found_message
from autotest.inputs.tracker_layout import exp_dirs
from autotest.judge.trace import Trace
from autotest.readers import registry
from autotest.readers.tensorboard import looks_like_event_file


def _first_line(path: Path) -> str | None:
    try:
        with path.open(encoding="utf-8") as handle:
            return next((line for line in handle if line.strip()), None)
    except OSError as exc:
        raise UsageError(f"{path}: cannot read metric log ({exc.strerror}); check the path") from None
    except UnicodeDecodeError:
        raise _not_text(path) from None


def sniff_format(path: Path) -> str:
    """Guess a file's format: by its name first (event files, ``*.json``: a trainer_state.json, ``*.wandb``),
    else by its first line with content, asking each format's sniffer in the registry's order (verl nests
    metrics under ``data``; a Hugging Face row carries ``epoch`` or ``eval_*`` keys; a console line matches a
    preset) and the fallback (xtuner) last."""
    records = registry.formats()
    named = next((r.name for r in records if any(fnmatch(path.name, n) for n in r.names)), None)
    if named is not None:
        return named
    line = _first_line(path)
    if line is None:
        return next(r.name for r in records if r.fallback)
    try:
        row = json.loads(line)
    except json.JSONDecodeError:
        row = None
    for record in records:
        sniffer = None if record.fallback else record.load_sniffer()
        found = sniffer(row, line) if sniffer is not None else None
        if found is not None and not isinstance(found, str):  # a plugin's sniffer answers a format name or None
            raise UsageError(f"{record.origin or record.name}: its sniffer {record.sniff!r} returned a "
                             f"{type(found).__name__}, not a format name or None; fix or uninstall the plugin")
        if found is not None:
            return found
    return next(r.name for r in records if r.fallback)  # a malformed line too: its reader names it


def _not_text(path: Path) -> UsageError:
    if looks_like_event_file(path):
        return UsageError(f"{path}: metric log is a TensorBoard event file (binary records); read it with "
                          "--format tensorboard (a case: tracker.format: tensorboard)")
    with path.open("rb") as handle:
        gzipped = handle.read(2) == b"\x1f\x8b"
    what = "gzip-compressed; decompress it first (gunzip)" if gzipped else \
        "binary or not UTF-8; pass the run's tracker.jsonl (UTF-8 JSON lines)"
    return UsageError(f"{path}: metric log is not UTF-8 text: {what}")


def _check_not_binary(path: Path) -> None:
    """A NUL byte never occurs in JSON text but is valid UTF-8, so binary data would read as one bad line."""
    try:
        with path.open("rb") as handle:
            head = handle.read(1 << 16)
    except OSError as exc:
        raise UsageError(f"{path}: cannot read metric log ({exc.strerror}); check the path") from None
    if b"\x00" in head:
        raise _not_text(path)


def _fits(found: FoundLog, fmt: str) -> bool:
    """Whether a found log can be of ``fmt`` (a JSONL log's format is told from its rows)."""
    if fmt == "auto":
        return True
    kinds = kinds_of_format(fmt)
    if found.kind not in kinds:
        return False
    if found.kind == XTUNER_LAYOUT or sum(found.kind in r.layouts_kinds for r in registry.formats()) == 1:
        return True  # where only this format is written (xtuner's place): its rows decide nothing
    try:
        return registry.split_option(sniff_format(found.path))[0] == registry.split_option(fmt)[0]
    except UsageError:
        return True  # unreadable: let the reader say why


def _found_format(found: FoundLog) -> str:
    """The format of a log found in a work dir: its kind's only format, else told from its rows."""
    only = [r.name for r in registry.formats() if found.kind in r.layouts_kinds]
    return only[0] if len(only) == 1 and registry.get(only[0]).option is None else sniff_format(found.path)


def locate_log(path: str | Path, fmt: str = "auto") -> tuple[Path, str, tuple[str, ...]]:
    """(the log to read, its format, notes on the choice) for a log file or a run's work dir.

    A work dir is searched as :mod:`autotest.inputs.log_search` says; when it holds several logs the
    first (by preference) of ``fmt`` is taken and the note says which, and what else was there.
    """
    if fmt != "auto":
        registry.get(fmt)  # an unknown format is one line
    path = Path(path)
    if not path.exists():
        raise UsageError(f"{path}: no such file or directory; pass a metric log (tracker.jsonl, trainer_state.json, "
                         "a TensorBoard event file, ...: docs/readers.md) or a run's work dir")
    if path.is_file():
        return path, sniff_format(path) if fmt == "auto" else fmt, ()
    if fmt != "auto" and registry.get(fmt).folder and path.is_dir() and not exp_dirs(path):
        return path, fmt, ()  # the log folder itself (its reader finds its files, and says when there are none)
    if not path.is_dir():  # a FIFO would block the read forever, a device never ends
        raise UsageError(f"{path}: not a regular file (a FIFO, socket or device); pass a metric log file "
                         "or a run's work dir")
    found = find_logs(path, fmt)
    fitting = [f for f in found if _fits(f, fmt)]
    if not fitting:
        other = f" (found only: {', '.join(f.describe(path) for f in found)}; pass --format auto or that format)" \
            if found else ""
        raise UsageError(not_found_message(path, fmt) + other)
    chosen = fitting[0]
    name = fmt if fmt != "auto" else _found_format(chosen)
    notes: tuple[str, ...] = ()
    if len(found) > 1:
        notes = (f"{path}: found {len(found)} metric logs: {', '.join(f.describe(path) for f in found)}; took "
                 f"{chosen.describe(path)} as {name}; pass the file (and --format) to judge another",)
    return chosen.path, name, notes


def find_tracker(path: Path, fmt: str = "auto") -> Path:
    """The metric log to read for ``path``: itself, or the one found in a run's work dir (see locate_log)."""
    return locate_log(path, fmt)[0]


def _read(tracker: Path, name: str, keep: frozenset[str] | None) -> Trace:
    record = registry.get(name)
    option = registry.split_option(name)[1]
    if tracker.is_dir() and not record.folder:
        raise UsageError(f"{tracker}: a folder, not a {name} log; pass the log file (or --format tensorboard "
                         "for a folder of event files)")
    if record.text:
        _check_not_binary(tracker)
    reader = record.load_reader()
    try:
        trace = reader(tracker, keep) if option is None else reader(tracker, keep, option)
    except UnicodeDecodeError:  # valid UTF-8 at the start, not further on
        raise _not_text(tracker) from None
    if not isinstance(trace, Trace):  # a plugin's reader: what it returns is judged, so it must be a Trace
        raise UsageError(f"{record.describe_reader()} returned a {type(trace).__name__} for {tracker}, not an "
                         "autotest.judge.trace.Trace; fix or uninstall the plugin")
    if not trace.train_steps and not trace.eval_steps:
        cut = " (its only line was cut short)" if any("truncated final line" in w for w in trace.warnings) else \
            " (its last record was cut short)" if any("truncated final record" in w for w in trace.warnings) else ""
        raise UsageError(f"{tracker}: metric log has no rows{cut}; did the run start?")
    return trace


def read_trace(path: str | Path, fmt: str = "auto", aliases: dict[str, str] | None = None,
               metrics: set[str] | None = None, also: Sequence[str] = ()) -> Trace:
    """Read a metric log (or a run's work dir) into a Trace; ``aliases`` maps canonical -> logged name.

    ``metrics`` keeps only those series (and their aliases' sources): a comparison of a wide log
    needs only the checked metrics. Step kinds are still classified from every key. ``also``: globs of metrics kept
    as well where the log has them (the data composition a reading reads, :func:`autotest.inputs.roles.group_globs`);
    a log that has some is read a second time with them kept.
    """
    keep = None
    if metrics is not None:
        keep = frozenset(metrics) | frozenset((aliases or {}).get(m, m) for m in metrics)
    tracker, name, notes = locate_log(path, fmt)
    try:
        trace = _read(tracker, name, keep)
        if keep is not None and also:
            extra = {m for m in trace.logged_metrics or () if m not in keep and any(fnmatchcase(m, g) for g in also)}
            if extra:
                trace = _read(tracker, name, keep | extra)
    except UsageError as exc:
        if notes:  # several logs were found: say which one failed and that others are there
            raise UsageError(f"{exc} ({notes[0].split(': ', 1)[1]})") from None
        raise
    if notes:
        trace = trace.with_warnings(notes)
    return trace.with_aliases(aliases) if aliases else trace
