"""Readers that turn a framework's metric log into a :class:`~autotest.judge.trace.Trace`.

Readers are pluggable: each is a function ``(path, keep) -> Trace`` registered by format name in
:data:`READERS` (xtuner, verl, tensorboard, hf-trainer: :mod:`autotest.judge.hf_trainer`).
``read_trace`` takes a log file or a run's work dir: a work dir is searched as
:mod:`autotest.inputs.log_search` says (the choice is said when there are several logs), and the
format is the one asked for or told from the log (:func:`sniff_format`). Rows at one step merge as
:mod:`autotest.judge.merge` says, in every row-based reader.

xtuner ``tracker.jsonl`` row kinds (REFERENCE.md), told apart by their keys, never by their order:
mini-batch rows whose keys all start with ``train_metrics/`` (attached to their own ``step``,
averaged per step, whether written before or after their summary row), eval rows whose keys
are ``eval/*`` (plus the eval timing ``time/eval`` some writers put on them; step 0 before
training), and the step-summary row (everything else). Steps going backwards are warned about
with their line numbers.
"""

from __future__ import annotations

import json
from collections import defaultdict
from itertools import repeat
from pathlib import Path
from typing import Callable

from autotest.errors import UsageError
from autotest.inputs.log_search import (
    TENSORBOARD,
    TRAINER_STATE_KIND,
    XTUNER_LAYOUT,
    FoundLog,
    find_logs,
    is_event_file,
    not_found_message,
)
from autotest.inputs.tracker_layout import exp_dirs
from autotest.judge.hf_trainer import FORMAT as HF_FORMAT
from autotest.judge.hf_trainer import looks_like_hf_row, read_hf_trainer
from autotest.judge.jsonl import iter_rows, raise_file_error
from autotest.judge.tensorboard import looks_like_event_file, read_tensorboard
from autotest.judge.trace import EVAL_PREFIX, MINIBATCH_PREFIX, Trace
from autotest.judge.trace_builder import Builder, as_number, kind_of, step_of

#: non-eval keys an eval row may carry (xtuner writes the eval timing beside the scores)
EVAL_ROW_EXTRA_KEYS = frozenset({"time/eval"})


def _is_eval_row(values: dict) -> bool:
    eval_keys = sum(map(str.startswith, values, repeat(EVAL_PREFIX)))
    return eval_keys > 0 and eval_keys + len(EVAL_ROW_EXTRA_KEYS.intersection(values)) == len(values)


