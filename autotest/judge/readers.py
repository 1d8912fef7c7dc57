"""Readers that turn a framework's metric log into a :class:`~autotest.judge.trace.Trace`.

Readers are pluggable: each is a function ``(path) -> Trace`` registered by format
name in :data:`READERS`. ``read_trace`` picks one by name or by sniffing the first row.

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
from types import MappingProxyType
from typing import Callable

from autotest.errors import UsageError
from autotest.inputs.tracker_layout import TRACKER_RELATIVE, exp_dirs
from autotest.judge.jsonl import iter_rows, raise_file_error
from autotest.judge.tensorboard import is_event_file, read_tensorboard
from autotest.judge.trace import EVAL_PREFIX, MINIBATCH_PREFIX, Trace

#: xtuner exp dirs are named by a 14-digit timestamp (YYYYmmddHHMMSS)


def _step_of(path: Path, number: int, step: object) -> int:
    if isinstance(step, bool) or not (isinstance(step, int) or isinstance(step, float) and step.is_integer()):
        shown = "missing" if step is None else f"not a whole number ({_kind(step)}: {str(step)[:40]})"
        raise UsageError(f"{path}:{number}: key 'step' is {shown}; every row needs a whole-number step >= 0")
    if step < 0:
        raise UsageError(f"{path}:{number}: step {int(step)} is negative; steps count from 0")
    return int(step)


_KINDS = {list: "a list", dict: "a dict", bool: "a bool", str: "a string", float: "a number", int: "a number"}


def _kind(value: object) -> str:
    return _KINDS.get(type(value), f"a {type(value).__name__}")


_NAN = float("nan")
_FLOAT_ONLY = {float}


def _number(value: object) -> float | None:
    """A metric value as float; a logged null is NaN (reported, never skipped); text is not a metric."""
    kind = type(value)
    if kind is float:
        return value  # type: ignore[return-value]
    if kind is int:
        return float(value)  # type: ignore[arg-type]
    return _NAN if value is None else None


class _Builder:
    """Accumulates values per metric and step; the last write for a (metric, step) wins."""

    def __init__(self, path: Path, fmt: str, keep: frozenset[str] | None = None) -> None:
        self.path = path
        self.fmt = fmt
        #: only these metrics are stored (None: all); a comparison needs just the checked ones
        self.keep = keep
        self.series: dict[str, dict[int, float]] = defaultdict(dict)
        self.step_lines: dict[int, int] = {}
        self.non_numeric: dict[str, tuple[str, int]] = {}
        self.train_steps: set[int] = set()
        self.eval_steps: set[int] = set()
        #: the file's warnings (a truncated final line) come before the rows' (resumed steps)
        self.file_warnings: list[str] = []
        self.warnings: list[str] = []

    def put_row(self, step: int, values: dict[str, object], number: int) -> None:
        """Store the row's numeric values at ``step`` (one pass: rows can carry hundreds of metrics)."""
        series = self.series
        if self.keep is not None:
            values = {k: values[k] for k in self.keep if k in values}
        if set(map(type, values.values())) == _FLOAT_ONLY:  # the common case, checked at C speed
            for key, value in values.items():
                series[key][step] = value
            self.step_lines[step] = number
            return
        for key, value in values.items():
            kind = type(value)
            if kind is float:
                series[key][step] = value
            elif kind is int:
                series[key][step] = float(value)
            elif value is None:
                series[key][step] = _NAN
            elif key not in self.non_numeric:
                self.non_numeric[key] = (_kind(value), number)
        self.step_lines[step] = number

    def build(self) -> Trace:
        ordered = {m: MappingProxyType(_sorted_by_step(v)) for m, v in sorted(self.series.items())}
        return Trace(
            source=str(self.path),
            series=MappingProxyType(ordered),
            train_steps=tuple(sorted(self.train_steps)),
            eval_steps=tuple(sorted(self.eval_steps)),
            warnings=tuple(self.file_warnings + self.warnings),
            format=self.fmt,
            step_lines=MappingProxyType(dict(sorted(self.step_lines.items()))),
            non_numeric=MappingProxyType(self.non_numeric),
        )


def _sorted_by_step(series: dict[int, float]) -> dict[int, float]:
    steps = list(series)
    if all(map(int.__lt__, steps, steps[1:])):
        return series  # already in step order, as a tracker normally is
    return dict(sorted(series.items()))


#: non-eval keys an eval row may carry (xtuner writes the eval timing beside the scores)
EVAL_ROW_EXTRA_KEYS = frozenset({"time/eval"})


def _is_eval_row(values: dict) -> bool:
    eval_keys = sum(map(str.startswith, values, repeat(EVAL_PREFIX)))
    return eval_keys > 0 and eval_keys + len(EVAL_ROW_EXTRA_KEYS.intersection(values)) == len(values)


