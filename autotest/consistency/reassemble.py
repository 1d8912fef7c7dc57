"""Put one side's per-rank MSProbe dumps back together into the dump one unsharded process would have written.

MSProbe writes one folder per rank (``step{N}/rank{R}/dump.json``). When a side ran tensor- or pipeline-parallel,
the ranks of one model replica are a *group*: this module finds the groups (declared in the side's
:class:`~.layout.SideLayout` or inferred: ranks holding different module sets are pipeline stages, ranks whose
parameters differ are tensor-parallel shards, ranks that agree are data-parallel replicas and stay separate units),
and writes each group as one dump folder (``<out>/reassembled/<side>/step{N}/rank{leader}``) that the pairing,
mapping and first-divergence analysis read like any other:

- a split tensor is concatenated along its split dim (fused ``[q_r | k_r | v_r]`` parts per rank regrouped into
  ``[q | k | v]``; kv heads replicated over ranks taken once), a partial sum is added, a whole tensor is taken
  from the first rank that holds it, pipeline stages are joined in stage order;
- every leaf records where each rank's slice sits in the whole (``shards``: rank, dim, start, length, local start),
  so a divergence found later can be blamed on a rank (:mod:`.shard_blame`);
- ranks that should hold the same values and do not (a replicated module, a kv head's replicas, an all-reduced
  output) are findings, as is a pipeline hand-off that changes the hidden state;
- what cannot be placed (a layout that does not fit the rank count, a fused split with unknown head counts, partial
  sums in a statistics-only dump) is named, one line each, and the tensor left out.

Tensors are streamed: one tensor's shards are loaded, joined, written and dropped before the next, so memory stays
at one whole tensor whatever the rank count.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from autotest.consistency.dumps import Dump, ModuleEntry, TensorStat, load_tensor, read_dump
from autotest.consistency.dump_leaves import combined_stats, leaf, put, stats_of
from autotest.consistency.layout import FUSED_PARTS, SideLayout, module_role, split_dim
from autotest.consistency.rank_groups import (
    Group,
    ShardFinding,
    boundary_findings,
    close,
    is_expert,
    missing_ranks,
    plan_groups,
    relative,
    stats_close,
)
from autotest.consistency.sources import scan_side
from autotest.errors import UsageError



@dataclass
class SideAssembly:
    """What became of one side's rank folders."""

    side: str
    root: Path
    """The folder the analysis reads: the side's own root, or the reassembled one."""
    groups: list[Group] = field(default_factory=list)
    findings: list[ShardFinding] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    """What could not be reassembled (also in the report's limitations)."""
    missing: list[str] = field(default_factory=list)
    """Rank folders that are not there (one line each): an error under ``consistency analyze``."""

    @property
    def reassembled(self) -> bool:
        return bool(self.groups)

    def to_dict(self) -> dict[str, Any]:
        return {"side": self.side, "root": str(self.root), "groups": [g.describe() for g in self.groups],
                "findings": [f.to_dict() for f in self.findings], "notes": list(self.notes)}


