"""TensorBoard event files → the same :class:`~autotest.judge.trace.Trace` as a tracker.jsonl.

xtuner's default experiment tracker is TensorBoard (the public MOPD recipe leaves it so), writing
``events.out.tfevents.*`` files under ``<exp dir>/logs/``. Reading goes through the ``tensorboard``
package's own :class:`EventAccumulator` (the maintained reader; it handles torch's ``add_scalar``
``simple_value`` summaries and TF2 scalar tensors alike), imported lazily: it is the ``tensorboard``
extra, and nothing else in the harness needs it.

Alignment is by the event's ``step``, never by position. Tags are metric names as logged (xtuner logs
the same keys as its JSONL rows, e.g. ``response/rewards/mean``, ``eval/gsm8k/score``); a baseline's
``metric_aliases`` map them to its own names. A step with an ``eval/`` tag is an eval step; a step with
any other tag is a training step. When several files log one (tag, step) — a resumed run appends a new
file — the event written last wins and the reader says so.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from types import MappingProxyType

from autotest.errors import UsageError
from autotest.judge.trace import EVAL_PREFIX, MINIBATCH_PREFIX, Trace

EVENT_FILE_MARK = "tfevents"


def is_event_file(path: Path) -> bool:
    return path.is_file() and EVENT_FILE_MARK in path.name


def event_files(path: Path) -> list[Path]:
    """The event files at ``path`` (one file, or every one below a folder), oldest first by name."""
    path = Path(path)
    if is_event_file(path):
        return [path]
    if not path.exists():
        raise UsageError(f"{path}: no such file or directory; pass a TensorBoard event file or its log folder")
    if path.is_file():
        raise UsageError(f"{path}: not a TensorBoard event file (name has no '{EVENT_FILE_MARK}'); "
                         "check tracker.format")
    found = sorted((p for p in path.rglob(f"*{EVENT_FILE_MARK}*") if p.is_file()), key=lambda p: (p.name, str(p)))
    if not found:
        raise UsageError(f"{path}: no TensorBoard event files (events.out.tfevents.*) below it; "
                         "did the run log to TensorBoard?")
    return found


def _accumulator(path: Path):
    try:
        from tensorboard.backend.event_processing.event_accumulator import (
            EventAccumulator,
        )
    except ImportError:
        raise UsageError("reading TensorBoard logs needs the tensorboard package: "
                         "pip install 'rl-autotest[tensorboard]'") from None
    acc = EventAccumulator(str(path), size_guidance={"scalars": 0, "tensors": 0})  # 0: keep every event
    try:
        acc.Reload()
    except Exception as exc:  # noqa: BLE001 - a corrupt record raises tensorboard-internal types; name the file
        raise UsageError(f"{path}: cannot read TensorBoard events ({exc}); is the file complete?") from None
    return acc


def _scalars(acc) -> dict[str, list[tuple[float, int, float]]]:
    """tag -> [(wall_time, step, value)] from simple-value scalars and scalar tensors."""
    out: dict[str, list[tuple[float, int, float]]] = {}
    tags = acc.Tags()
    for tag in tags.get("scalars", []):
        out[tag] = [(e.wall_time, int(e.step), float(e.value)) for e in acc.Scalars(tag)]
    for tag in tags.get("tensors", []):
        if tag in out:
            continue
        from tensorboard.util import tensor_util

        values = []
        for event in acc.Tensors(tag):
            array = tensor_util.make_ndarray(event.tensor_proto)
            if array.size == 1 and array.dtype.kind in "fiu":
                values.append((event.wall_time, int(event.step), float(array.reshape(()))))
        if values:
            out[tag] = values
    return out


def read_tensorboard(path: str | Path, keep: frozenset[str] | None = None) -> Trace:
    """Read every event file at ``path`` into one Trace (``keep``: only these metrics)."""
    files = event_files(Path(path))
    latest: dict[tuple[str, int], tuple[float, float]] = {}  # (tag, step) -> (wall_time, value)
    warnings: list[str] = []
    train_steps: set[int] = set()
    eval_steps: set[int] = set()
    for file in files:
        in_file: dict[tuple[str, int], list[tuple[float, float]]] = defaultdict(list)
        for tag, events in _scalars(_accumulator(file)).items():
            for wall_time, step, value in events:
                (eval_steps if tag.startswith(EVAL_PREFIX) else train_steps).add(step)
                if keep is None or tag in keep:
                    in_file[(tag, step)].append((wall_time, value))
        for (tag, step), values in in_file.items():
            if tag.startswith(MINIBATCH_PREFIX):  # one value per mini-batch: averaged, as the JSONL reader does
                values = [(max(w for w, _ in values), sum(v for _, v in values) / len(values))]
            seen = latest.get((tag, step))
            if (seen is not None or len(values) > 1) and len(warnings) < 20:
                warnings.append(f"{file}: {tag} at step {step} logged again (resumed run?); the later event wins")
            for wall_time, value in values:
                if seen is None or wall_time >= seen[0]:
                    seen = (wall_time, value)
            latest[(tag, step)] = seen
    series: dict[str, dict[int, float]] = defaultdict(dict)
    for (tag, step), (_, value) in sorted(latest.items()):
        series[tag][step] = value
    if not train_steps and not eval_steps:
        raise UsageError(f"{path}: TensorBoard log has no scalar events; did the run start?")
    source = files[0] if len(files) == 1 else Path(path)
    return Trace(source=str(source),
                 series=MappingProxyType({m: MappingProxyType(v) for m, v in sorted(series.items())}),
                 train_steps=tuple(sorted(train_steps)), eval_steps=tuple(sorted(eval_steps)),
                 warnings=tuple(warnings), format="tensorboard")
