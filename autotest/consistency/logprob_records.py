"""Per-token log-prob records: what the rollout recorded while sampling, and the two recomputes.

The three-way comparison (:mod:`.logprob_compare`) needs, per sampled token of the window, three
log-probs of the same token. One JSON line holds one sample's tokens as one *kind* saw them::

    {"kind": "recorded", "step": 3, "sample": 0, "request_id": "step3-p0-s0",
     "positions": [5, 6, 7], "token_ids": [9, 4, 1], "logprobs": [-0.41, -1.2, -0.03]}

- ``kind``: ``recorded`` — the log-probs the rollout returned while sampling (what the run's
  mismatch metrics used); ``recomputed`` — the rollout model's own full-sequence (prefill)
  recompute of the same tokens; ``trainer`` — the training engine's recompute.
- ``step``: the training step; ``sample``: the sample's index in that step's batch;
  ``request_id`` (optional): when every record of two kinds has one, records are matched by it,
  else by ``sample``.
- ``positions``: each token's index in the full sequence (prompt + response), so kinds that cut
  the sequence differently still line up; ``token_ids`` and ``logprobs`` have one entry per position.
- ``position_ids`` and ``cache_lengths`` (optional, both or neither; one entry per position): the KV-cache
  path of the forward whose logits scored each token: the position id that forward gave its input token
  (expected ``position - 1``) and the KV-cache length it attended over, its own entry included (expected
  ``position``). The first token of a sample (its smallest position) is scored by the prefill, every later
  one by a decode forward over the cache; these keys let the comparison name a decode-path bug directly.
- ``dtype`` (optional): the compute dtype of the model that produced the values (``fp32``, ``bf16``,
  ``fp16``; torch names too). It sets how much rounding noise a comparison tolerates; unknown counts
  as low precision (the wider threshold).

The embedded workloads write ``<collection output_dir>/logprobs/<kind>.jsonl`` when collection is
on (:meth:`autotest.consistency.collect.ConsistencyObserver.record_logprobs`); another framework
writes the same lines from its sampler and passes the files to ``consistency analyze --logprobs``.
Only the standard library is used: the reader runs where torch is not installed.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from autotest.errors import UsageError

KINDS = ("recorded", "recomputed", "trainer")
#: dtype names a record may give, by precision class
DTYPES = {"fp32": "fp32", "float32": "fp32", "torch.float32": "fp32",
          "bf16": "low", "bfloat16": "low", "torch.bfloat16": "low",
          "fp16": "low", "float16": "low", "torch.float16": "low"}
FOLDER = "logprobs"
"""Where the collection writes the records, below its ``output_dir``: one ``<kind>.jsonl`` per kind."""
_FIX = "write one JSON object per line as documented in autotest/consistency/logprob_records.py"
#: a log-prob is <= 0; fp32 log_softmax can round a certain token a hair above 0
_LOGPROB_CEILING = 1e-4


@dataclass(frozen=True)
class LogprobRecord:
    """One sample's tokens as one kind saw them."""

    kind: str
    step: int
    sample: int
    request_id: str | None
    positions: tuple[int, ...]
    token_ids: tuple[int, ...]
    logprobs: tuple[float, ...]
    dtype: str | None
    """``fp32`` or ``low`` (bf16/fp16) precision of the model that produced the values; None: not given."""
    source: str
    """``path:line`` the record was read from (every number in a report points to its file)."""
    position_ids: tuple[int, ...] | None = None
    """Per token, the position id of the forward that scored it (None: not recorded)."""
    cache_lengths: tuple[int, ...] | None = None
    """Per token, the KV-cache length that forward attended over (None: not recorded)."""


def record_lines(kind: str, step: int, samples: Sequence[int], request_ids: Sequence[str] | None,
                 positions: Sequence[Sequence[int]], token_ids: Sequence[Sequence[int]],
                 logprobs: Sequence[Sequence[float]], dtype: str | None = None,
                 position_ids: Sequence[Sequence[int]] | None = None,
                 cache_lengths: Sequence[Sequence[int]] | None = None) -> list[str]:
    """The JSON lines of one batch of samples (the writer side of :func:`read_logprob_file`)."""
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
    lines = []
    for i, sample in enumerate(samples):
        row: dict[str, Any] = {"kind": kind, "step": int(step), "sample": int(sample)}
        if dtype is not None:
            row["dtype"] = dtype
        if request_ids is not None:
            row["request_id"] = str(request_ids[i])
        row.update(positions=[int(p) for p in positions[i]], token_ids=[int(t) for t in token_ids[i]],
                   logprobs=[float(v) for v in logprobs[i]])
        if position_ids is not None and cache_lengths is not None:
            row.update(position_ids=[int(p) for p in position_ids[i]], cache_lengths=[int(c) for c in cache_lengths[i]])
        lines.append(json.dumps(row))
    return lines


