"""Pair rollout and actor forwards by request id from the correlation logs.

Never by aggregate metrics: two forwards are compared only if the correlation logs show they
ran over the same requests, in the same batch order, with the same token ids and the same
weight version. Anything else is a typed "cannot conclude" with its reason and evidence lines.

Forward-level pairing is required because MSProbe statistics (and tensors) of a module cover
the whole batch: a rollout forward over requests [a, b, c, d] cannot be compared with an actor
micro-batch [a, b]. The workload therefore runs the rollout full-sequence forward with the same
micro-batches as the actor in the diagnostic window (``micro_batch_size``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from autotest.consistency.correlation import ForwardRecord
from autotest.consistency.dumps import find_dump_dirs

REASONS = {
    "missing_correlation_log": "a side's correlation log is missing or empty",
    "missing_dump_side": "a side's MSProbe dump is missing",
    "unpaired_samples": "requests are not covered by matching forwards on both sides",
    "token_ids_differ": "paired requests were fed different token ids",
    "weight_version_mismatch": "paired forwards ran with different weight versions",
    "no_comparable_modules": "no module of one side maps onto the other",
}


@dataclass(frozen=True)
class CannotConclude:
    """Why the analysis cannot (fully) conclude; never a root cause."""

    reason: str
    """One of :data:`REASONS`."""
    detail: str
    evidence: tuple[str, ...] = ()
    """``file:line`` or paths that show it."""

    def to_dict(self) -> dict[str, object]:
        return {
            "reason": self.reason,
            "summary": REASONS[self.reason],
            "detail": self.detail,
            "evidence": list(self.evidence),
        }


@dataclass(frozen=True)
class ForwardPair:
    """A rollout forward and an actor forward over the same samples."""

    pair_id: str
    step: int
    request_ids: tuple[str, ...]
    """Empty when paired by assumption (no correlation logs)."""
    weight_version: int | None
    """The batch's weight version; None when no log says which weights ran."""
    rollout: ForwardRecord | None
    """The correlation record; None when paired by assumption."""
    actor: ForwardRecord | None
    rollout_dump: Path
    actor_dump: Path
    stale_by: int | None = None
    """Versions the rollout's held weights were behind the actor's for this batch (:func:`stale_by`); None when
    in sync or not logged."""


def stale_by(rollout: ForwardRecord, actor: ForwardRecord) -> int | None:
    """How many versions the rollout's held weights are behind the actor's for the same batch, from each side's own
    ``held_weight_version``; None when either log does not say or the rollout is not behind."""
    if rollout.held_weight_version is None or actor.held_weight_version is None:
        return None
    behind = actor.held_weight_version - rollout.held_weight_version
    return behind if behind > 0 else None


def stale_sync_line(pair: ForwardPair) -> str | None:
    """The report's line naming a stale sync of ``pair`` (None when it has none)."""
    if pair.stale_by is None or pair.rollout is None or pair.actor is None:
        return None
    batch = f" for the batch of weight version {pair.weight_version}" if pair.weight_version is not None else ""
    return (f"the rollout served weights {pair.stale_by} version(s) behind the actor (a stale sync): step "
            f"{pair.step}{batch}, the rollout held version {pair.rollout.held_weight_version} and the actor held "
            f"{pair.actor.held_weight_version} ({_where(pair.rollout)}, {_where(pair.actor)})")


@dataclass(frozen=True)
class PairingResult:
    pairs: tuple[ForwardPair, ...]
    issues: tuple[CannotConclude, ...]
    num_requests: dict[str, int]
    """Distinct request ids seen per side."""
    assumptions: tuple[str, ...] = ()
    """What pairing could not check and took on trust (logs without token ids or weight versions)."""


def _where(rec: ForwardRecord) -> str:
    return f"{rec.log_path}:{rec.line}"


def _short(ids: Sequence[str], limit: int = 5) -> str:
    shown = ", ".join(ids[:limit])
    return shown + (f", ... ({len(ids)} in all)" if len(ids) > limit else "")


def resolve_dump(root: Path, rec: ForwardRecord) -> Path | None:
    """The record's dump folder under the side root (moved results), else its logged path."""
    candidates = ([Path(root) / rec.dump_subdir] if rec.dump_subdir else []) + (
        [Path(rec.dump_path)] if rec.dump_path else []
    )
    for candidate in candidates:
        if candidate.is_dir() and find_dump_dirs(candidate):
            return candidate
    return None


