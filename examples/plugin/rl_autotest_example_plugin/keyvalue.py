"""A log of ``key=value`` lines, one line per step: ``step=3 reward=0.51 loss=1.2``.

The registry record says how the format is recognised (a ``*.kv`` file name), found in a run's work dir
(``*.kv`` up to 3 folders down) and copied into the results folder (``metrics.kv``); the reader turns the file
into the judge's Trace through the harness's row builder, which keeps what is not a number (and says so) and
refuses a step logged twice with other values.
"""

from __future__ import annotations

from pathlib import Path

from autotest.errors import UsageError
from autotest.judge.trace import Trace
from autotest.readers.registry import Layout, ReaderFormat
from autotest.readers.trace_builder import Builder, step_of


def _value(text: str) -> object:
    try:
        return float(text)
    except ValueError:
        return text  # kept as logged: the judge reports a checked metric that is not a number


def read_keyvalue(path: Path, keep: frozenset[str] | None = None) -> Trace:
    builder = Builder(path, "keyvalue", keep)
    with open(path, encoding="utf-8") as lines:
        for number, line in enumerate(lines, 1):
            if not line.strip():
                continue
            pairs = [field.partition("=") for field in line.split()]
            if any(not sep or not key for key, sep, _ in pairs):
                raise UsageError(f"{path}:{number}: expected key=value fields separated by spaces; "
                                 "write each metric as name=value")
            row = {key: _value(value) for key, _, value in pairs}
            step = step_of(f"{path}:{number}", row.pop("step", None))
            if builder.admit(step, row, number, hash(line.strip())):
                builder.train_steps.add(step)
                builder.put_row(step, row, number)
    return builder.build()


FORMAT = ReaderFormat(
    name="keyvalue",
    doc="key=value lines, one per step (step=N metric=value ...)",
    reader="rl_autotest_example_plugin.keyvalue:read_keyvalue",
    layouts=(Layout("key=value log", ("*.kv",), "each", "key=value logs (*.kv up to 3 levels down)"),),
    copy_names=("metrics.kv",),
    names=("*.kv",),
)
