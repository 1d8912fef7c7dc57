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
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from autotest.consistency.dumps import Dump, ModuleEntry, TensorStat, load_tensor, read_dump
from autotest.consistency.layout import FUSED_PARTS, SideLayout, module_role, split_dim
from autotest.consistency.sources import scan_side
from autotest.errors import UsageError

#: relative tolerance within which two ranks' copies of one tensor count as the same
REPLICA_RTOL = 1e-5
_BLOCK = re.compile(r"(?:^|\.)layers\.(\d+)$")


@dataclass(frozen=True)
class ShardFinding:
    """Something the ranks of one side say about themselves, before the other side is looked at."""

    side: str
    module: str
    ranks: tuple[int, ...]
    kind: str
    """``replicas_disagree``, ``stage_boundary`` or ``not_placed``."""
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
    """The ranks of one model replica: ``stages[s]`` lists stage s's tensor-parallel ranks in tp order."""

    stages: tuple[tuple[int, ...], ...]
    how: str
    """``declared`` or ``inferred``."""

    @property
    def tp(self) -> int:
        return len(self.stages[0])

    @property
    def leader(self) -> int:
        return self.stages[0][0]

    def describe(self) -> str:
        ranks = [r for s in self.stages for r in s]
        return f"tp={self.tp}, pp={len(self.stages)} over ranks {', '.join(map(str, ranks))} ({self.how})"


@dataclass
class SideAssembly:
    """What became of one side's rank folders."""

    side: str
    root: Path
    """The folder the analysis reads: the side's own root, or the reassembled one."""
    groups: list[Group] = field(default_factory=list)
    findings: list[ShardFinding] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def reassembled(self) -> bool:
        return bool(self.groups)

    def to_dict(self) -> dict[str, Any]:
        return {"side": self.side, "root": str(self.root), "groups": [g.describe() for g in self.groups],
                "findings": [f.to_dict() for f in self.findings], "notes": list(self.notes)}


def assemble_side(root: Path, side: str, layout: SideLayout, out_dir: Path, other_root: Path | None = None,
                  step: int | None = None) -> SideAssembly:
    """Reassemble every rank group under ``root`` into ``out_dir/reassembled/<side>``; an unsharded side (one unit,
    or data-parallel ranks) comes back as it is. ``other_root`` (the other side's dumps) supplies head counts a fused
    qkv split needs when the layout does not declare them."""
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
        _write_group(folder, dumps, group, side, layout, facts, assembly)
        assembly.groups.append(group)
    assembly.root = target
    assembly.findings.sort(key=lambda f: f.order)
    return assembly