def assemble_side(root: Path, side: str, layout: SideLayout, out_dir: Path, other_root: Path | None = None,
                  step: int | None = None, use_tensors: bool = True) -> SideAssembly:
    """Reassemble every rank group under ``root`` into ``out_dir/reassembled/<side>``; an unsharded side (one unit,
    or data-parallel ranks) comes back as it is. ``other_root`` (the other side's dumps) supplies head counts a fused
    qkv split needs when the layout does not declare them. Without ``use_tensors`` only statistics are joined (the
    analysis' ``--statistics-only``): no tensor is read or written."""
    found = scan_side(root, side, usage_errors=False)
    by_folder: dict[tuple[int | None, Path], dict[int, Path]] = {}
    for unit in found.units:
        if unit.rank is not None and (step is None or unit.step in (step, None)):
            by_folder.setdefault((unit.step, unit.path.parent), {})[unit.rank] = unit.path
    assembly = SideAssembly(side, Path(root))
    target = Path(out_dir) / "reassembled" / side
    plans = []
    for (_, parent), ranks in sorted(by_folder.items(), key=lambda kv: str(kv[0][1])):
        if len(ranks) < 2 and not layout.declared:
            continue
        absent = missing_ranks(list(ranks))
        if absent:
            line = (f"{parent}: rank folder{'s' if len(absent) > 1 else ''} {', '.join(f'rank{r}' for r in absent)} "
                    f"missing (present: {', '.join(f'rank{r}' for r in sorted(ranks))}); a rank that did not dump "
                    "cannot be reassembled: re-collect it, or point at a complete dump")
            assembly.missing.append(line)
            assembly.notes.append(line)
            continue
        dumps = {r: read_dump(p) for r, p in sorted(ranks.items())}
        groups, note = plan_groups(dumps, layout)
        if note:
            assembly.notes.append(f"{parent}: {note}")
        plans += [(parent, dumps, g) for g in groups]
    if not plans:
        return assembly
    facts = _head_facts(layout, other_root)
    for parent, dumps, group in plans:
        rel = parent.relative_to(root) if parent != Path(root) and Path(root) in parent.parents else Path(parent.name)
        folder = target / rel / f"rank{group.leader}"
        _write_group(folder, dumps, group, side, layout, facts, assembly, use_tensors)
        assembly.groups.append(group)
    assembly.root = target
    assembly.findings.sort(key=lambda f: f.order)
    return assembly


@dataclass(frozen=True)
class _Heads:
    heads: int | None
    kv_heads: int | None


def _head_facts(layout: SideLayout, other_root: Path | None) -> _Heads:
    heads, kv = layout.heads, layout.kv_heads
    if (heads is None or kv is None) and other_root is not None:
        for unit in scan_side(other_root, "other", usage_errors=False).units[:1]:
            for entry in read_dump(unit.path).entries.values():
                name = entry.path.rsplit(".", 1)[-1]
                out = entry.component("output")
                if out and len(out[0].shape) >= 2 and name in ("q_norm", "k_norm"):
                    if name == "q_norm" and heads is None:
                        heads = out[0].shape[-2]
                    if name == "k_norm" and kv is None:
                        kv = out[0].shape[-2]
    return _Heads(heads, kv)


def _write_group(folder: Path, dumps: Mapping[int, Dump], group: Group, side: str, layout: SideLayout,
                 facts: _Heads, assembly: SideAssembly, use_tensors: bool) -> None:
    tensor_dir = folder / "dump_tensor_data"
    tensor_dir.mkdir(parents=True, exist_ok=True)
    data: dict[str, Any] = {}
    construct: dict[str, Any] = {}
    seen: set[str] = set()
    first = dumps[group.leader]
    for stage in group.stages:
        for key in _merged_keys([dumps[r] for r in stage]):
            if key in seen:
                continue  # a module every stage runs (the rotary embedding): the first stage's copy
            seen.add(key)
            holders = tuple(r for r in stage if key in dumps[r].entries)
            entry = dumps[holders[0]].entries[key]
            if len(holders) < len(stage) and not is_expert(entry.path):
                missing = tuple(r for r in stage if r not in holders)
                assembly.findings.append(ShardFinding(side, entry.path, missing, "not_placed",
                                                      f"{key} is not in these ranks' dumps; taken from rank(s) "
                                                      f"{', '.join(map(str, holders))} alone", len(seen)))
            joiner = _Joiner(side, entry, holders, layout, facts, tensor_dir, assembly, order=len(seen),
                             use_tensors=use_tensors, whole=group.expert_parallel)
            data[key] = joiner.body([dumps[r].entries[key] for r in holders])
            if entry.parent:
                construct[key] = entry.parent
    if len(group.stages) > 1:
        assembly.findings += boundary_findings(dumps, group, side)
    doc = {"task": first.task, "level": first.level, "data": data}
    (folder / "dump.json").write_text(json.dumps(doc), encoding="utf-8")
    (folder / "construct.json").write_text(json.dumps(construct), encoding="utf-8")


