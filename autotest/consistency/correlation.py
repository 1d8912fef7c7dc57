"""Correlation logs: one JSON line per dumped forward, the only basis for pairing samples.

Rollout side (the MindStudio ``dispatch_logger`` shape, extended)::

    {"source": "dispatch_logger", "side": "rollout", "pid": 123, "rank": null, "step": 3,
     "phase": "prefill", "forward_index": 0, "weight_version": 3, "msprobe_step": 3,
     "task": "statistics", "dump_path": "/abs/.../forward_0000/step3/proc123",
     "dump_subdir": "forward_0000/step3/proc123",
     "requests": [{"request_id": "s3-p0-r1", "type": "prefill", "tokens": [..],
                   "token_range": [0, 12], "batch_index": 0}, ...]}

Actor side (the ``update_actor`` shape, extended)::

    {"source": "update_actor", "side": "actor", ... same common keys ...,
     "request_ids": ["s3-p0-r1", ...], "token_ids": [[..], ...], "token_ranges": [[0, 12], ...]}

``weight_version`` is the version of the batch (the weights the step's batch is meant to run with); optional on
both sides, ``"held_weight_version"`` is the version this process held as the forward ran (its own last completed
weight load). A rollout whose held version is behind the actor's for the same batch served stale weights: pairing
names it with the number of versions (:func:`autotest.consistency.pairing.stale_by`).

Optional on both sides: ``"autocast"``, the autocast state the hook saw when the model's forward began
(``"off"`` or the autocast dtype, e.g. ``"torch.bfloat16"``); the dumps' dtypes say what each module computed in,
this says why.

``token_range`` is the request's [start, end) in the forward's packed token order (row
``batch_index`` of a padded batch holds tokens 0..end-start). ``dump_subdir`` is relative to the
side's dump root so moved result folders still resolve.

Logs written by other frameworks carry only the seed's keys (``source``, ``pid``, ``rank``,
``step``, ``phase``, ``requests`` / ``request_ids``): the rest is optional. A missing
``forward_index`` is the record's position among its process's records of that step (MSProbe's
call index ``forward.K`` counts the same way), a missing ``weight_version`` is unknown (pairing
then states the assumption), a missing dump folder is found from ``step`` and ``rank``/``pid``
(``step{N}/rank{R}`` or ``step{N}/proc{pid}``), and missing actor ``token_ids`` are not checked.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from autotest.errors import UsageError

SOURCES = {"rollout": "dispatch_logger", "actor": "update_actor"}
_REQUIRED = ("pid", "step")
DEFAULT_PHASE = {"rollout": "prefill", "actor": "recompute_logprob"}


@dataclass(frozen=True)
class ForwardRecord:
    """One dumped forward pass of one side, as read back from its correlation log."""

    side: str
    pid: int
    rank: int | None
    step: int
    phase: str
    forward_index: int
    weight_version: int | None
    """The version of the batch; None when the log does not say (other frameworks' logs)."""
    msprobe_step: int
    task: str
    dump_path: str
    """Absolute MSProbe rank/proc folder (holds dump.json) at collection time; empty if not logged."""
    dump_subdir: str
    """The same folder relative to the side's dump root; empty if not logged."""
    request_ids: tuple[str, ...]
    token_ids: tuple[tuple[int, ...], ...]
    token_ranges: tuple[tuple[int, int], ...]
    log_path: str
    line: int
    """1-based line of this record in ``log_path`` (for evidence links)."""
    autocast: str | None = None
    """``off`` or the autocast dtype the hook saw as the forward began; None when not logged."""
    held_weight_version: int | None = None
    """The weight version this process held as the forward ran (its last completed load); None when not logged."""

    def to_json(self) -> dict[str, Any]:
        """The on-disk shape of this record (see module docstring)."""
        common: dict[str, Any] = {
            "source": SOURCES[self.side],
            "side": self.side,
            "pid": self.pid,
            "rank": self.rank,
            "step": self.step,
            "phase": self.phase,
            "forward_index": self.forward_index,
            "weight_version": self.weight_version,
            "msprobe_step": self.msprobe_step,
            "task": self.task,
            "dump_path": self.dump_path,
            "dump_subdir": self.dump_subdir,
        }
        if self.autocast is not None:
            common["autocast"] = self.autocast
        if self.held_weight_version is not None:
            common["held_weight_version"] = self.held_weight_version
        if self.side == "rollout":
            common["requests"] = [
                {"request_id": rid, "type": self.phase, "tokens": list(tok), "token_range": list(rng), "batch_index": i}
                for i, (rid, tok, rng) in enumerate(
                    zip(self.request_ids, self.token_ids, self.token_ranges, strict=True)
                )
            ]
        else:
            common["request_ids"] = list(self.request_ids)
            common["token_ids"] = [list(t) for t in self.token_ids]
            common["token_ranges"] = [list(r) for r in self.token_ranges]
        return common


def token_ranges_of(token_ids: list[list[int]] | tuple[tuple[int, ...], ...]) -> tuple[tuple[int, int], ...]:
    """[start, end) of each request in packed order."""
    ranges, start = [], 0
    for toks in token_ids:
        ranges.append((start, start + len(toks)))
        start += len(toks)
    return tuple(ranges)


def append_record(path: Path, record: ForwardRecord) -> None:
    """Append one line and flush, so a killed run keeps every completed forward."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a", encoding="utf-8") as fh:
        fh.write(json.dumps(record.to_json(), sort_keys=False) + "\n")
        fh.flush()


def _whole(value: Any, where: str, key: str) -> int:
    if type(value) is not int or value < 0:
        raise UsageError(f"{where}: key '{key}' is {json.dumps(value)[:40]}, not a whole number >= 0")
    return value


def _list(obj: dict[str, Any], key: str, where: str) -> list[Any]:
    if not isinstance(obj[key], list):
        raise UsageError(f"{where}: key '{key}' must be a list")
    return obj[key]


def _wholes(value: Any, where: str, key: str) -> tuple[int, ...]:
    if not isinstance(value, list):
        raise UsageError(f"{where}: key '{key}' must be a list of token ids")
    return tuple(_whole(v, where, f"{key}.{i}") for i, v in enumerate(value))


def _range(value: Any, where: str, key: str) -> tuple[int, int]:
    if not isinstance(value, list) or len(value) != 2:
        raise UsageError(f"{where}: key '{key}' must be [start, end]")
    start, end = (_whole(v, where, f"{key}.{i}") for i, v in enumerate(value))
    return start, end


def _parse(obj: dict[str, Any], side: str, where: str, path: Path, line: int, ordinal: int) -> ForwardRecord:
    expected = SOURCES[side]
    if obj.get("source") != expected:
        raise UsageError(f"{where}: key 'source': expected {expected!r} on the {side} side, got {obj.get('source')!r}")
    for key in _REQUIRED:
        if key not in obj:
            raise UsageError(f"{where}: key '{key}' is missing")
    if side == "rollout":
        if not isinstance(obj.get("requests"), list):
            raise UsageError(f"{where}: key 'requests' must be a list")
        reqs = obj["requests"]
        for i, req in enumerate(reqs):
            if not isinstance(req, dict) or "request_id" not in req or "tokens" not in req:
                raise UsageError(f"{where}: key 'requests.{i}' needs 'request_id' and 'tokens'")
        request_ids = tuple(str(r["request_id"]) for r in reqs)
        token_ids = tuple(_wholes(r["tokens"], where, f"requests.{i}.tokens") for i, r in enumerate(reqs))
        ranges = (tuple(_range(r["token_range"], where, f"requests.{i}.token_range") for i, r in enumerate(reqs))
                  if all("token_range" in r for r in reqs) else None)
    else:
        if not isinstance(obj.get("request_ids"), list):
            raise UsageError(f"{where}: key 'request_ids' must be a list")
        if "token_ids" in obj and (
            not isinstance(obj["token_ids"], list) or len(obj["request_ids"]) != len(obj["token_ids"])
        ):
            raise UsageError(f"{where}: key 'token_ids' must be a list as long as 'request_ids'")
        request_ids = tuple(str(r) for r in obj["request_ids"])
        token_ids = tuple(_wholes(toks, where, f"token_ids.{i}") for i, toks in enumerate(obj.get("token_ids", [])))
        ranges = (tuple(_range(r, where, f"token_ranges.{i}") for i, r in enumerate(_list(obj, "token_ranges", where)))
                  if "token_ranges" in obj else None)
    version, held, rank = obj.get("weight_version"), obj.get("held_weight_version"), obj.get("rank")
    return ForwardRecord(
        side=side,
        pid=_whole(obj["pid"], where, "pid"),
        rank=None if rank is None else _whole(rank, where, "rank"),
        step=_whole(obj["step"], where, "step"),
        phase=str(obj.get("phase", DEFAULT_PHASE[side])),
        forward_index=_whole(obj.get("forward_index", ordinal), where, "forward_index"),
        weight_version=None if version is None else _whole(version, where, "weight_version"),
        msprobe_step=_whole(obj.get("msprobe_step", obj["step"]), where, "msprobe_step"),
        task=str(obj.get("task", "statistics")),
        dump_path=str(obj.get("dump_path", "")),
        dump_subdir=str(obj.get("dump_subdir", "")),
        request_ids=request_ids,
        token_ids=token_ids,
        token_ranges=ranges if ranges is not None else token_ranges_of(token_ids),  # type: ignore[arg-type]
        log_path=str(path),
        line=line,
        autocast=str(obj["autocast"]) if obj.get("autocast") is not None else None,
        held_weight_version=None if held is None else _whole(held, where, "held_weight_version"),
    )


def read_correlation_log(path: Path, side: str) -> tuple[ForwardRecord, ...]:
    """All forward records of one side. A half-written last line (killed run) is skipped;
    any other malformed line raises UsageError naming file and line."""
    if side not in SOURCES:
        raise ValueError(f"side must be one of {tuple(SOURCES)}, got {side!r}")
    path = Path(path)
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except UnicodeDecodeError as exc:
        raise UsageError(f"{path}: not UTF-8 text (byte {exc.start}); pass the JSON-lines correlation log "
                         "the diagnostic run wrote") from None
    records = []
    seen: dict[tuple[str, ...], int] = {}  # (pid, rank, step) -> forwards so far: the default forward_index
    for number, text in enumerate(lines, start=1):
        if not text.strip():
            continue
        where = f"{path}:{number}"
        try:
            obj = json.loads(text)
        except json.JSONDecodeError:
            if number == len(lines):
                break  # truncated tail of a killed run: every earlier forward is still usable
            raise UsageError(f"{where}: not valid JSON; fix or remove the line") from None
        if not isinstance(obj, dict):
            raise UsageError(f"{where}: expected a JSON object per line")
        unit = tuple(repr(obj.get(k)) for k in ("pid", "rank", "step"))  # a key before _parse checks the values
        records.append(_parse(obj, side, where, path, number, seen.get(unit, 0)))
        seen[unit] = seen.get(unit, 0) + 1
    return tuple(records)
