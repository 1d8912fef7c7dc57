"""Which rank folders of one side belong to one model replica, and what the ranks say about each other.

A side's ranks are grouped by its declared :class:`~.layout.SideLayout` (tensor-parallel fastest, then data-parallel,
then pipeline stage, as Megatron numbers them) or by inference: ranks holding different module sets are pipeline
stages (ordered by the first layer they hold), ranks of one stage whose parameters differ are tensor-parallel shards,
ranks that agree are data-parallel replicas and stay units of their own. A pipeline hand-off is checked here too: a
stage's first block must take in what the previous stage's last block put out, call by call.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from autotest.consistency.dumps import Dump, ModuleEntry, load_tensor
from autotest.consistency.layout import SideLayout

#: relative tolerance within which two ranks' copies of one tensor count as the same
REPLICA_RTOL = 1e-5
_BLOCK = re.compile(r"(?:^|\.)layers\.(\d+)$")
_EXPERT = re.compile(r"(?:^|\.)experts\.\d+(?:\.|$)")


#: finding kinds whose tensor was left out of the comparison (or compared by its statistics alone)
LEFT_OUT = ("not_placed", "tensor_missing")


@dataclass(frozen=True)
class ShardFinding:
    """Something the ranks of one side say about themselves, before the other side is looked at."""

    side: str
    module: str
    ranks: tuple[int, ...]
    kind: str
    """``replicas_disagree``, ``stage_boundary``, ``not_placed`` or ``tensor_missing`` (:data:`LEFT_OUT` kinds: a
    tensor the comparison could not use in full)."""
    detail: str
    order: int = 0
    """Position of the module in forward completion order (the first finding is the earliest)."""

    def to_dict(self) -> dict[str, Any]:
        return {"side": self.side, "module": self.module, "ranks": list(self.ranks), "kind": self.kind,
                "detail": self.detail}

    def line(self) -> str:
        return f"{self.side} {self.module} (rank{'s' if len(self.ranks) > 1 else ''} " \
               f"{', '.join(map(str, self.ranks))}): {self.detail}"


@dataclass(frozen=True)
class Group:
    """The ranks of one model replica: ``stages[s]`` lists stage s's tensor-parallel (or expert-parallel) ranks."""

    stages: tuple[tuple[int, ...], ...]
    how: str
    """``declared`` or ``inferred``."""
    expert_parallel: bool = False
    """The ranks of a stage hold different experts and the same whole copy of everything else."""

    @property
    def tp(self) -> int:
        return 1 if self.expert_parallel else len(self.stages[0])

    @property
    def leader(self) -> int:
        return self.stages[0][0]

    def describe(self) -> str:
        ranks = [r for s in self.stages for r in s]
        ep = f", ep={len(self.stages[0])}" if self.expert_parallel else ""
        return f"tp={self.tp}{ep}, pp={len(self.stages)} over ranks {', '.join(map(str, ranks))} ({self.how})"