def _merged_keys(dumps: Sequence[Dump]) -> list[str]:
    """Every module key of these ranks in completion order: the first rank's order, with keys only another rank
    holds (its experts) placed just before the next key both hold (the layer that gathers the experts' outputs)."""
    merged = list(dumps[0].entries)
    known = set(merged)
    for dump in dumps[1:]:
        pending: list[str] = []
        for key in dump.entries:
            if key not in known:
                pending.append(key)
                continue
            at = merged.index(key)
            merged[at:at] = pending
            known.update(pending)
            pending = []
        merged += pending
        known.update(pending)
    return merged


class _Joiner:
    """Joins one module call's tensors over the tensor-parallel ranks of a stage."""

    def __init__(self, side: str, entry: ModuleEntry, ranks: tuple[int, ...], layout: SideLayout, facts: _Heads,
                 tensor_dir: Path, assembly: SideAssembly, order: int, use_tensors: bool = True,
                 whole: bool = False) -> None:
        self.side, self.entry, self.ranks, self.layout = side, entry, ranks, layout
        self.use_tensors = use_tensors
        self.facts, self.tensor_dir, self.assembly, self.order = facts, tensor_dir, assembly, order
        # expert-parallel ranks hold whole copies of everything but their experts
        self.role = "replicated" if whole else module_role(entry.path, entry.cls)

    def body(self, per_rank: Sequence[ModuleEntry]) -> dict[str, Any]:
        body: dict[str, Any] = {}
        for stat in per_rank[0].tensors:
            shards = [next((t for t in e.tensors if t.path == stat.path), None) for e in per_rank]
            if any(s is None for s in shards):
                self._finding("not_placed", self.ranks, f"{stat.path} is missing on some ranks; left out")
                continue
            leaf = self._join(stat, shards)  # type: ignore[arg-type]
            if leaf is not None:
                put(body, stat.path, leaf)
        return body

    def _finding(self, kind: str, ranks: Sequence[int], detail: str) -> None:
        self.assembly.findings.append(ShardFinding(self.side, self.entry.path, tuple(ranks), kind, detail, self.order))

    def _join(self, stat: TensorStat, shards: Sequence[TensorStat]) -> dict[str, Any] | None:
        tp = len(shards)
        dim = split_dim(self.role, stat.component, stat.path, len(stat.shape)) if tp > 1 else None
        tensors = self.use_tensors and all(s.data_file is not None for s in shards)
        without = [r for r, s in zip(self.ranks, shards) if s.data_file is None]
        if self.use_tensors and without and len(without) < len(shards):
            self._finding("tensor_missing", without,
                          f"{stat.path}: rank{'s' if len(without) > 1 else ''} {', '.join(map(str, without))} dumped "
                          f"no tensor file (its dump.json has statistics only) where rank(s) "
                          f"{', '.join(str(r) for r in self.ranks if r not in without)} did; joined from statistics, "
                          "so its values are not compared: re-collect the tensor pass on every rank")
        partial = (tp > 1 and dim is None and self.role == "row" and stat.component == "output"
                   and self.layout.is_partial(self.entry.path))
        if dim is None and not partial:
            return self._whole(stat, shards, tensors)
        if partial:
            if not tensors:
                self._finding("not_placed", self.ranks, f"{stat.path}: partial sums in a statistics-only dump cannot "
                                                       "be added; dump tensors (task tensor) to compare it")
                return None
            return self._write(stat, _sum(shards), [])
        segments = self._segments(stat, shards, dim)
        if segments is None:
            return None
        if not tensors:
            return self._statsleaf(stat, shards, dim, segments)
        pieces = [load_tensor(s) for s in shards]
        used = self._check_replicas(stat, pieces, segments)
        import torch

        whole = torch.cat([pieces[self.ranks.index(r)].narrow(dim, local, length)
                           for r, _, _, length, local in sorted(used, key=lambda seg: seg[2])], dim=dim)
        return self._write(stat, whole, segments)

    def _whole(self, stat: TensorStat, shards: Sequence[TensorStat], tensors: bool) -> dict[str, Any]:
        if len(shards) > 1:
            if tensors:
                pieces = [load_tensor(s) for s in shards]
                off = [r for r, p in zip(self.ranks[1:], pieces[1:]) if not close(p, pieces[0])]
                if off:
                    rel = max(relative(p, pieces[0]) for p in pieces[1:])
                    self._finding("replicas_disagree", (self.ranks[0], *off),
                                  f"{stat.path} should be the same on every rank ({self._why_whole(stat)}) but ranks "
                                  f"{', '.join(map(str, off))} differ from rank {self.ranks[0]} (relative {rel:.2g})")
            else:
                off = [r for r, s in zip(self.ranks[1:], shards[1:]) if not stats_close(s.stats, shards[0].stats)]
                if off:
                    self._finding("replicas_disagree", (self.ranks[0], *off),
                                  f"{stat.path} statistics differ between ranks that should hold the same tensor "
                                  f"({self._why_whole(stat)})")
        if stat.data_file is None or not tensors:
            return leaf(stat, stat.stats, stat.shape, None, [])
        return self._write(stat, load_tensor(stat), [])

    def _why_whole(self, stat: TensorStat) -> str:
        if self.role == "row" and stat.component == "output":
            return ("a row-parallel output, all-reduced inside the module: each rank kept its own partial sum, so the "
                    "all-reduce did not run or ran over the wrong group; declare partial=GLOB if this engine dumps "
                    "the output before its reduce")
        if self.role == "vocab" and stat.component == "output":
            return "a vocab-parallel embedding's output, all-reduced"
        return "a replicated module"

    def _segments(self, stat: TensorStat, shards: Sequence[TensorStat], dim: int
                  ) -> list[tuple[int, int, int, int, int]] | None:
        """(rank, dim, start in the whole, length, start in the rank's tensor) per slice; None: not placed."""
        local = stat.shape[dim]
        if any(s.shape != stat.shape for s in shards):
            self._finding("not_placed", self.ranks, f"{stat.path}: ranks dumped different shapes "
                                                   f"({', '.join(str(list(s.shape)) for s in shards)}); left out")
            return None
        name = self.entry.path.rsplit(".", 1)[-1]
        tp = len(shards)
        fused = FUSED_PARTS.get(name) if self.role == "column" and stat.path.rsplit(".", 1)[-1] != "bias" else None
        if fused is None and name in ("k_norm", "k_layernorm") and self.facts.kv_heads:
            return self._replicated_heads(dim, local, tp, self.facts.kv_heads, local)
        if fused is None:
            return [(r, dim, i * local, local, 0) for i, r in enumerate(self.ranks)]
        if len(fused) == 2:
            half = local // 2
            return [(r, dim, p * half * tp + i * half, half, p * half) for p in range(2) for i, r in
                    enumerate(self.ranks)]
        return self._qkv(stat, dim, local, tp)

    def _qkv(self, stat: TensorStat, dim: int, local: int, tp: int) -> list[tuple[int, int, int, int, int]] | None:
        heads, kv = self.facts.heads, self.facts.kv_heads
        if not heads or not kv or heads % tp:
            self._finding("not_placed", self.ranks, f"{stat.path}: a fused qkv split over {tp} ranks needs the head "
                                                   "counts; declare heads=N,kv_heads=N in the side's layout")
            return None
        kv_local_heads = max(1, kv // tp)
        head_dim = local // (heads // tp + 2 * kv_local_heads)
        q_local, kv_local = heads // tp * head_dim, kv_local_heads * head_dim
        if q_local + 2 * kv_local != local:
            self._finding("not_placed", self.ranks, f"{stat.path}: {local} rows per rank do not fit {heads} query "
                                                   f"and {kv} kv heads over {tp} ranks; declare the right heads")
            return None
        segments = [(r, dim, i * q_local, q_local, 0) for i, r in enumerate(self.ranks)]
        q_total, kv_total = heads * head_dim, kv * head_dim
        for p, start in ((1, q_total), (2, q_total + kv_total)):
            for r, d, full, length, _ in self._replicated_heads(dim, kv_local, tp, kv, kv_local):
                segments.append((r, d, start + full, length, q_local + (p - 1) * kv_local))
        return segments

    def _replicated_heads(self, dim: int, local: int, tp: int, kv_heads: int, length: int
                          ) -> list[tuple[int, int, int, int, int]]:
        replicas = max(1, tp // kv_heads)
        return [(r, dim, (i // replicas) * length, length, 0) for i, r in enumerate(self.ranks)]

    def _check_replicas(self, stat: TensorStat, pieces: list[Any], segments: list[tuple[int, int, int, int, int]]
                        ) -> list[tuple[int, int, int, int, int]]:
        """The slices the whole is made of (the first holder of each place); replicas that differ are findings."""
        owner_of: dict[int, tuple[int, int]] = {}
        used = []
        for seg in segments:
            r, d, full, length, local = seg
            piece = pieces[self.ranks.index(r)].narrow(d, local, length)
            if full not in owner_of:
                owner_of[full] = (r, local)
                used.append(seg)
                continue
            first, first_local = owner_of[full]
            if not close(piece, pieces[self.ranks.index(first)].narrow(d, first_local, length)):
                self._finding("replicas_disagree", (first, r),
                              f"{stat.path}: rank {r}'s copy of the slice [{full}, {full + length}) along dim {d} "
                              f"differs from rank {first}'s (replicated kv heads must be equal)")
        return used

    def _statsleaf(self, stat: TensorStat, shards: Sequence[TensorStat], dim: int,
                    segments: list[tuple[int, int, int, int, int]]) -> dict[str, Any] | None:
        owner_of: dict[int, int] = {}
        replica_ranks, owner_ranks = set(), set()
        for r, _, full, _, _ in segments:
            (replica_ranks if owner_of.setdefault(full, r) != r else owner_ranks).add(r)
        if replica_ranks & owner_ranks:
            self._finding("not_placed", self.ranks, f"{stat.path}: each rank's statistics mix its own slices with "
                                                   "replicated ones (kv heads on more ranks than heads); they cannot "
                                                   "be combined: dump tensors (task tensor)")
            return None
        by_rank = dict(zip(self.ranks, shards))
        for r in sorted(replica_ranks):
            first = next(owner_of[full] for rr, _, full, _, _ in segments if rr == r)
            if not stats_close(by_rank[r].stats, by_rank[first].stats):
                self._finding("replicas_disagree", (first, r), f"{stat.path}: rank {r}'s copy of a replicated slice "
                                                              f"has other statistics than rank {first}'s")
        stats = combined_stats([by_rank[r] for r in self.ranks if r not in replica_ranks])
        shape = list(stat.shape)
        shape[dim] = max(full + length for _, _, full, length, _ in segments)
        return leaf(stat, stats, tuple(shape), None, segments)

    def _write(self, stat: TensorStat, tensor: Any, segments: list[tuple[int, int, int, int, int]]) -> dict[str, Any]:
        import torch

        tensor = tensor.to(getattr(torch, stat.dtype.removeprefix("torch."), torch.float64))
        name = f"{self.entry.key}.{stat.path}.pt"
        torch.save(tensor.contiguous(), self.tensor_dir / name)
        return leaf(stat, stats_of(tensor), tuple(tensor.shape), name, segments)


def _sum(shards: Sequence[TensorStat]) -> Any:
    total = None
    for s in shards:
        t = load_tensor(s)
        total = t if total is None else total + t
    return total


def require_fit(layout: SideLayout, side: str, assembly: SideAssembly) -> None:
    """Under ``consistency analyze`` a missing rank folder, and a declared layout that fits no rank folder, are user
    errors."""
    if assembly.missing:
        raise UsageError(f"--{side}-dump {assembly.missing[0]}")
    if layout.declared and not assembly.groups and assembly.notes:
        raise UsageError(f"--{side}-layout {layout.text()}: {assembly.notes[0]}")
