"""Find the dumps of each side as MSProbe lays them out, and choose what to compare.

``rl-autotest consistency analyze`` takes dumps made anywhere: a dump root with
``step{N}/rank{R}/dump.json`` (``rank`` set) or ``step{N}/proc{pid}/dump.json`` (no rank; MSProbe
names the folder after the process), MindSpore's ``pynative/step{N}/...``, a single step folder, a
single rank/proc folder, or the harness's own observer layout
(``forward_NNNN/step{N}/proc{pid}``). Every folder holding a ``dump.json`` is one *unit*.

What is compared:

- with both correlation logs, the records are tied to units (their ``dump_subdir``, else
  ``step``+``rank``/``pid``); the records of one unit are merged in order, because MSProbe writes
  every forward of a step and rank into the same ``dump.json`` (call index ``forward.K``), and
  units are paired by request id (:mod:`.pairing`);
- without them, one unit per side is paired by assumption (same unit name — ``rank0`` with
  ``rank0`` — else the first of each) and the report says so; other units are listed, not used.

The step: ``--step N``, else the only step both sides dumped, else the lowest common step (an
assumption). Disjoint steps are a user error: dumps of different steps hold different weights.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from autotest.consistency.correlation import ForwardRecord, read_correlation_log
from autotest.consistency.dumps import find_dump_dirs
from autotest.consistency.pairing import CannotConclude, ForwardPair, pair_forwards
from autotest.consistency.verdict import Step
from autotest.errors import UsageError

LAYOUTS = "step{N}/rank{R}/dump.json or step{N}/proc{pid}/dump.json (an MSProbe dump_path), a step folder or a rank folder"
_STEP = re.compile(r"^step(\d+)$")
_UNIT = re.compile(r"^(rank|proc)(\d+)$")


@dataclass(frozen=True)
class DumpUnit:
    """One folder with a dump.json: the forwards of one step on one rank (or process)."""

    path: Path
    step: int | None
    """From the ``step{N}`` folder above it; None when no such folder is on its path."""
    rank: int | None
    pid: int | None
    key: str
    """Its path below the side root with the step folder and pid dropped (``rank0``, ``proc``,
    ``forward_0001/proc``): units of the two sides with the same key correspond."""


@dataclass(frozen=True)
class DumpSide:
    """Every dump unit found under one side's folder."""

    side: str
    """``train`` or ``rollout`` (as the user names them)."""
    root: Path
    units: tuple[DumpUnit, ...]

    @property
    def steps(self) -> tuple[int, ...]:
        return tuple(sorted({u.step for u in self.units if u.step is not None}))

    def at_step(self, step: int | None) -> tuple[DumpUnit, ...]:
        return tuple(u for u in self.units if step is None or u.step in (step, None))


def scan_side(root: Path, side: str, usage_errors: bool = True) -> DumpSide:
    """Every dump unit under ``root``; with ``usage_errors`` a missing or empty folder raises UsageError."""

    root = Path(root)
    if not root.is_dir():
        if usage_errors:
            raise UsageError(f"{root}: the {side} dump folder does not exist (expected {LAYOUTS})")
        return DumpSide(side, root, ())
    units = tuple(_unit(root, d) for d in find_dump_dirs(root))
    if not units and usage_errors:
        raise UsageError(f"{root}: no MSProbe dump.json under the {side} dump folder (expected {LAYOUTS})")
    return DumpSide(side, root, units)


def _unit(root: Path, folder: Path) -> DumpUnit:
    step = rank = pid = None
    # The step folder may be the root itself or above it (the user passed a step or rank folder).
    for part in reversed(folder.resolve().parts):
        m = _STEP.match(part)
        if m:
            step = int(m.group(1))
            break
    m = _UNIT.match(folder.name)
    if m:
        rank, pid = (int(m.group(2)), None) if m.group(1) == "rank" else (None, int(m.group(2)))
    rel = folder.relative_to(root).parts if folder != root else (folder.name,)
    key = "/".join("proc" if p.startswith("proc") else p for p in rel if not _STEP.match(p) and p != "pynative")
    return DumpUnit(folder, step, rank, pid, key or folder.name)


