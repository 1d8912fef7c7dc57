"""``rl-autotest ab --split``: after a failed A/B, each side's trainer on the other side's rollout batches.

The A/B's own runs kept their batches (the case's ``replay.save_args``) in ``rollouts/<side>-seed<S>/``; per seed
the split runs, each an ordinary run with its own results folder:

    head-on-base-rollouts-seed<S>/   the head (its trainer, its fault or ref) replaying the base's batches
    base-on-head-rollouts-seed<S>/   the base replaying the head's batches

and pairs them against the run whose batches they replayed; :mod:`autotest.judge.replay_split` reads the two
pairings.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from autotest.ab.sides import Side
from autotest.inputs.baseline_model import Baseline
from autotest.inputs.case import Case
from autotest.inputs.case_variants import with_launch_args
from autotest.judge.model import ERROR
from autotest.judge.paired import judge_paired
from autotest.judge.replay_split import SplitFinding, read_pairing, split_side
from autotest.judge.trace import Trace

ROLLOUTS_FOLDER = "rollouts"


@dataclass(frozen=True)
class SplitRun:
    """One replay run: whose trainer, whose batches, the seed, and its results folder."""

    trainer: str
    batches: str
    seed: int
    status: str
    results_dir: Path | None
    reason: str = ""

    @property
    def name(self) -> str:
        return f"{self.trainer}-on-{self.batches}-rollouts-seed{self.seed}"


@dataclass(frozen=True)
class SplitOutcome:
    finding: SplitFinding
    runs: tuple[SplitRun, ...]


def rollouts_dir(folder: Path, side: Side, seed: int) -> Path:
    """Where the A/B run of ``side`` on ``seed`` keeps its rollout batches."""
    return folder / ROLLOUTS_FOLDER / f"{side.label}-seed{seed}"


def saving(case: Case, side: Side, seed: int, folder: Path) -> Case:
    """``side``'s case for the A/B run that keeps its batches for the split."""
    assert case.replay is not None
    return with_launch_args(side.case_for(case), case.replay.save(rollouts_dir(folder, side, seed)))


def run_split(case: Case, base: Side, head: Side, baseline: Baseline, seeds: tuple[int, ...],
              traces: dict[tuple[str, int], Trace], folder: Path,
              run_one: Callable[[Case, Side, int, Path], tuple[str, Path | None, str, Trace | None]],
              say: Callable[[str], None]) -> SplitOutcome:
    """Run both replays per seed (``run_one(case, side, seed, results_dir)`` runs one and returns its golden
    status, results folder, why it could not be paired and its trace) and read the two pairings."""
    assert case.replay is not None
    runs: list[SplitRun] = []
    replayed: dict[tuple[str, int], Trace] = {}
    for seed in seeds:
        for trainer, batches in ((head, base), (base, head)):
            kept = rollouts_dir(folder, batches, seed)
            run = SplitRun(trainer.label, batches.label, seed, "", None)
            replay_case = with_launch_args(trainer.case_for(case), case.replay.replay(kept))
            status, results_dir, reason, trace = run_one(replay_case, trainer, seed, folder / run.name)
            runs.append(SplitRun(trainer.label, batches.label, seed, status, results_dir, reason))
            if trace is not None and not reason:
                replayed[(trainer.label, seed)] = trace
            say(f"{case.name}: split: {trainer.label}'s trainer on the {batches.label}'s batches, seed {seed}: "
                f"{status} against the golden ({results_dir})")
    roles = baseline.role_map

    def pairing(name: str, batches: Side, trainer: Side):
        pairs = [(s, traces[(batches.label, s)], replayed[(trainer.label, s)]) for s in seeds
                 if (batches.label, s) in traces and (trainer.label, s) in replayed]
        verdict = judge_paired(baseline.paired, pairs, "measure it with `rl-autotest calibrate CASE --paired`")
        broken = [f"{r.name}: {r.reason or 'no readable metric log'}" for r in runs
                  if r.trainer == trainer.label and (r.reason or (r.trainer, r.seed) not in replayed)]
        if broken:  # never judged on fewer seeds than the A/B
            verdict = replace(verdict, status=ERROR, reason="; ".join(broken))
        return read_pairing(name, verdict, roles.group_of)

    finding = split_side(pairing(f"{head.label}'s trainer on the {base.label}'s batches", base, head),
                         pairing(f"{base.label}'s trainer on the {head.label}'s batches", head, base))
    return SplitOutcome(finding, tuple(runs))
