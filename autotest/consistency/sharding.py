"""Both sides' rank folders through :mod:`.reassemble`, and what the report says about them.

The analysis (:func:`autotest.consistency.analyze.analyze_dumps`) calls :func:`assemble_both` before pairing: the
paired folders are then whole-model dumps, and the correlation records of ranks folded into a group (every
tensor-parallel peer and later pipeline stage) are set aside, after checking they logged the requests their
group's first rank did. :func:`with_sharding` adds the ``sharding`` section to the report: each side's layout and
groups, the ranks' findings, what could not be placed, and the ranks the root cause is blamed on.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from autotest.consistency.correlation import ForwardRecord
from autotest.consistency.layout import SideLayout
from autotest.consistency.rank_groups import LEFT_OUT, ShardFinding
from autotest.consistency.reassemble import SideAssembly, assemble_side, require_fit
from autotest.consistency.shard_blame import blame, findings_at
from autotest.consistency.verdict import RootCauseReport


@dataclass(frozen=True)
class Sharding:
    train: SideAssembly
    rollout: SideAssembly
    layouts: Mapping[str, SideLayout]

    @property
    def sides(self) -> tuple[SideAssembly, SideAssembly]:
        return self.rollout, self.train

    @property
    def any(self) -> bool:
        return self.train.reassembled or self.rollout.reassembled or bool(self.train.notes or self.rollout.notes)

    def folded_ranks(self, side: str) -> frozenset[int]:
        """Ranks whose records the group's first rank stands for (side ``train`` or ``rollout``)."""
        assembly = self.train if side == "train" else self.rollout
        return frozenset(r for g in assembly.groups for s in g.stages for r in s if r != g.leader)


def assemble_both(train_dump: Path, rollout_dump: Path, out_dir: Path, layouts: Mapping[str, SideLayout],
                  step: int | None, strict: bool, use_tensors: bool = True) -> Sharding:
    train = assemble_side(train_dump, "train", layouts.get("train", SideLayout()), out_dir, rollout_dump, step,
                          use_tensors)
    rollout = assemble_side(rollout_dump, "rollout", layouts.get("rollout", SideLayout()), out_dir, train_dump, step,
                            use_tensors)
    if strict:
        require_fit(layouts.get("train", SideLayout()), "train", train)
        require_fit(layouts.get("rollout", SideLayout()), "rollout", rollout)
    return Sharding(train, rollout, dict(layouts))


def peer_requests(sharding: Sharding, records: Mapping[str, Sequence[ForwardRecord]]) -> list[ShardFinding]:
    """Ranks of one group must have logged the same requests at a step: a peer that served others is named."""
    found = []
    for assembly, label in ((sharding.rollout, "rollout"), (sharding.train, "actor")):
        by_rank: dict[tuple[int, int], list[str]] = {}
        for rec in records.get(label, ()):
            if rec.rank is not None:
                by_rank.setdefault((rec.step, rec.rank), []).extend(rec.request_ids)
        for group in assembly.groups:
            for (step, rank), ids in sorted(by_rank.items()):
                if rank != group.leader:
                    continue
                for peer in group.stages[0][1:]:
                    theirs = by_rank.get((step, peer))
                    if theirs is not None and theirs != ids:
                        found.append(ShardFinding(assembly.side, "(requests)", (group.leader, peer), "requests_differ",
                                                  f"step {step}: rank {peer} logged requests {theirs[:4]} where its "
                                                  f"tensor-parallel group's rank {group.leader} logged {ids[:4]}"))
    return found


def keep_record(sharding: Sharding, label: str, rec: ForwardRecord) -> bool:
    """False for a record of a rank folded into its group (``label``: ``rollout`` or ``actor``)."""
    side = "train" if label == "actor" else "rollout"
    return rec.rank is None or rec.rank not in sharding.folded_ranks(side)


def with_sharding(report: RootCauseReport, sharding: Sharding, rollout_dump: Path | None,
                  actor_dump: Path | None, extra: Sequence[ShardFinding] = ()) -> RootCauseReport:
    if not sharding.any:
        return report
    section: dict[str, Any] = {
        side.side: {"layout": sharding.layouts.get(side.side, SideLayout()).text(), **side.to_dict()}
        for side in sharding.sides
    }
    for finding in extra:
        section[finding.side]["findings"].append(finding.to_dict())
    root_cause = dict(report.root_cause) if report.root_cause else None
    limitations = list(report.limitations)
    not_placed = [f.line() for side in sharding.sides for f in side.findings if f.kind in LEFT_OUT]
    limitations += [f"not placed: {line}" for line in not_placed] + [n for side in sharding.sides for n in side.notes]
    if root_cause and rollout_dump is not None and actor_dump is not None and "module" in root_cause:
        blamed = blame(root_cause, rollout_dump, actor_dump, sharding.sides)
        own = findings_at(root_cause, sharding.sides)
        if blamed or own:
            root_cause["ranks"] = sorted({r for b in blamed for r in b["ranks"]} | {r for f in own for r in f.ranks})
            root_cause["rank_evidence"] = [
                f"{b['side']} {b['module']} {b['tensor']}: rank(s) {', '.join(map(str, b['ranks']))} diverge "
                f"(relative error per rank {b['relative_error']})" for b in blamed] + [f.line() for f in own]
        section["blame"] = blamed
    return dataclasses.replace(report, root_cause=root_cause, limitations=tuple(limitations), sharding=section)
