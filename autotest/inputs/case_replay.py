"""A case's ``replay:`` section: how its launch keeps the rollout batches it trains on, and how it trains on kept
ones instead of generating (frozen-rollout replay; ``rl-autotest ab --split``, docs/ab.md).

    replay:
      save_args: [--save-rollouts, "{rollouts_dir}"]      # appended to a run that keeps its rollouts
      replay_args: [--replay-rollouts, "{rollouts_dir}"]  # appended to a run that trains on kept ones

Saving must change no number of the run, and a run replaying its own rollouts must train as it did: that is what
lets a replayed run stand beside an ordinary one in a paired judgement.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from autotest.inputs.placeholders import check_template
from autotest.inputs.schema import Section

if TYPE_CHECKING:
    from pathlib import Path

ROLLOUTS_DIR = "rollouts_dir"


@dataclass(frozen=True)
class Replay:
    """The ``replay:`` section of a case."""

    save_args: tuple[str, ...]
    """Appended to a launch that keeps each step's rollout batch in ``{rollouts_dir}``."""
    replay_args: tuple[str, ...]
    """Appended to a launch that trains on the batches kept in ``{rollouts_dir}`` instead of generating."""

    def save(self, folder: Path) -> tuple[str, ...]:
        return _filled(self.save_args, folder)

    def replay(self, folder: Path) -> tuple[str, ...]:
        return _filled(self.replay_args, folder)


def _filled(args: tuple[str, ...], folder: Path) -> tuple[str, ...]:
    return tuple(a.replace("{" + ROLLOUTS_DIR + "}", str(folder)) for a in args)


def parse_replay(sec: Section | None) -> Replay | None:
    """The validated ``replay:`` section (None when the case has none); each mistake one line naming the key."""
    if sec is None:
        return None
    sec.check_keys(required=("save_args", "replay_args"), optional=())
    args = {}
    for key in ("save_args", "replay_args"):
        args[key] = sec.str_list(key)
        for i, arg in enumerate(args[key]):
            check_template(sec, f"{key}[{i}]", arg, (ROLLOUTS_DIR,), shell=False)
        if not any("{" + ROLLOUTS_DIR + "}" in a for a in args[key]):
            sec.fail(key, "does not use {rollouts_dir}",
                     "pass the folder the rollout batches go to and come from, e.g. '{rollouts_dir}'")
    return Replay(save_args=args["save_args"], replay_args=args["replay_args"])
