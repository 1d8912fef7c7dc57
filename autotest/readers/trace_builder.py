"""Shared by the row-based readers: a row's step, its values as numbers, and the Trace they build.

``_Builder`` keeps every numeric value per metric and step, notes values that are not numbers (never
dropped silently), the names logged (kept or not: messages about metrics a log lacks name them), and
decides through :class:`~autotest.readers.merge.StepRows` what a second row at one step is.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Collection, Iterable
from pathlib import Path
from types import MappingProxyType
from typing import Callable

from autotest.errors import UsageError
from autotest.readers.merge import StepRows
from autotest.judge.trace import Trace


#: the largest step taken: beyond it a float is no longer a whole number exactly, and no run gets there
MAX_STEP = 2**53


def step_of(where: str, step: object) -> int:
    """A row's ``step`` as an int; ``where`` names the row in the error (``path:line``)."""
    if isinstance(step, bool) or not (isinstance(step, int) or isinstance(step, float) and step.is_integer()):
        shown = "missing" if step is None else f"not a whole number ({kind_of(step)}: {str(step)[:40]})"
        raise UsageError(f"{where}: key 'step' is {shown}; every row needs a whole-number step >= 0")
    if step < 0:
        raise UsageError(f"{where}: step {int(step)} is negative; steps count from 0")
    if step > MAX_STEP:
        raise UsageError(f"{where}: step {step:.6g} is beyond {MAX_STEP} (2**53), not a step count a run reaches; "
                         "is another number (a timestamp, a token count) logged as the step?")
    return int(step)


_KINDS = {list: "a list", dict: "a dict", bool: "a bool", str: "a string", float: "a number", int: "a number"}


def kind_of(value: object) -> str:
    return _KINDS.get(type(value), f"a {type(value).__name__}")


_NAN = float("nan")
_FLOAT_ONLY = {float}


def as_number(value: object) -> float | None:
    """A metric value as float; a logged null is NaN (reported, never skipped); text is not a metric."""
    kind = type(value)
    if kind is float:
        return value  # type: ignore[return-value]
    if kind is int:
        return float(value)  # type: ignore[arg-type]
    return _NAN if value is None else None


class Builder:
    """Accumulates values per metric and step; the rows at one step merge as :mod:`autotest.readers.merge` says."""

    def __init__(self, path: Path, fmt: str, keep: frozenset[str] | None = None, ignored: Collection[str] = (),
                 label: Callable[[int], str] = "line {}".format) -> None:
        self.path = path
        self.fmt = fmt
        self.rows = StepRows(path, ignored, label)
        #: every metric name the log carries, kept or not
        self.names = self.rows.names
        #: only these metrics are stored (None: all); a comparison needs just the checked ones
        self.keep = keep
        self.series: dict[str, dict[int, float]] = defaultdict(dict)
        self.step_lines: dict[int, int] = {}
        #: metric -> (what it was logged as, where first: "line 12", "log_history[11]")
        self.non_numeric: dict[str, tuple[str, str]] = {}
        self.train_steps: set[int] = set()
        self.eval_steps: set[int] = set()
        #: the file's warnings (a truncated final line) come before the rows' (resumed steps)
        self.file_warnings: list[str] = []
        self.warnings: list[str] = []
        #: steps the step counter went back to (resumed or concatenated runs)
        self.restarts: list[int] = []

    def admit(self, step: int, values: dict[str, object], number: int, digest: int, layout: int | None = None) -> bool:
        """Whether a row is to be stored: False for an exact copy; raises on a conflicting re-log (``layout``: the
        row's ``self.rows.layout(values)``, when the reader has it already)."""
        return self.rows.admit(step, values, number, digest, self.series, layout)

    def mark(self, step: int, evals: Iterable[bool]) -> None:
        """Classify ``step`` by its metrics (True: an eval metric): with any eval metric it is an eval step, with
        any other metric a training step (both when it has both)."""
        kinds = set(evals)
        if True in kinds:
            self.eval_steps.add(step)
        if False in kinds:
            self.train_steps.add(step)

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
                self.non_numeric[key] = (kind_of(value), self.rows.label(number))
        self.step_lines[step] = number

    def build(self) -> Trace:
        ordered = {m: MappingProxyType(_sorted_by_step(v)) for m, v in sorted(self.series.items())}
        return Trace(
            source=str(self.path),
            series=MappingProxyType(ordered),
            train_steps=tuple(sorted(self.train_steps)),
            eval_steps=tuple(sorted(self.eval_steps)),
            warnings=tuple(self.file_warnings + self.warnings + self.rows.warnings()),
            format=self.fmt,
            step_lines=MappingProxyType(dict(sorted(self.step_lines.items()))),
            non_numeric=MappingProxyType(self.non_numeric),
            logged_metrics=frozenset(self.names),
            restarts=tuple(sorted(set(self.restarts))),
        )


def _sorted_by_step(series: dict[int, float]) -> dict[int, float]:
    steps = list(series)
    if all(map(int.__lt__, steps, steps[1:])):
        return series  # already in step order, as a tracker normally is
    return dict(sorted(series.items()))