def read_xtuner(path: Path, keep: frozenset[str] | None = None) -> Trace:
    builder = Builder(path, "xtuner", keep)
    # step -> metric -> values: mini-batch rows carry their own step, so the order they are written
    # in (before or after their summary row, after the eval row) cannot move them to another step
    minibatch: dict[int, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    minibatch_lines: dict[int, int] = {}
    seen_summary: set[int] = set()
    last_step, last_line = None, 0
    rows = iter_rows(path, builder.file_warnings)
    try:
        for number, values, line in rows:
            step = values.pop("step", None)
            if type(step) is not int or step < 0:
                step = step_of(f"{path}:{number}", step)
            if not values:
                continue
            if last_step is not None and step < last_step:
                builder.warnings.append(f"{path}:{number}: step {step} after step {last_step} (line {last_line}): "
                                        "steps go backwards (resumed or concatenated run?)")
                builder.restarts.append(step)
            last_step, last_line = step, number
            if all(map(str.startswith, values, repeat(MINIBATCH_PREFIX))):
                builder.rows.layout(values)  # notes its metric names
                pending = minibatch[step]
                for key in values if keep is None else [k for k in keep if k in values]:
                    number_value = as_number(values[key])
                    if number_value is not None:
                        pending[key].append(number_value)
                    elif key not in builder.non_numeric:
                        builder.non_numeric[key] = (kind_of(values[key]), number)
                minibatch_lines.setdefault(step, number)
                continue
            if not builder.admit(step, values, number, hash(line.strip())):
                continue  # an exact copy of an earlier row
            # one byte search rules out most rows: without escapes an eval key is in its line verbatim
            maybe_eval = b'"eval/' in line or b"\\" in line
            eval_only = maybe_eval and _is_eval_row(values)
            if not eval_only:
                builder.train_steps.add(step)
                seen_summary.add(step)
            if eval_only or maybe_eval and any(map(str.startswith, values, repeat(EVAL_PREFIX))):
                builder.eval_steps.add(step)
            builder.put_row(step, values, number)
    except UsageError:
        raise_file_error(rows)
        raise
    orphans = []
    for step, pending in minibatch.items():
        if step not in seen_summary:
            if any(pending.values()):
                orphans.append(f"{step} (line {minibatch_lines[step]})")
            continue
        for key, numbers in pending.items():
            builder.series[key][step] = sum(numbers) / len(numbers)
    if orphans:
        builder.warnings.append(f"{path}: mini-batch rows of steps {', '.join(orphans)} have no step-summary row; "
                                "ignored")
    return builder.build()


def read_verl(path: Path, keep: frozenset[str] | None = None) -> Trace:
    """verl's JSONL logger: ``{"step": N, "data": {metric: value, ...}}`` per step."""
    builder = Builder(path, "verl", keep)
    rows = iter_rows(path, builder.file_warnings)
    try:
        for number, row, line in rows:
            step = step_of(f"{path}:{number}", row.get("step"))
            data = row.get("data")
            if not isinstance(data, dict):
                raise UsageError(f"{path}:{number}: key 'data' must be an object in verl format")
            if not builder.admit(step, data, number, hash(line.strip())):
                continue
            kinds = set(map(str.startswith, data, repeat(("val", "eval"))))  # True: an eval key
            if False in kinds:
                builder.train_steps.add(step)
            if True in kinds:
                builder.eval_steps.add(step)
            builder.put_row(step, data, number)
    except UsageError:
        raise_file_error(rows)
        raise
    return builder.build()


READERS: dict[str, Callable[..., Trace]] = {"xtuner": read_xtuner, "verl": read_verl, HF_FORMAT: read_hf_trainer,
                                            "tensorboard": read_tensorboard}
#: every format a case's tracker.format and compare --format accept ("auto" besides, for compare)
FORMATS = tuple(READERS)


def sniff_format(path: Path) -> str:
    """Guess a file's format: event files by name, ``*.json`` is a trainer_state.json, else the first row
    (verl nests metrics under ``data``; a Hugging Face row carries ``epoch`` or ``eval_*`` keys)."""
    if is_event_file(path):
        return "tensorboard"
    if path.suffix == ".json":
        return HF_FORMAT
    try:
        with path.open(encoding="utf-8") as handle:
            for line in handle:
                if line.strip():
                    try:
                        row = json.loads(line)
                    except json.JSONDecodeError:
                        return "xtuner"  # let the reader report the bad line with its number
                    if isinstance(row, dict) and isinstance(row.get("data"), dict):
                        return "verl"
                    return HF_FORMAT if looks_like_hf_row(row) else "xtuner"
    except OSError as exc:
        raise UsageError(f"{path}: cannot read metric log ({exc.strerror}); check the path") from None
    except UnicodeDecodeError:
        raise _not_text(path) from None
    return "xtuner"


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


def _check_format(fmt: str) -> None:
    if fmt != "auto" and fmt not in READERS:
        raise UsageError(f"unknown metric-log format {fmt!r}; choose one of {', '.join(sorted(READERS))} (or auto)")


def _fits(found: FoundLog, fmt: str) -> bool:
    """Whether a found log can be of ``fmt`` (a JSONL log's format is told from its rows)."""
    if fmt == "auto":
        return True
    if found.kind == TENSORBOARD:
        return fmt == "tensorboard"
    if found.kind == TRAINER_STATE_KIND:
        return fmt == HF_FORMAT
    if fmt == "tensorboard":
        return False
    if found.kind == XTUNER_LAYOUT and fmt == "xtuner":
        return True  # where xtuner writes it: its rows decide nothing
    try:
        return sniff_format(found.path) == fmt
    except UsageError:
        return True  # unreadable: let the reader say why


def locate_log(path: str | Path, fmt: str = "auto") -> tuple[Path, str, tuple[str, ...]]:
    """(the log to read, its format, notes on the choice) for a log file or a run's work dir.

    A work dir is searched as :mod:`autotest.inputs.log_search` says; when it holds several logs the
    first (by preference) of ``fmt`` is taken and the note says which, and what else was there.
    """
    _check_format(fmt)
    path = Path(path)
    if not path.exists():
        raise UsageError(f"{path}: no such file or directory; pass a metric log (tracker.jsonl, trainer_state.json, "
                         "a TensorBoard event file) or a run's work dir")
    if path.is_file():
        return path, sniff_format(path) if fmt == "auto" else fmt, ()
    if not path.is_dir():  # a FIFO would block the read forever, a device never ends
        raise UsageError(f"{path}: not a regular file (a FIFO, socket or device); pass a metric log file "
                         "or a run's work dir")
    if fmt == "tensorboard" and not exp_dirs(path):
        return path, fmt, ()  # every event file below it (read_tensorboard says when there is none)
    found = find_logs(path)
    fitting = [f for f in found if _fits(f, fmt)]
    if not fitting:
        other = f" (found only: {', '.join(f.describe(path) for f in found)}; pass --format auto or that format)" \
            if found else ""
        raise UsageError(not_found_message(path, fmt) + other)
    chosen = fitting[0]
    name = fmt if fmt != "auto" else ("tensorboard" if chosen.kind == TENSORBOARD else sniff_format(chosen.path))
    notes: tuple[str, ...] = ()
    if len(found) > 1:
        notes = (f"{path}: found {len(found)} metric logs: {', '.join(f.describe(path) for f in found)}; took "
                 f"{chosen.describe(path)} as {name}; pass the file (and --format) to judge another",)
    return chosen.path, name, notes


def find_tracker(path: Path, fmt: str = "auto") -> Path:
    """The metric log to read for ``path``: itself, or the one found in a run's work dir (see locate_log)."""
    return locate_log(path, fmt)[0]


def _read(tracker: Path, name: str, keep: frozenset[str] | None) -> Trace:
    if name == "tensorboard":
        return read_tensorboard(tracker, keep)  # event files, or a folder holding them
    if tracker.is_dir():
        raise UsageError(f"{tracker}: a folder, not a {name} log; pass the log file (or --format tensorboard "
                         "for a folder of event files)")
    _check_not_binary(tracker)
    try:
        trace = READERS[name](tracker, keep)
    except UnicodeDecodeError:  # valid UTF-8 at the start, not further on
        raise _not_text(tracker) from None
    if not trace.train_steps and not trace.eval_steps:
        cut = " (its only line was cut short)" if any("truncated final line" in w for w in trace.warnings) else ""
        raise UsageError(f"{tracker}: metric log has no rows{cut}; did the run start?")
    return trace


def read_trace(path: str | Path, fmt: str = "auto", aliases: dict[str, str] | None = None,
               metrics: set[str] | None = None) -> Trace:
    """Read a metric log (or a run's work dir) into a Trace; ``aliases`` maps canonical -> logged name.

    ``metrics`` keeps only those series (and their aliases' sources): a comparison of a wide log
    needs only the checked metrics. Step kinds are still classified from every key.
    """
    keep = None
    if metrics is not None:
        keep = frozenset(metrics) | frozenset((aliases or {}).get(m, m) for m in metrics)
    tracker, name, notes = locate_log(path, fmt)
    try:
        trace = _read(tracker, name, keep)
    except UsageError as exc:
        if notes:  # several logs were found: say which one failed and that others are there
            raise UsageError(f"{exc} ({notes[0].split(': ', 1)[1]})") from None
        raise
    if notes:
        trace = trace.with_warnings(notes)
    return trace.with_aliases(aliases) if aliases else trace
