"""Which rank a divergence lives on: the root-cause module's reassembled tensors, compared slice by slice.

After the first-divergence analysis names a module, each rank's slice of that module's weight (then of its output)
on a reassembled side is compared with the same slice of the other side's tensor (a fused module's parts
concatenated in layout order). Ranks whose slice diverges are named, with every rank's relative error as evidence;
the findings the ranks made about themselves while being reassembled (:mod:`.reassemble`: replicas that disagree, a
pipeline hand-off that changes the hidden state) are attached when they sit at or before the root cause.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from autotest.consistency.dumps import Dump, TensorStat, load_tensor, read_dump
from autotest.consistency.rank_groups import ShardFinding
from autotest.consistency.reassemble import SideAssembly

#: a rank's slice diverges when its relative (Frobenius) error passes this and the best rank's is far below it
BLAME_REL = 1e-3
_TENSORS = ("parameters.weight", "output.0")


def blame(root_cause: Mapping[str, Any], rollout_dump: Path, actor_dump: Path,
          assemblies: Sequence[SideAssembly]) -> list[dict[str, Any]]:
    """Per reassembled side: the ranks whose slice of the root cause's tensors diverges, and why."""
    dumps = {"rollout": read_dump(rollout_dump), "train": read_dump(actor_dump)}
    keys = {"rollout": list(root_cause.get("rollout_keys") or ()), "train": list(root_cause.get("train_keys") or ())}
    found = []
    for assembly in assemblies:
        if not assembly.reassembled:
            continue
        side, other = assembly.side, "train" if assembly.side == "rollout" else "rollout"
        if len(keys[side]) != 1 or not keys[other]:
            continue
        entry = dumps[side].entries.get(keys[side][0])
        if entry is None:
            continue
        for path in _TENSORS:
            stat = next((t for t in entry.tensors if t.path == path), None)
            if stat is None or stat.data_file is None:
                continue
            shards = stat.shards
            if not shards:
                continue
            errors = _rank_errors(stat, shards, _others(dumps[other], keys[other], path, shards[0][1]))
            if errors is None:
                continue
            ranks = sorted(r for r, e in errors.items() if e > BLAME_REL)
            if ranks:
                found.append({"side": side, "module": entry.path, "tensor": path, "ranks": ranks,
                              "relative_error": {str(r): float(f"{e:.3g}") for r, e in sorted(errors.items())}})
                break
    return found


def _others(dump: Dump, keys: Sequence[str], path: str, dim: int) -> Any:
    import torch

    parts = []
    for key in keys:
        entry = dump.entries.get(key)
        stat = next((t for t in entry.tensors if t.path == path), None) if entry else None
        if stat is None or stat.data_file is None:
            return None
        parts.append(load_tensor(stat))
    return torch.cat(parts, dim=dim) if len(parts) > 1 else parts[0]


def _rank_errors(stat: TensorStat, shards: Sequence[tuple[int, int, int, int, int]], reference: Any
                 ) -> dict[int, float] | None:
    if reference is None:
        return None
    whole = load_tensor(stat)
    if tuple(reference.shape) != tuple(whole.shape):
        return None
    errors: dict[int, float] = {}
    for rank, dim, start, length, _ in shards:
        mine, ref = whole.narrow(dim, start, length), reference.narrow(dim, start, length)
        err = float((mine - ref).norm()) / max(float(ref.norm()), 1e-30)
        errors[rank] = max(errors.get(rank, 0.0), err)
    return errors


def findings_at(root_cause: Mapping[str, Any], assemblies: Sequence[SideAssembly]) -> list[ShardFinding]:
    """The ranks' own findings that explain a root cause: the earliest of each side (replicas that disagree, a
    stage hand-off), when it sits at the root cause's module, in its block, or before it."""
    chosen = []
    module = str(root_cause.get("module", ""))
    for assembly in assemblies:
        own = [f for f in assembly.findings if f.kind in ("replicas_disagree", "stage_boundary")]
        if own:
            first = own[0]
            if module.startswith(first.module) or first.module.startswith(module) or first.kind == "stage_boundary":
                chosen.append(first)
    return chosen
