"""TensorBoard event files → the same :class:`~autotest.judge.trace.Trace` as a tracker.jsonl.

xtuner's default experiment tracker is TensorBoard (the public MOPD recipe leaves it so), writing
``events.out.tfevents.*`` files under ``<exp dir>/logs/``. Reading goes through the ``tensorboard``
package's own :class:`EventAccumulator` (the maintained reader; it handles torch's ``add_scalar``
``simple_value`` summaries and TF2 scalar tensors alike), imported lazily: it is the ``tensorboard``
extra, and nothing else in the harness needs it.

Alignment is by the event's ``step``, never by position. Tags are metric names as logged (xtuner logs
the same keys as its JSONL rows, e.g. ``response/rewards/mean``, ``eval/gsm8k/score``; the Hugging Face
Trainer's TensorBoard callback prefixes ``train/`` and ``eval/``); a baseline's ``metric_aliases`` map them
to its own names. A step with an ``eval/`` tag is an eval step; a step with any other tag is a training step.

Before the accumulator reads a file, its record framing is checked (each record's length carries a
checksum): a file that is not an event file, or is corrupt part-way, is one error naming it — the
accumulator itself would stop at the first bad record without a word. Only a cut-short final record
(a killed run) is dropped, with a warning. A negative step is an error.

When one (tag, step) is logged more than once — a resumed run appends a new file — the rule of the
row readers holds (:mod:`autotest.readers.merge`): exact copies count once (one warning with the count);
values within :data:`~autotest.readers.merge.RESUME_REL_TOL` of each other are a resume (the event written
last wins, one warning); values further apart are an error naming both files.
"""

from __future__ import annotations

import logging
import struct
import threading
from collections import defaultdict
from pathlib import Path
from types import MappingProxyType

from autotest.errors import UsageError
from autotest.inputs.log_search import EVENT_FILE_MARK, is_event_file
from autotest.inputs.schema import printable
from autotest.readers.merge import RESUME_REL_TOL, same_value
from autotest.judge.trace import EVAL_PREFIX, MINIBATCH_PREFIX, Trace

__all__ = ["EVENT_FILE_MARK", "is_event_file", "event_files", "read_tensorboard", "check_records",
           "looks_like_event_file"]
_HEADER = struct.Struct("<QI")
#: logged with every row by the Hugging Face Trainer's TensorBoard callback (train, eval and summary rows
#: at one step): a repeat is not a copy or a resume
BOOKKEEPING_TAGS = frozenset({"train/epoch", "train/num_input_tokens_seen", "epoch"})  # record length, masked CRC-32C of those 8 bytes


def _masked_crc(data: bytes) -> int:
    from tensorboard.compat.tensorflow_stub.pywrap_tensorflow import masked_crc32c

    return masked_crc32c(data)


def looks_like_event_file(path: Path) -> bool:
    """Whether the file starts with a valid TFRecord header (an event file, whatever its name)."""
    try:
        with open(path, "rb") as handle:
            head = handle.read(_HEADER.size)
    except OSError:
        return False
    if len(head) < _HEADER.size:
        return False
    try:
        return _masked_crc(head[:8]) == _HEADER.unpack(head)[1]
    except ImportError:
        return False


def check_records(path: Path) -> str | None:
    """Walk the file's record framing: a warning for a cut-short final record, an error for corruption."""
    size = path.stat().st_size
    offset, count = 0, 0
    with path.open("rb") as handle:
        while offset < size:
            head = handle.read(_HEADER.size)
            if len(head) < _HEADER.size:
                break
            length, crc = _HEADER.unpack(head)
            if _masked_crc(head[:8]) != crc:
                if count == 0:
                    raise UsageError(f"{path}: not a readable TensorBoard event file (its first record fails the "
                                     "checksum: corrupt, or not written by a SummaryWriter); restore it or rerun")
                raise UsageError(f"{path}: TensorBoard event file is corrupt at byte {offset} (record {count + 1} "
                                 f"fails its checksum; {count} records before it are intact); the events after it "
                                 "cannot be read: restore the file or rerun")
            if offset + _HEADER.size + length + 4 > size:
                break
            handle.seek(length + 4, 1)
            offset += _HEADER.size + length + 4
            count += 1
    if offset < size:
        return f"{path}: truncated final event record dropped at byte {offset} (the run was probably killed)"
    return None


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


#: the tensorboard package logs a record that fails its checksum at DEBUG level and stops reading the file
_LOSS_LOCK = threading.Lock()