def pair_forwards(
    rollout: Sequence[ForwardRecord],
    actor: Sequence[ForwardRecord],
    rollout_dump_dir: Path,
    actor_dump_dir: Path,
) -> PairingResult:
    """Match each actor forward with the rollout forward holding exactly its requests."""
    issues: list[CannotConclude] = []
    where_rollout: dict[str, ForwardRecord] = {}
    for rec in rollout:
        for rid in rec.request_ids:
            where_rollout.setdefault(rid, rec)
    actor_ids = [rid for rec in actor for rid in rec.request_ids]
    rollout_ids = [rid for rec in rollout for rid in rec.request_ids]
    only_rollout = sorted(set(rollout_ids) - set(actor_ids))
    if only_rollout:
        issues.append(
            CannotConclude(
                "unpaired_samples",
                f"{len(only_rollout)} request(s) dumped on the rollout side have no actor forward: "
                f"{_short(only_rollout)}",
                tuple(sorted({_where(where_rollout[r]) for r in only_rollout})),
            )
        )

    pairs: list[ForwardPair] = []
    assumptions: set[str] = set()
    for arec in actor:
        missing = [rid for rid in arec.request_ids if rid not in where_rollout]
        if missing:
            issues.append(
                CannotConclude(
                    "unpaired_samples",
                    f"actor forward {arec.forward_index} (step {arec.step}) holds request(s) no rollout forward "
                    f"dumped: {_short(missing)}",
                    (_where(arec),),
                )
            )
            continue
        rrec = where_rollout[arec.request_ids[0]]
        if rrec.request_ids != arec.request_ids or rrec.step != arec.step:
            issues.append(
                CannotConclude(
                    "unpaired_samples",
                    f"actor forward {arec.forward_index} (step {arec.step}) batches "
                    f"[{_short(list(arec.request_ids))}] but the "
                    f"rollout forward {rrec.forward_index} (step {rrec.step}) holding them batches "
                    f"[{_short(list(rrec.request_ids))}]; batch statistics are only comparable over the same "
                    "samples in the same order",
                    (_where(arec), _where(rrec)),
                )
            )
            continue
        if not (arec.token_ids and rrec.token_ids):
            assumptions.add(
                "the actor correlation log has no token_ids: paired requests are assumed to hold the same tokens"
            )
        bad_tokens = [
            (rid, _first_difference(rt, at))
            for rid, rt, at in zip(arec.request_ids, rrec.token_ids, arec.token_ids, strict=False)
            if rt != at
        ]
        if bad_tokens:
            rid, pos = bad_tokens[0]
            issues.append(
                CannotConclude(
                    "token_ids_differ",
                    f"{len(bad_tokens)} paired request(s) have different token ids on the two sides; "
                    f"first: {rid} at token {pos}",
                    (_where(arec), _where(rrec)),
                )
            )
            continue
        if rrec.weight_version is None or arec.weight_version is None:
            assumptions.add(
                "a correlation log has no weight_version: paired forwards are assumed to run the same weights "
                "(the weight sync of that step completed before the rollout)"
            )
        elif rrec.weight_version != arec.weight_version:
            issues.append(
                CannotConclude(
                    "weight_version_mismatch",
                    f"rollout forward {rrec.forward_index} used weight version {rrec.weight_version}, actor forward "
                    f"{arec.forward_index} used {arec.weight_version}: not the same computation",
                    (_where(arec), _where(rrec)),
                )
            )
            continue
        rdump, adump = resolve_dump(rollout_dump_dir, rrec), resolve_dump(actor_dump_dir, arec)
        missing_sides = [s for s, d in (("rollout", rdump), ("actor", adump)) if d is None]
        if missing_sides:
            paths = [str(Path(rollout_dump_dir) / rrec.dump_subdir), str(Path(actor_dump_dir) / arec.dump_subdir)]
            issues.append(
                CannotConclude(
                    "missing_dump_side",
                    f"no dump.json for the {' and '.join(missing_sides)} side of requests "
                    f"[{_short(list(arec.request_ids))}]",
                    tuple(paths),
                )
            )
            continue
        assert rdump is not None and adump is not None
        pairs.append(
            ForwardPair(
                pair_id=f"step{arec.step}:actor{arec.forward_index:04d}~rollout{rrec.forward_index:04d}",
                step=arec.step,
                request_ids=arec.request_ids,
                weight_version=arec.weight_version,
                rollout=rrec,
                actor=arec,
                rollout_dump=rdump,
                actor_dump=adump,
                stale_by=stale_by(rrec, arec),
            )
        )
    return PairingResult(
        pairs=tuple(pairs),
        issues=tuple(issues),
        num_requests={"rollout": len(set(rollout_ids)), "actor": len(set(actor_ids))},
        assumptions=tuple(sorted(assumptions)),
    )


def _first_difference(a: Sequence[int], b: Sequence[int]) -> int:
    for i, (x, y) in enumerate(zip(a, b, strict=False)):
        if x != y:
            return i
    return min(len(a), len(b))
