"""xtuner's ``tracker.jsonl`` → :class:`~autotest.judge.trace.Trace`.

Row kinds (REFERENCE.md), told apart by their keys: mini-batch rows whose keys all start with
``train_metrics/``, eval rows whose keys are ``eval/*`` (plus the eval timing ``time/eval`` some writers put on
them; step 0 before training), and the step-summary row (everything else). Steps going backwards are warned
about with their line numbers. Rows at one step merge as :mod:`autotest.readers.merge` says.

Mini-batch rows are averaged per RL step. Which step is theirs depends on how they are numbered:

- by the RL step itself (one optimizer step per RL step, or a writer that numbers them so): each row belongs
  to its own ``step``, whether written before or after its summary row;
- by xtuner's cumulative mini-batch counter (``_global_train_step + 1 + i``: with two optimizer steps per RL
  step, RL step 1's rows carry 1 and 2, RL step 2's 3 and 4; a resumed run restarts the counter at 1): the
  numbers are not RL steps, and each row belongs to the step-summary row that follows it in the file, as
  xtuner writes them (mini-batch rows, then the summary of the same RL step).

The file is read the second way when a mini-batch row's number equals neither the summary row before it nor the
one after it (rows after the last summary row aside), which RL-step numbering never gives and the counter does
at the first RL step with two optimizer steps (and after a resume).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from itertools import repeat
from pathlib import Path

from autotest.errors import UsageError
from autotest.judge.trace import EVAL_PREFIX, MINIBATCH_PREFIX, Trace
from autotest.readers.jsonl import iter_rows, raise_file_error
from autotest.readers.trace_builder import Builder, as_number, kind_of, step_of

#: non-eval keys an eval row may carry (xtuner writes the eval timing beside the scores)
EVAL_ROW_EXTRA_KEYS = frozenset({"time/eval"})


#: row kinds: mini-batch, eval only, a step summary with eval keys too, a step summary
_MINIBATCH, _EVAL_ONLY, _TRAIN_AND_EVAL, _TRAIN = "minibatch", "eval", "train+eval", "train"


def _row_kind(values: dict) -> str:
    """The kind of a row with keys (besides ``step``), from its keys (the module docstring)."""
    if all(map(str.startswith, values, repeat(MINIBATCH_PREFIX))):
        return _MINIBATCH
    eval_keys = sum(map(str.startswith, values, repeat(EVAL_PREFIX)))
    if not eval_keys:
        return _TRAIN
    return _EVAL_ONLY if eval_keys + len(EVAL_ROW_EXTRA_KEYS.intersection(values)) == len(values) else \
        _TRAIN_AND_EVAL


def read_xtuner(path: Path, keep: frozenset[str] | None = None) -> Trace:
    builder = Builder(path, "xtuner", keep)
    # each mini-batch row's numbers, with the step-summary rows around it in file order; whose step they are
    # is decided once the whole file is read (the module docstring)
    minibatch: list[_MiniBatchRow] = []
    waiting: list[_MiniBatchRow] = []  # rows whose following summary row is not read yet
    last_summary: int | None = None
    last_step, last_line = None, 0
    kinds: dict[int, str] = {}  # key layout -> row kind
    rows = iter_rows(path, builder.file_warnings)
    try:
        for number, values, line in rows:
            step = values.pop("step", None)
            if type(step) is not int or step < 0:
                step = step_of(f"{path}:{number}", step)
            if not values:
                continue
            # what kind of row it is depends on its keys alone: decided once per key layout (a wide log has a few;
            # this builder ignores no key, so its layout is of every key)
            layout = builder.rows.layout(values)
            kind = kinds.get(layout)
            if kind is None:
                kind = kinds[layout] = _row_kind(values)
            if kind is _MINIBATCH:
                # not an RL step of its own (a counter, maybe): no part of the steps-go-backwards check
                kept = {}
                for key in values if keep is None else [k for k in keep if k in values]:
                    number_value = as_number(values[key])
                    if number_value is not None:
                        kept[key] = number_value
                    elif key not in builder.non_numeric:
                        builder.non_numeric[key] = (kind_of(values[key]), f"line {number}")
                row = _MiniBatchRow(step, number, kept, before=last_summary)
                minibatch.append(row)
                waiting.append(row)
                continue
            if last_step is not None and step < last_step:
                builder.warnings.append(f"{path}:{number}: step {step} after step {last_step} (line {last_line}): "
                                        "steps go backwards (resumed or concatenated run?)")
                builder.restarts.append(step)
            last_step, last_line = step, number
            if not builder.admit(step, values, number, hash(line.strip()), layout):
                continue  # an exact copy of an earlier row
            if kind is not _EVAL_ONLY:
                builder.train_steps.add(step)
                last_summary = step
                for row in waiting:
                    row.after = step
                waiting.clear()
            if kind is not _TRAIN:
                builder.eval_steps.add(step)
            builder.put_row(step, values, number)
    except UsageError:
        raise_file_error(rows)
        raise
    _attach_minibatch(builder, minibatch)
    return builder.build()


@dataclass
class _MiniBatchRow:
    number: int
    line: int
    values: dict[str, float]
    #: the steps of the step-summary rows before and after it in the file (None: none there)
    before: int | None
    after: int | None = None


def _attach_minibatch(builder: Builder, rows: list[_MiniBatchRow]) -> None:
    """Each mini-batch row's values averaged into the series at the RL step it belongs to (module docstring)."""
    # rows after the last summary row do not vote: a run stopped mid-step leaves them in either numbering
    counter = any(row.after is not None and row.number not in (row.before, row.after) for row in rows)
    pending: dict[int, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    orphans: dict[int, int] = {}
    for row in rows:
        step = row.after if counter else row.number
        if step is None or step not in builder.train_steps:
            if row.values:
                orphans.setdefault(row.number, row.line)
            continue
        for key, value in row.values.items():
            pending[step][key].append(value)
    for step, series in pending.items():
        for key, numbers in series.items():
            builder.series[key][step] = sum(numbers) / len(numbers)
    if orphans:
        listed = ", ".join(f"{number} (line {line})" for number, line in orphans.items())
        builder.warnings.append(f"{builder.path}: mini-batch rows of steps {listed} have no step-summary row; "
                                "ignored")


def sniff(row: object, line: str | None) -> str | None:
    """Any JSON text no other format claims (a malformed first line too: the reader names it)."""
    return "xtuner"