def read_xtuner(path: Path, keep: frozenset[str] | None = None) -> Trace:
    builder = _Builder(path, "xtuner", keep)
    # step -> metric -> values: mini-batch rows carry their own step, so the order they are written
    # in (before or after their summary row, after the eval row) cannot move them to another step
    minibatch: dict[int, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    minibatch_lines: dict[int, int] = {}
    seen_summary: set[int] = set()
    seen_eval_only: set[int] = set()
    last_step, last_line = None, 0
    rows = iter_rows(path, builder.file_warnings)
    try:
        for number, values, line in rows:
            step = values.pop("step", None)
            if type(step) is not int or step < 0:
                step = _step_of(path, number, step)
            if not values:
                continue
            if last_step is not None and step < last_step:
                builder.warnings.append(f"{path}:{number}: step {step} after step {last_step} (line {last_line}): "
                                        "steps go backwards (resumed or concatenated run?)")
            last_step, last_line = step, number
            if all(map(str.startswith, values, repeat(MINIBATCH_PREFIX))):
                pending = minibatch[step]
                for key in values if keep is None else [k for k in keep if k in values]:
                    number_value = _number(values[key])
                    if number_value is not None:
                        pending[key].append(number_value)
                    elif key not in builder.non_numeric:
                        builder.non_numeric[key] = (_kind(values[key]), number)
                minibatch_lines.setdefault(step, number)
                continue
            # one byte search rules out most rows: without escapes an eval key is in its line verbatim
            maybe_eval = b'"eval/' in line or b"\\" in line
            eval_only = maybe_eval and _is_eval_row(values)
            seen = seen_eval_only if eval_only else seen_summary
            if step in seen:
                builder.warnings.append(
                    f"{path}:{number}: step {step} logged again (resumed run?); the later row wins"
                )
            seen.add(step)
            if not eval_only:
                builder.train_steps.add(step)
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
    builder = _Builder(path, "verl", keep)
    seen: set[int] = set()
    rows = iter_rows(path, builder.file_warnings)
    try:
        for number, row, _ in rows:
            step = _step_of(path, number, row.get("step"))
            data = row.get("data")
            if not isinstance(data, dict):
                raise UsageError(f"{path}:{number}: key 'data' must be an object in verl format")
            if step in seen:
                builder.warnings.append(f"{path}:{number}: step {step} logged again (resumed run?); the later row wins")
            seen.add(step)
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


READERS: dict[str, Callable[..., Trace]] = {"xtuner": read_xtuner, "verl": read_verl}


def sniff_format(path: Path) -> str:
    """Guess the format from the first row: verl rows nest metrics under ``data``."""
    try:
        with path.open(encoding="utf-8") as handle:
            for line in handle:
                if line.strip():
                    try:
                        row = json.loads(line)
                    except json.JSONDecodeError:
                        return "xtuner"  # let the reader report the bad line with its number
                    return "verl" if isinstance(row, dict) and isinstance(row.get("data"), dict) else "xtuner"
    except OSError as exc:
        raise UsageError(f"{path}: cannot read metric log ({exc.strerror}); check the path") from None
    except UnicodeDecodeError:
        raise _not_text(path) from None
    return "xtuner"


def _not_text(path: Path) -> UsageError:
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


def read_trace(path: str | Path, fmt: str = "auto", aliases: dict[str, str] | None = None,
               metrics: set[str] | None = None) -> Trace:
    """Read a metric log (or a run's work dir) into a Trace; ``aliases`` maps canonical -> logged name.

    ``metrics`` keeps only those series (and their aliases' sources): a comparison of a wide log
    needs only the checked metrics. Step kinds are still classified from every key.
    """
    keep = None
    if metrics is not None:
        keep = frozenset(metrics) | frozenset((aliases or {}).get(m, m) for m in metrics)
    if fmt == "tensorboard" or (fmt == "auto" and is_event_file(Path(path))):
        trace = read_tensorboard(path, keep)  # event files, or a folder holding them
        return trace.with_aliases(aliases) if aliases else trace
    tracker = find_tracker(Path(path))
    _check_not_binary(tracker)
    name = sniff_format(tracker) if fmt == "auto" else fmt
    if name not in READERS:
        known = ", ".join(sorted([*READERS, "tensorboard"]))
        raise UsageError(f"unknown metric-log format {name!r}; choose one of {known}")
    try:
        trace = READERS[name](tracker, keep)
    except UnicodeDecodeError:  # valid UTF-8 at the start, not further on
        raise _not_text(tracker) from None
    if not trace.train_steps and not trace.eval_steps:
        cut = " (its only line was cut short)" if any("truncated final line" in w for w in trace.warnings) else ""
        raise UsageError(f"{tracker}: metric log has no rows{cut}; did the run start?")
    return trace.with_aliases(aliases) if aliases else trace


def find_tracker(path: Path) -> Path:
    """Resolve a tracker file from itself, an exp dir or a work dir (newest timestamped exp dir)."""
    if path.is_file():
        return path
    if not path.exists():
        raise UsageError(f"{path}: no such file or directory; pass a tracker.jsonl or a run's work dir")
    if not path.is_dir():  # a FIFO would block the read forever, a device never ends
        raise UsageError(f"{path}: not a regular file (a FIFO, socket or device); pass a tracker.jsonl "
                         "or a run's work dir")
    direct = path / TRACKER_RELATIVE
    if direct.is_file():
        return direct
    for candidate in (path / "tracker.jsonl", path / "exp_tracking" / "tracker.jsonl"):
        if candidate.is_file():
            return candidate
    found_dirs = exp_dirs(path)
    if found_dirs:
        newest = found_dirs[-1]
        tracker = newest / TRACKER_RELATIVE
        if tracker.is_file():
            return tracker
        found = sorted(str(p.relative_to(path)) for p in newest.rglob("*.jsonl"))[:10]
        raise UsageError(
            f"{path}: newest exp dir {newest.name} has no {TRACKER_RELATIVE} "
            f"(found: {', '.join(found) or 'no .jsonl files'}); is exp_tracker set to jsonl?"
        )
    found = sorted(str(p.relative_to(path)) for p in path.rglob("tracker.jsonl"))[:10]
    listing = sorted(p.name for p in path.iterdir())[:10]
    raise UsageError(
        f"{path}: no tracker found (expected <14-digit timestamp>/{TRACKER_RELATIVE}; "
        f"found trackers: {', '.join(found) or 'none'}; entries: {', '.join(listing) or 'empty'})"
    )
