"""Which side of the rollout/trainer line a change lives on, read from two frozen-rollout pairings.

After an A/B fails, each side's trainer is run again on the other side's kept rollout batches
(:mod:`autotest.ab.split`) and paired against the run that made those batches:

- **head's trainer on the base's rollouts** against the base run: the same batches, the trainers apart;
- **base's trainer on the head's rollouts** against the head run: likewise on the head's batches.

Each pairing is judged by the paired gates outside the eval group: eval generates through the run's own rollout
engine, so a rollout-side change moves it under replay too, and it is reported beside the split, not in it.

- both pairings move: **trainer** (the same batches train differently);
- neither moves: **rollout** (the trainers agree on either side's batches, so what differs is what makes the
  batches: sampling, the judge, the data, the weight sync);
- one moves: **unclear** (a change on both sides, or a trainer change that only one side's batches show).

Pure logic: paired verdicts in, a finding out.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from autotest.judge.model import ERROR
from autotest.judge.paired import PairedResult, PairedVerdict

TRAINER, ROLLOUT, UNCLEAR, NOT_JUDGED = "trainer", "rollout", "unclear", "not judged"
EVAL_GROUP = "eval"

_NEXT = {
    TRAINER: "the change is in the trainer (loss, optimiser, log-prob recompute, batching): bisect or read the "
             "trainer's diff first; the rollout need not be dumped",
    ROLLOUT: "the change is in what makes the batches (sampling, judge/reward, data, weight sync): run the "
             "consistency job or read the rollout's diff first",
    UNCLEAR: "the two pairings disagree: the change may be on both sides; judge more seeds, or split the head's "
             "diff and run the A/B on each part",
}


@dataclass(frozen=True)
class Pairing:
    """One frozen-rollout pairing's reading: its verdict split into the gates that decide and eval."""

    name: str
    verdict: PairedVerdict
    moved: tuple[PairedResult, ...]
    eval_moved: tuple[PairedResult, ...]

    @property
    def judged(self) -> bool:
        return self.verdict.status != ERROR


@dataclass(frozen=True)
class SplitFinding:
    side: str
    summary: str
    next_step: str
    pairings: tuple[Pairing, ...]


def read_pairing(name: str, verdict: PairedVerdict, group_of: Callable[[str], str | None]) -> Pairing:
    """``verdict``'s failed gates, eval apart from the rest."""
    failed = verdict.failed
    return Pairing(name, verdict, tuple(r for r in failed if group_of(r.metric) != EVAL_GROUP),
                   tuple(r for r in failed if group_of(r.metric) == EVAL_GROUP))


def split_side(head_trainer: Pairing, base_trainer: Pairing) -> SplitFinding:
    """The finding of the two pairings (head's trainer on the base's batches, base's trainer on the head's)."""
    pairings = (head_trainer, base_trainer)
    unjudged = [p for p in pairings if not p.judged]
    if unjudged:
        reasons = "; ".join(f"{p.name}: {p.verdict.reason or 'a gate could not be decided'}" for p in unjudged)
        return SplitFinding(NOT_JUDGED, f"the split could not be judged ({reasons})",
                            "fix what the reason names, then run the A/B with --split again", pairings)
    moved = [bool(p.moved) for p in pairings]
    if all(moved):
        side = TRAINER
        summary = (f"trainer side: on the same batches the trainers train apart "
                   f"({describe_moved(head_trainer.moved)} on the base's batches; "
                   f"{describe_moved(base_trainer.moved)} on the head's)")
    elif not any(moved):
        side = ROLLOUT
        summary = "rollout side: both trainers train either side's batches alike; the batches themselves differ"
        evals = describe_moved(head_trainer.eval_moved + base_trainer.eval_moved)
        if evals != "-":
            summary += f" (eval, generated through each run's own rollout engine, moved under replay: {evals})"
    else:
        side = UNCLEAR
        which, other = pairings if moved[0] else pairings[::-1]
        summary = (f"unclear: {which.name} moved ({describe_moved(which.moved)}) but {other.name} did not; the change "
                   "may live on both sides")
    return SplitFinding(side, summary, _NEXT[side], pairings)


def describe_moved(results: Sequence[PairedResult]) -> str:
    """``entropy/mean (steps 1-15, 16-30)``: the moved windows, one entry per metric; ``-`` for none."""
    windows: dict[str, dict[str, None]] = {}  # ordered sets: both pairings may name one window
    for r in results:
        windows.setdefault(r.metric, {})[f"{r.window[0]}-{r.window[1]}"] = None
    return ", ".join(f"{metric} (steps {', '.join(spans)})" for metric, spans in windows.items()) or "-"