def choose_step(train: DumpSide, rollout: DumpSide, step: int | None) -> tuple[int | None, list[str]]:
    """The step to compare and the assumptions made choosing it; UsageError when there is none."""

    t_steps, r_steps = train.steps, rollout.steps
    assumptions: list[str] = []
    if step is not None:
        for side in (train, rollout):
            if side.steps and step not in side.steps:
                raise UsageError(
                    f"{side.root}: --step {step}: the {side.side} dump has step(s) {list(side.steps)} only"
                )
        return step, assumptions
    if not t_steps or not r_steps:
        missing = [s.side for s in (train, rollout) if not s.steps]
        assumptions.append(f"no step{{N}} folder on the {' and '.join(missing)} side: its dump is taken as the "
                           "same step as the other side's")
        return (t_steps or r_steps or (None,))[0], assumptions
    common = sorted(set(t_steps) & set(r_steps))
    if not common:
        raise UsageError(
            f"{train.root}: mismatched steps: the train dump has step(s) {list(t_steps)}, the rollout dump "
            f"{rollout.root} has {list(r_steps)}; compare dumps of the same step (or pass --step N present in both)"
        )
    if len(common) > 1:
        assumptions.append(f"steps {common} dumped on both sides: step {common[0]} analysed (pass --step N for another)")
    return common[0], assumptions


def unit_records(records: Sequence[ForwardRecord], side: DumpSide, step: int | None) -> tuple[ForwardRecord, ...]:
    """One record per dump unit: logged folders kept, others found by step and rank/pid, merged in order."""
    merged: dict[str, ForwardRecord] = {}
    for rec in records:
        if step is not None and rec.step != step:
            continue
        subdir = rec.dump_subdir or _find_subdir(side, rec)
        if subdir is None:
            continue
        rec = dataclasses.replace(rec, dump_subdir=subdir)
        first = merged.get(subdir)
        if first is None:
            merged[subdir] = rec
            continue
        merged[subdir] = dataclasses.replace(
            first,
            request_ids=first.request_ids + rec.request_ids,
            token_ids=first.token_ids + rec.token_ids if first.token_ids and rec.token_ids else (),
            token_ranges=first.token_ranges + rec.token_ranges,
        )
    return tuple(merged.values())


def _find_subdir(side: DumpSide, rec: ForwardRecord) -> str | None:
    for unit in side.at_step(rec.step):
        if (rec.rank is not None and unit.rank == rec.rank) or (rec.rank is None and unit.pid == rec.pid):
            return str(unit.path.relative_to(side.root)) if unit.path != side.root else "."
    return None


def assumed_pair(train: DumpSide, rollout: DumpSide, step: int | None) -> tuple[ForwardPair | None, list[str]]:
    """Without correlation logs: one unit per side, and the assumptions that makes."""
    t_units, r_units = train.at_step(step), rollout.at_step(step)
    if not t_units or not r_units:
        return None, []
    by_key = {u.key: u for u in r_units}
    t_unit = next((u for u in t_units if u.key in by_key), t_units[0])
    r_unit = by_key.get(t_unit.key, r_units[0])
    how = "the same name" if t_unit.key == r_unit.key else "the first of each side (no common name)"
    notes = [
        (
            f"no correlation logs: train {_rel(train, t_unit)} and rollout {_rel(rollout, r_unit)} (paired by "
            f"{how}) are assumed to hold the same samples in the same order, with the same weights; pass "
            "--train-correlation and --rollout-correlation to pair by request id"
        )
    ]
    for side, units, used in ((train, t_units, t_unit), (rollout, r_units, r_unit)):
        rest = [_rel(side, u) for u in units if u is not used]
        if rest:
            notes.append(f"{side.side} units not compared (no correlation logs to pair them): {', '.join(rest[:8])}"
                         + (f" and {len(rest) - 8} more" if len(rest) > 8 else ""))
    pair = ForwardPair(
        pair_id=f"step{step if step is not None else '?'}:train-{t_unit.key}~rollout-{r_unit.key}",
        step=step if step is not None else -1,
        request_ids=(),
        weight_version=None,
        rollout=None,
        actor=None,
        rollout_dump=r_unit.path,
        actor_dump=t_unit.path,
    )
    return pair, notes


def _rel(side: DumpSide, unit: DumpUnit) -> str:
    return str(unit.path.relative_to(side.root)) if unit.path != side.root else str(unit.path)


@dataclass(frozen=True)
class Inputs:
    """What the analysis compares, and how that was decided (each step and assumption for the report)."""

    pairs: tuple[ForwardPair, ...]
    issues: tuple[CannotConclude, ...]
    steps: tuple[Step, ...]
    assumptions: tuple[str, ...]
    records: dict[str, tuple[ForwardRecord, ...]]
    """Correlation records per side (``rollout``, ``actor``); empty without logs."""
    step: int | None