def append_records(path: Path, lines: Iterable[str]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a", encoding="utf-8") as fh:
        fh.writelines(line + "\n" for line in lines)


def logprob_files(paths: Sequence[Path]) -> list[Path]:
    """The record files named: a file as is, a folder's ``*.jsonl``. A missing path is a user error."""
    found: list[Path] = []
    for path in map(Path, paths):
        if path.is_dir():
            found += sorted(path.glob("*.jsonl"))
        elif path.is_file():
            found.append(path)
        else:
            raise UsageError(f"{path}: log-prob records not found; pass a JSON-lines file or a folder of them "
                             f"(--logprobs); {_FIX}")
    return found


def read_logprob_files(paths: Sequence[Path]) -> dict[str, tuple[LogprobRecord, ...]]:
    """Every record of the named files, by kind. Each bad line raises one UsageError naming file, line, key."""
    by_kind: dict[str, list[LogprobRecord]] = {}
    for path in logprob_files(paths):
        for record in read_logprob_file(path):
            by_kind.setdefault(record.kind, []).append(record)
    for kind, records in by_kind.items():
        seen: dict[tuple[int, int | str], str] = {}
        for r in records:
            key = (r.step, r.request_id or r.sample)  # ranks may number their samples from 0 each
            if key in seen:
                raise UsageError(f"{r.source}: {kind} sample {r.request_id or r.sample} of step {r.step} is already "
                                 f"at {seen[key]}; write each sample once per kind")
            seen[key] = r.source
    return {kind: tuple(records) for kind, records in by_kind.items()}


def read_logprob_file(path: Path) -> list[LogprobRecord]:
    """The records of one JSON-lines file (blank lines skipped)."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise UsageError(f"{path}: not UTF-8 text; {_FIX}") from None
    records = []
    for number, line in enumerate(text.splitlines(), start=1):
        if line.strip():
            records.append(_parse(line, f"{path}:{number}"))
    return records


def _parse(line: str, where: str) -> LogprobRecord:
    try:
        row = json.loads(line)
    except json.JSONDecodeError as exc:
        raise UsageError(f"{where}: not valid JSON ({exc.msg}); {_FIX}") from None
    if not isinstance(row, dict):
        raise UsageError(f"{where}: a JSON {type(row).__name__}, not an object; {_FIX}")
    for key in ("kind", "step", "sample", "positions", "token_ids", "logprobs"):
        if key not in row:
            raise UsageError(f"{where}: key '{key}' is missing; {_FIX}")
    if row["kind"] not in KINDS:
        raise UsageError(f"{where}: key 'kind' is {row['kind']!r}; use one of {', '.join(KINDS)}")
    step, sample = (_whole(row[k], where, k) for k in ("step", "sample"))
    request_id = row.get("request_id")
    if request_id is not None and not (isinstance(request_id, str) and request_id):
        raise UsageError(f"{where}: key 'request_id' is {request_id!r}, not a non-empty text (or leave it out)")
    positions = tuple(_whole(v, where, f"positions[{i}]") for i, v in enumerate(_list(row, "positions", where)))
    tokens = tuple(_whole(v, where, f"token_ids[{i}]") for i, v in enumerate(_list(row, "token_ids", where)))
    values = _list(row, "logprobs", where)
    if not len(positions) == len(tokens) == len(values):
        raise UsageError(f"{where}: positions, token_ids and logprobs have {len(positions)}, {len(tokens)} and "
                         f"{len(values)} entries; give one of each per token")
    if len(set(positions)) != len(positions):
        raise UsageError(f"{where}: key 'positions' repeats a position; give each token once")
    logprobs = []
    for i, v in enumerate(values):
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise UsageError(f"{where}: key 'logprobs[{i}]' is {v!r}, not a number")
        if not math.isfinite(v):
            raise UsageError(f"{where}: key 'logprobs[{i}]' is {v}: log-probs must be finite (a sampled token has "
                             "p > 0); check the log-prob gathering of that sample")
        if v > _LOGPROB_CEILING:
            raise UsageError(f"{where}: key 'logprobs[{i}]' is {v} > 0: not a log-probability (probabilities or "
                             "logits written instead?)")
        logprobs.append(float(v))
    kv = [tuple(_whole(v, where, f"{key}[{i}]") for i, v in enumerate(_list(row, key, where))) if key in row
          else None for key in ("position_ids", "cache_lengths")]
    if (kv[0] is None) != (kv[1] is None) or any(k is not None and len(k) != len(positions) for k in kv):
        raise UsageError(f"{where}: keys 'position_ids' and 'cache_lengths' go together, one entry per position "
                         "(or leave both out)")
    dtype = row.get("dtype")
    if dtype is not None and (not isinstance(dtype, str) or dtype not in DTYPES):
        raise UsageError(f"{where}: key 'dtype' is {dtype!r}; use one of fp32, bf16, fp16 (or leave it out)")
    return LogprobRecord(row["kind"], step, sample, request_id, positions, tokens, tuple(logprobs),
                         DTYPES[dtype] if dtype else None, where, kv[0], kv[1])


def _list(row: dict[str, Any], key: str, where: str) -> list[Any]:
    value = row[key]
    if not isinstance(value, list):
        raise UsageError(f"{where}: key '{key}' is {type(value).__name__}, not a list (one entry per token)")
    return value


def _whole(value: Any, where: str, key: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise UsageError(f"{where}: key '{key}' is {value!r}, not a whole number >= 0")
    return value