class _DataLoss(logging.Handler):
    """Collects the reader's "Truncated record in <file> (<why>)" notes while one file is read."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.notes: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        if str(record.msg).startswith("Truncated record"):
            self.notes.append(str(record.args[-1]) if record.args else record.getMessage())


def _accumulator(path: Path):
    try:
        from tensorboard.backend.event_processing.event_accumulator import (
            EventAccumulator,
        )
    except ImportError:
        raise UsageError("reading TensorBoard logs needs the tensorboard package: "
                         "pip install 'rl-autotest[tensorboard]'") from None
    acc = EventAccumulator(str(path), size_guidance={"scalars": 0, "tensors": 0})  # 0: keep every event
    loss = _DataLoss()
    logger = logging.getLogger("tensorboard")
    with _LOSS_LOCK:  # one logger for every thread: its level is changed for this read only
        level, propagate = logger.level, logger.propagate
        logger.setLevel(logging.DEBUG)
        logger.propagate = False
        logger.addHandler(loss)
        try:
            acc.Reload()
        except Exception as exc:  # noqa: BLE001 - a corrupt record raises tensorboard-internal types; name the file
            raise UsageError(f"{path}: cannot read TensorBoard events ({exc}); is the file complete?") from None
        finally:
            logger.removeHandler(loss)
            logger.setLevel(level)
            logger.propagate = propagate
    failed = [n for n in loss.notes if "crc32" in n]
    if failed:
        part = "length header" if "header" in failed[0] else "data"
        raise UsageError(f"{path}: TensorBoard event file is corrupt: a record's {part} fails its checksum, so the "
                         "events after it cannot be read; restore the file or rerun")
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
    latest: dict[tuple[str, int], tuple[float, float, Path]] = {}  # (tag, step) -> (wall_time, value, file)
    warnings: list[str] = []
    copies, relogged = 0, []
    train_steps: set[int] = set()
    eval_steps: set[int] = set()
    tags_seen: set[str] = set()
    for file in files:
        try:
            cut = check_records(file)
        except ImportError:
            cut = None  # _accumulator names the extra to install
        if cut:
            warnings.append(cut)
        in_file: dict[tuple[str, int], list[tuple[float, float]]] = defaultdict(list)
        for tag, events in _scalars(_accumulator(file)).items():
            tags_seen.add(tag)
            for wall_time, step, value in events:
                if step < 0:
                    raise UsageError(f"{file}: tag {printable(tag)} has step {step}, a negative step; steps count from 0 "
                                     "(is this the step the trainer logged, or an offset?)")
                (eval_steps if tag.startswith(EVAL_PREFIX) else train_steps).add(step)
                if keep is None or tag in keep:
                    in_file[(tag, step)].append((wall_time, value))
        for (tag, step), values in in_file.items():
            if tag.startswith(MINIBATCH_PREFIX):  # one value per mini-batch: averaged, as the JSONL reader does
                values = [(max(w for w, _ in values), sum(v for _, v in values) / len(values))]
            seen = latest.get((tag, step))
            for wall_time, value in sorted(values):
                if seen is not None and tag not in BOOKKEEPING_TAGS:
                    if value == seen[1] or (value != value and seen[1] != seen[1]):
                        copies += 1
                    elif not same_value(seen[1], value):
                        where = "the same file" if seen[2] == file else str(seen[2])
                        raise UsageError(f"{file}: {printable(tag)} at step {step} logged again with a different value: {value:.6g}"
                                         f" there, {seen[1]:.6g} earlier in {where} (more than {RESUME_REL_TOL:.1%} "
                                         "apart): a resumed run re-did the step differently and either could be the "
                                         "run's; remove the stale event file (or judge each part separately)")
                    else:
                        relogged.append((tag, step, file))
                if seen is None or wall_time >= seen[0]:
                    seen = (wall_time, value, file)
            latest[(tag, step)] = seen  # type: ignore[assignment]
    if copies:
        warnings.append(f"{path}: {copies} event(s) repeat an earlier (tag, step) with the same value (a writer "
                        "logging every scalar twice, or a resume re-logging identical values); each counted once")
    if relogged:
        listed = ", ".join(f"{t} at step {s} ({f.name})" for t, s, f in relogged[:5])
        warnings.append(f"{path}: {len(relogged)} event(s) logged again (resumed run?): {listed}"
                        f"{' and more' if len(relogged) > 5 else ''}; the values agree within {RESUME_REL_TOL:.1%}, "
                        "the later event wins")
    series: dict[str, dict[int, float]] = defaultdict(dict)
    for (tag, step), (_, value, _) in sorted(latest.items()):
        series[tag][step] = value
    if not train_steps and not eval_steps:
        sizes = [f.stat().st_size for f in files]
        what = "is empty (0 bytes)" if sum(sizes) == 0 else "has no scalar events (only other summaries or headers)"
        raise UsageError(f"{path}: TensorBoard log {what}; did the run start, and does it log scalars?")
    source = files[0] if len(files) == 1 else Path(path)
    return Trace(source=str(source),
                 series=MappingProxyType({m: MappingProxyType(v) for m, v in sorted(series.items())}),
                 train_steps=tuple(sorted(train_steps)), eval_steps=tuple(sorted(eval_steps)),
                 warnings=tuple(warnings), format="tensorboard", logged_metrics=frozenset(tags_seen))