def plan_groups(dumps: Mapping[int, Dump], layout: SideLayout) -> tuple[list[Group], str]:
    """The model replicas among these ranks, and a note when the ranks cannot be placed (no groups then)."""
    ranks = sorted(dumps)
    if layout.declared:
        tp, pp = layout.tp or 1, layout.pp or 1
        if len(ranks) % (tp * pp):
            return [], (f"layout {layout.text()} does not fit {len(ranks)} rank folders ({', '.join(map(str, ranks))}):"
                        f" tp x pp must divide the rank count; not reassembled")
        if tp * pp == 1:
            return [], ""
        dp = len(ranks) // (tp * pp)
        # Megatron's order: tensor-parallel fastest, then data-parallel, then pipeline stage
        return [Group(tuple(tuple(ranks[s * tp * dp + d * tp + t] for t in range(tp)) for s in range(pp)),
                      "declared") for d in range(dp)], ""
    stage_of: dict[frozenset[str], list[int]] = {}
    for r in ranks:
        stage_of.setdefault(frozenset(e.path for e in dumps[r].entries.values()), []).append(r)
    stages = sorted(stage_of.values(), key=lambda rs: (_first_layer(dumps[rs[0]]), rs[0]))
    width = len(stages[0])
    if any(len(s) != width for s in stages):
        sizes = ", ".join(str(len(s)) for s in stages)
        return [], (f"{len(stages)} module sets over {len(ranks)} ranks with {sizes} ranks each: the layout cannot be "
                    "inferred; declare it (--train-layout / --rollout-layout tp=N,pp=N)")
    sharded = width > 1 and _parameters_differ(dumps[stages[0][0]], dumps[stages[0][1]])
    if len(stages) == 1 and not sharded:
        return [], ""  # data-parallel replicas: each rank is a unit of its own
    tp = width if sharded else 1
    return [Group(tuple(tuple(s[d * tp:(d + 1) * tp]) for s in stages), "inferred") for d in range(width // tp)], ""


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
            if t is not None and (t.shape != mine.shape or not _stats_close(t.stats, mine.stats)):
                return True
    return False


def _stats_close(a: Mapping[str, float | None], b: Mapping[str, float | None]) -> bool:
    for k in ("Max", "Min", "Mean", "Norm"):
        x, y = a.get(k), b.get(k)
        if (x is None) != (y is None):
            return False
        if x is not None and y is not None and not math.isclose(x, y, rel_tol=REPLICA_RTOL, abs_tol=1e-12):
            return False
    return True


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
                 facts: _Heads, assembly: SideAssembly) -> None:
    tensor_dir = folder / "dump_tensor_data"
    tensor_dir.mkdir(parents=True, exist_ok=True)
    data: dict[str, Any] = {}
    construct: dict[str, Any] = {}
    seen: set[str] = set()
    first = dumps[group.leader]
    for stage in group.stages:
        lead = dumps[stage[0]]
        for key, entry in lead.entries.items():
            if key in seen:
                continue  # a module every stage runs (the rotary embedding): the first stage's copy
            seen.add(key)
            per_rank = [dumps[r].entries.get(key) for r in stage]
            if any(e is None for e in per_rank):
                missing = [r for r, e in zip(stage, per_rank) if e is None]
                assembly.findings.append(ShardFinding(side, entry.path, tuple(missing), "not_placed",
                                                      f"{key} is not in these ranks' dumps; taken from rank "
                                                      f"{stage[0]} alone", len(seen)))
                per_rank = [entry]
            joiner = _Joiner(side, entry, tuple(stage[:len(per_rank)]), layout, facts, tensor_dir, assembly,
                             order=len(seen))
            data[key] = joiner.body(per_rank)
            if entry.parent:
                construct[key] = entry.parent
    if len(group.stages) > 1:
        _check_boundaries(dumps, group, side, assembly)
    doc = {"task": first.task, "level": first.level, "data": data}
    (folder / "dump.json").write_text(json.dumps(doc), encoding="utf-8")
    (folder / "construct.json").write_text(json.dumps(construct), encoding="utf-8")


class _Joiner:
    """Joins one module call's tensors over the tensor-parallel ranks of a stage."""

    def __init__(self, side: str, entry: ModuleEntry, ranks: tuple[int, ...], layout: SideLayout, facts: _Heads,
                 tensor_dir: Path, assembly: SideAssembly, order: int) -> None:
        self.side, self.entry, self.ranks, self.layout = side, entry, ranks, layout
        self.facts, self.tensor_dir, self.assembly, self.order = facts, tensor_dir, assembly, order
        self.role = module_role(entry.path, entry.cls)

    def body(self, per_rank: Sequence[ModuleEntry]) -> dict[str, Any]:
        body: dict[str, Any] = {}
        for stat in per_rank[0].tensors:
            shards = [next((t for t in e.tensors if t.path == stat.path), None) for e in per_rank]
            if any(s is None for s in shards):
                self._finding("not_placed", self.ranks, f"{stat.path} is missing on some ranks; left out")
                continue
            leaf = self._join(stat, shards)  # type: ignore[arg-type]
            if leaf is not None:
                _put(body, stat.path, leaf)
        return body

    def _finding(self, kind: str, ranks: Sequence[int], detail: str) -> None:
        self.assembly.findings.append(ShardFinding(self.side, self.entry.path, tuple(ranks), kind, detail, self.order))

    def _join(self, stat: TensorStat, shards: Sequence[TensorStat]) -> dict[str, Any] | None:
        tp = len(shards)
        dim = split_dim(self.role, stat.component, stat.path, len(stat.shape)) if tp > 1 else None
        tensors = all(s.data_file is not None for s in shards)
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
            return self._stats_leaf(stat, shards, dim, segments)
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
                off = [r for r, p in zip(self.ranks[1:], pieces[1:]) if not _close(p, pieces[0])]
                if off:
                    rel = max(_rel(p, pieces[0]) for p in pieces[1:])
                    self._finding("replicas_disagree", (self.ranks[0], *off),
                                  f"{stat.path} should be the same on every rank ({self._why_whole(stat)}) but ranks "
                                  f"{', '.join(map(str, off))} differ from rank {self.ranks[0]} (relative {rel:.2g})")
            else:
                off = [r for r, s in zip(self.ranks[1:], shards[1:]) if not _stats_close(s.stats, shards[0].stats)]
                if off:
                    self._finding("replicas_disagree", (self.ranks[0], *off),
                                  f"{stat.path} statistics differ between ranks that should hold the same tensor "
                                  f"({self._why_whole(stat)})")
        if stat.data_file is None:
            return _leaf(stat, stat.stats, stat.shape, None, [])
        return self._write(stat, load_tensor(stat), [])

    def _why_whole(self, stat: TensorStat) -> str:
        if self.role == "row" and stat.component == "output":
            return "a row-parallel output, all-reduced; declare partial=GLOB if this engine dumps it before the reduce"
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
            if not _close(piece, pieces[self.ranks.index(first)].narrow(d, first_local, length)):
                self._finding("replicas_disagree", (first, r),
                              f"{stat.path}: rank {r}'s copy of the slice [{full}, {full + length}) along dim {d} "
                              f"differs from rank {first}'s (replicated kv heads must be equal)")
        return used

    def _stats_leaf(self, stat: TensorStat, shards: Sequence[TensorStat], dim: int,
                    segments: list[tuple[int, int, int, int, int]]) -> dict[str, Any] | None:
        firsts = {}
        for r, _, full, length, _ in segments:
            firsts.setdefault(full, r)
        owners = set(firsts.values())
        if len(owners) < len(self.ranks):
            self._finding("not_placed", self.ranks, f"{stat.path}: statistics of replicated kv slices cannot be "
                                                   "combined; dump tensors (task tensor)")
            return None
        used = list(shards)
        numel = [s.numel for s in used]
        total = sum(numel) or 1
        stats: dict[str, float | None] = {
            "Max": _combine(max, [s.stats.get("Max") for s in used]),
            "Min": _combine(min, [s.stats.get("Min") for s in used]),
            "Mean": None if any(s.stats.get("Mean") is None for s in used) else
            sum(s.stats["Mean"] * n for s, n in zip(used, numel)) / total,  # type: ignore[operator]
            "Norm": None if any(s.stats.get("Norm") is None for s in used) else
            math.sqrt(sum(s.stats["Norm"] ** 2 for s in used)),  # type: ignore[operator]
        }
        shape = list(stat.shape)
        shape[dim] = max(full + length for _, _, full, length, _ in segments)
        return _leaf(stat, stats, tuple(shape), None, segments)

    def _write(self, stat: TensorStat, tensor: Any, segments: list[tuple[int, int, int, int, int]]) -> dict[str, Any]:
        import torch

        tensor = tensor.to(getattr(torch, stat.dtype.removeprefix("torch."), torch.float64))
        name = f"{self.entry.key}.{stat.path}.pt"
        torch.save(tensor.contiguous(), self.tensor_dir / name)
        return _leaf(stat, _stats_of(tensor), tuple(tensor.shape), name, segments)


def _leaf(stat: TensorStat, stats: Mapping[str, float | None], shape: tuple[int, ...], data_name: str | None,
          segments: list[tuple[int, int, int, int, int]]) -> dict[str, Any]:
    leaf: dict[str, Any] = {"type": "torch.Tensor", "dtype": stat.dtype, "shape": list(shape), **stats}
    if data_name:
        leaf["data_name"] = data_name
    if segments:
        leaf["shards"] = [list(s) for s in segments]
    return leaf


def _stats_of(tensor: Any) -> dict[str, float | None]:
    if tensor.numel() == 0:
        return {"Max": None, "Min": None, "Mean": None, "Norm": None}
    floating = tensor.is_floating_point()
    t = tensor.double() if floating else tensor
    return {"Max": float(t.max()), "Min": float(t.min()), "Mean": float(t.mean()) if floating else None,
            "Norm": float(t.norm()) if floating else None}


def _combine(fn: Any, values: Sequence[float | None]) -> float | None:
    return None if any(v is None for v in values) else fn(values)


def _sum(shards: Sequence[TensorStat]) -> Any:
    total = None
    for s in shards:
        t = load_tensor(s)
        total = t if total is None else total + t
    return total


def _close(a: Any, b: Any) -> bool:
    return a.shape == b.shape and _rel(a, b) <= REPLICA_RTOL


def _rel(a: Any, b: Any) -> float:
    if a.shape != b.shape:
        return math.inf
    scale = float(b.abs().max()) if b.numel() else 0.0
    return float((a - b).abs().max()) / max(scale, 1e-30) if a.numel() else 0.0


def _put(body: dict[str, Any], path: str, leaf: dict[str, Any]) -> None:
    """Place ``leaf`` at dotted ``path`` (``output.0``, ``parameters.weight``) in MSProbe's nested layout."""
    parts = path.split(".")
    node: Any = body
    for i, part in enumerate(parts):
        last = i == len(parts) - 1
        nxt_is_index = not last and parts[i + 1].isdigit()
        if isinstance(node, list):
            index = int(part)
            while len(node) <= index:
                node.append(None)
            if last:
                node[index] = leaf
            else:
                if node[index] is None:
                    node[index] = [] if nxt_is_index else {}
                node = node[index]
        else:
            if last:
                node[part] = leaf
            else:
                node = node.setdefault(part, [] if nxt_is_index else {})


def _check_boundaries(dumps: Mapping[int, Dump], group: Group, side: str, assembly: SideAssembly) -> None:
    """A pipeline stage's first block must take in what the previous stage's last block put out, call by call."""
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
                rel = _rel(load_tensor(got[0]), load_tensor(sent[0]))
                same, how = rel <= REPLICA_RTOL, f"relative {rel:.2g}"
            else:
                same, how = _stats_close(got[0].stats, sent[0].stats), "their statistics differ"
            if same:
                continue
            order = next((i for i, k in enumerate(dumps[after[0]].entries) if k == in_entry.key), 0)
            assembly.findings.append(ShardFinding(
                side, in_entry.path, tuple(after), "stage_boundary",
                f"pipeline hand-off from stage rank {before[0]} to rank {after[0]}: {in_entry.path}'s input is not "
                f"{out_entry.path}'s output (call {call}, {how}); the stage boundary changes the hidden state (a "
                "dropped residual, a wrong tensor sent)", order))
            break


def _edge_blocks(dump: Dump, last: bool) -> dict[int, ModuleEntry]:
    """The stage's last (or first) decoder block, per call index."""
    layers = {int(m.group(1)) for e in dump.entries.values() if (m := _BLOCK.search(e.path))}
    if not layers:
        return {}
    edge = max(layers) if last else min(layers)
    return {e.call_index: e for e in dump.entries.values()
            if (m := _BLOCK.search(e.path)) and int(m.group(1)) == edge}


def require_fit(layout: SideLayout, side: str, assembly: SideAssembly) -> None:
    """Under ``consistency analyze`` a declared layout that fits no rank folder is a user error."""
    if layout.declared and not assembly.groups and assembly.notes:
        raise UsageError(f"--{side}-layout {layout.text()}: {assembly.notes[0]}")
