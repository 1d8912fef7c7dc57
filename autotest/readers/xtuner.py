"""xtuner's ``tracker.jsonl`` → :class:`~autotest.judge.trace.Trace`.

Row kinds (REFERENCE.md), told apart by their keys, never by their order: mini-batch rows whose keys all
start with ``train_metrics/`` (attached to their own ``step``, averaged per step, whether written before or
after their summary row), eval rows whose keys are ``eval/*`` (plus the eval timing ``time/eval`` some writers
put on them; step 0 before training), and the step-summary row (everything else). Steps going backwards are
warned about with their line numbers. Rows at one step merge as :mod:`autotest.readers.merge` says.
"""

from __future__ import annotations

from collections import defaultdict
from itertools import repeat
from pathlib import Path

from autotest.errors import UsageError
from autotest.judge.trace import EVAL_PREFIX, MINIBATCH_PREFIX, Trace
from autotest.readers.jsonl import iter_rows, raise_file_error
from autotest.readers.trace_builder import Builder, as_number, kind_of, step_of

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
                        builder.non_numeric[key] = (kind_of(values[key]), f"line {number}")
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


def sniff(row: object, line: str | None) -> str | None:
    """Any JSON text no other format claims (a malformed first line too: the reader names it)."""
    return "xtuner"