def resolve_inputs(
    train_dump: Path,
    rollout_dump: Path,
    train_log: Path | None,
    rollout_log: Path | None,
    step: int | None,
    strict: bool,
    keep: Callable[[str, ForwardRecord], bool] | None = None,
) -> Inputs:
    """Scan both sides, choose the step and pair them. ``strict`` (the CLI): unusable inputs raise a
    one-line UsageError; otherwise (the job, whose collection may not have run) they become
    typed "cannot conclude" reasons in the report. ``keep(label, record)`` false: the record's rank was folded into
    its rank group by :mod:`.reassemble` (its group's first rank stands for it)."""

    if (train_log is None) != (rollout_log is None) and strict:
        given, other = ("--train-correlation", "--rollout-correlation")[:: 1 if train_log else -1]
        raise UsageError(f"{train_log or rollout_log}: {given} given without {other}: pass both logs or neither")
    train, rollout = scan_side(train_dump, "train", strict), scan_side(rollout_dump, "rollout", strict)
    steps: list[Step] = []
    issues: list[CannotConclude] = []
    for side, label in ((rollout, "rollout"), (train, "actor")):
        if side.units:
            steps.append(Step(f"collection: {label} dump", "verified",
                              f"{len(side.units)} dump.json folder(s) under {side.root}"))
        else:
            issues.append(CannotConclude("missing_dump_side", f"no MSProbe dump.json under the {label} dump folder",
                                         (str(side.root),)))
            steps.append(Step(f"collection: {label} dump", "failed", f"no dump.json under {side.root}"))
    window, assumptions = choose_step(train, rollout, step) if train.units and rollout.units else (step, [])

    records: dict[str, tuple[ForwardRecord, ...]] = {"rollout": (), "actor": ()}
    if train_log is None and rollout_log is None:
        steps.append(Step("correlation logs", "not_run", "none given: pairing by assumption"))
        pair, notes = assumed_pair(train, rollout, window)
        assumptions += notes
        steps.append(Step("pairing by assumption", "executed" if pair else "not_run",
                          notes[0] if pair else "a side's dump is missing"))
        return Inputs((pair,) if pair else (), tuple(issues), tuple(steps), tuple(assumptions), records, window)

    for label, log in (("rollout", Path(rollout_log or "")), ("actor", Path(train_log or ""))):
        if strict and not log.is_file():
            raise UsageError(f"{log}: the {'train' if label == 'actor' else label} correlation log does not exist")
        recs = read_correlation_log(log, label) if log.is_file() else ()
        if not recs:
            what = "is empty" if log.is_file() else "does not exist"
            if strict:
                raise UsageError(f"{log}: the {label} correlation log is empty (one JSON line per forward expected)")
            issues.append(CannotConclude("missing_correlation_log", f"the {label} correlation log {what}", (str(log),)))
        records[label] = recs
    logs_ok = all(records.values())
    steps.append(Step("correlation logs", "verified" if logs_ok else "failed",
                      f"{len(records['rollout'])} rollout and {len(records['actor'])} actor forward record(s)"))
    if not (logs_ok and train.units and rollout.units):
        steps.append(Step("pairing by request id", "not_run", "a side's dump or correlation log is missing"))
        return Inputs((), tuple(issues), tuple(steps), tuple(assumptions), records, window)
    kept = {label: tuple(r for r in recs if keep is None or keep(label, r)) for label, recs in records.items()}
    result = pair_forwards(unit_records(kept["rollout"], rollout, window), unit_records(kept["actor"], train, window),
                           rollout.root, train.root)
    pairs, issues = result.pairs, issues + list(result.issues)
    assumptions += result.assumptions
    if strict and not pairs:
        first = result.issues[0].detail if result.issues else f"no record of step {window} names a dump folder"
        raise UsageError(f"{train_log}: no train forward pairs with a rollout forward by request id: {first}")
    detail = (f"{len(pairs)} forward pair(s) over {sum(len(p.request_ids) for p in pairs)} request(s); "
              "checked: same requests in the same batch order, token ids and weight version where logged")
    if result.issues:
        detail += f"; {len(result.issues)} problem(s): " + ", ".join(sorted({i.reason for i in result.issues}))
    steps.append(Step("pairing by request id", "verified" if pairs else "failed", detail))
    return Inputs(tuple(pairs), tuple(issues), tuple(steps), tuple(assumptions), records, window)