def plan_groups(dumps: Mapping[int, Dump], layout: SideLayout) -> tuple[list[Group], str]:
    """The model replicas among these ranks, and a note when the ranks cannot be placed (no groups then)."""
    ranks = sorted(dumps)
    if layout.declared:
        ep = layout.ep or 1
        tp, pp = (layout.tp or 1) * ep, layout.pp or 1
        if ep > 1 and (layout.tp or 1) > 1:
            return [], (f"layout {layout.text()}: expert parallel together with tensor parallel is not reassembled "
                        "(each rank's experts would also be split); not reassembled")
        if len(ranks) % (tp * pp):
            return [], (f"layout {layout.text()} does not fit {len(ranks)} rank folders ({', '.join(map(str, ranks))}):"
                        f" tp x ep x pp must divide the rank count; not reassembled")
        if tp * pp == 1:
            return [], ""
        dp = len(ranks) // (tp * pp)
        # Megatron's order: tensor-parallel fastest, then data-parallel, then pipeline stage
        return [Group(tuple(tuple(ranks[s * tp * dp + d * tp + t] for t in range(tp)) for s in range(pp)),
                      "declared", expert_parallel=ep > 1) for d in range(dp)], ""
    stage_of: dict[frozenset[str], list[int]] = {}
    for r in ranks:  # experts live on one rank each: a stage is what the ranks hold besides them
        stage_of.setdefault(frozenset(e.path for e in dumps[r].entries.values() if not is_expert(e.path)),
                            []).append(r)
    stages = sorted(stage_of.values(), key=lambda rs: (_first_layer(dumps[rs[0]]), rs[0]))
    width = len(stages[0])
    if any(len(s) != width for s in stages):
        sizes = ", ".join(str(len(s)) for s in stages)
        return [], (f"{len(stages)} module sets over {len(ranks)} ranks with {sizes} ranks each: the layout cannot be "
                    "inferred; declare it (--train-layout / --rollout-layout tp=N,pp=N)")
    sharded = width > 1 and _parameters_differ(dumps[stages[0][0]], dumps[stages[0][1]])
    experts = [{e.path for e in dumps[r].entries.values() if is_expert(e.path)} for r in stages[0]]
    if width > 1 and not sharded and any(held != experts[0] for held in experts):
        return [Group(tuple(tuple(s) for s in stages), "inferred", expert_parallel=True)], ""
    if len(stages) == 1 and not sharded:
        return [], ""  # data-parallel replicas: each rank is a unit of its own
    tp = width if sharded else 1
    return [Group(tuple(tuple(s[d * tp:(d + 1) * tp]) for s in stages), "inferred") for d in range(width // tp)], ""


def missing_ranks(ranks: Sequence[int]) -> list[int]:
    """The rank numbers below the highest one present that have no folder: MSProbe numbers ranks from 0, so a gap is
    a rank that did not dump (inferring a layout from the rest would call 3 of 4 ranks a tp=3 group)."""
    return sorted(set(range(max(ranks, default=-1) + 1)) - set(ranks))


def is_expert(module_path: str) -> bool:
    """One expert of a mixture-of-experts layer, numbered by its global id (``mlp.experts.5``, ``experts.5.w1``)."""
    return _EXPERT.search(module_path) is not None


def _first_layer(dump: Dump) -> int:
    layers = [int(m.group(1)) for e in dump.entries.values() if (m := re.search(r"layers\.(\d+)", e.path))]
    embeds = any("embed" in e.path for e in dump.entries.values())
    return -1 if embeds else min(layers, default=1 << 30)


def _parameters_differ(a: Dump, b: Dump) -> bool:
    for key, entry in a.entries.items():
        other = b.entries.get(key)
        if other is None:
            continue
        theirs = {t.path: t for t in other.component("parameter")}
        for mine in entry.component("parameter"):
            t = theirs.get(mine.path)
            if t is not None and (t.shape != mine.shape or not stats_close(t.stats, mine.stats)):
                return True
    return False


def stats_close(a: Mapping[str, float | None], b: Mapping[str, float | None]) -> bool:
    for k in ("Max", "Min", "Mean", "Norm"):
        x, y = a.get(k), b.get(k)
        if (x is None) != (y is None):
            return False
        if x is not None and y is not None and not math.isclose(x, y, rel_tol=REPLICA_RTOL, abs_tol=1e-12):
            return False
    return True


def close(a: Any, b: Any) -> bool:
    return a.shape == b.shape and relative(a, b) <= REPLICA_RTOL


def relative(a: Any, b: Any) -> float:
    if a.shape != b.shape:
        return math.inf
    scale = float(b.abs().max()) if b.numel() else 0.0
    return float((a - b).abs().max()) / max(scale, 1e-30) if a.numel() else 0.0


def boundary_findings(dumps: Mapping[int, Dump], group: Group, side: str) -> list[ShardFinding]:
    """A pipeline stage's first block must take in what the previous stage's last block put out, call by call."""
    found: list[ShardFinding] = []
    for before, after in zip(group.stages, group.stages[1:]):
        sent_by = _edge_blocks(dumps[before[0]], last=True)
        got_by = _edge_blocks(dumps[after[0]], last=False)
        for call in sorted(set(sent_by) & set(got_by)):
            out_entry, in_entry = sent_by[call], got_by[call]
            sent = out_entry.component("output")
            got = [t for t in in_entry.component("input") if sent and t.shape == sent[0].shape]
            if not sent or not got:
                continue
            if sent[0].data_file is not None and got[0].data_file is not None:
                rel = relative(load_tensor(got[0]), load_tensor(sent[0]))
                same, how = rel <= REPLICA_RTOL, f"relative {rel:.2g}"
            else:
                same, how = stats_close(got[0].stats, sent[0].stats), "their statistics differ"
            if same:
                continue
            order = next((i for i, k in enumerate(dumps[after[0]].entries) if k == in_entry.key), 0)
            found.append(ShardFinding(
                side, in_entry.path, tuple(after), "stage_boundary",
                f"pipeline hand-off from stage rank {before[0]} to rank {after[0]}: {in_entry.path}'s input is not "
                f"{out_entry.path}'s output (call {call}, {how}); the stage boundary changes the hidden state (a "
                "dropped residual, a wrong tensor sent)", order))
            break
    return found


def _edge_blocks(dump: Dump, last: bool) -> dict[int, ModuleEntry]:
    """The stage's last (or first) decoder block, per call index."""
    layers = {int(m.group(1)) for e in dump.entries.values() if (m := _BLOCK.search(e.path))}
    if not layers:
        return {}
    edge = max(layers) if last else min(layers)
    return {e.call_index: e for e in dump.entries.values()
            if (m := _BLOCK.search(e.path)) and int(m.group(1)) == edge}


