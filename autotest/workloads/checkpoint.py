"""Checkpoint and resume of the tiny GRPO workload: everything a resumed run needs to continue bitwise.

``--save-checkpoint-at K --checkpoint-dir DIR`` writes ``DIR/checkpoint.pt`` after step K (its rows are logged
first; nothing the run computes reads or draws anything for it, so the run's metrics are bitwise those of a run
without the flags). ``--resume-from DIR [--stop-at-step N]`` loads it, continues at step K+1 and logs only the
steps it trains, to a fresh exp dir. A checkpoint holds:

| part | what |
|---|---|
| ``step`` | the step counter (the last step trained) |
| ``config`` | the run's config (a resume under another config is a usage error; the fault and ``--ray`` may differ) |
| ``trainer`` | weights, Adam state, the LR schedule's position, the mini-batch-order RNG |
| ``rollout`` | the engine's model copy as synced (a sync fault's effect included), its weights version, its sampling RNG |
| ``driver`` | the prompt-order RNG |

Eval draws from a generator of its own seeded by (seed, step), so it needs no state. Which parts a resumed process
restores is a fault hook (``FaultHooks.restored_parts``): the resume faults leave one out.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from autotest.errors import UsageError

FILE_NAME = "checkpoint.pt"
FORMAT_VERSION = 1
#: config keys a resumed run may set differently: the injected fault (a resume fault acts in the resumed process
#: only) and where the components run (a Ray run is bitwise a local one)
FREE_KEYS = frozenset({"fault", "ray"})


@dataclass(frozen=True)
class CheckpointPlan:
    """What the command line asks of checkpoints: save one, resume from one, stop early."""

    save_at: int = 0
    """Save a checkpoint after this step (0: none)."""
    save_dir: Path | None = None
    """Where ``--save-checkpoint-at`` writes ``checkpoint.pt``."""
    resume_from: Path | None = None
    """The checkpoint folder to resume from (None: start at step 1)."""
    stop_at: int = 0
    """The last step to train (0: the configured last step); the LR schedule still spans every step."""


def check_plan(plan: CheckpointPlan, steps: int, diagnostic: bool) -> CheckpointPlan:
    """``plan`` when its flags fit a run of ``steps`` steps, else a one-line ``UsageError``."""
    if plan.save_at and plan.save_dir is None:
        raise UsageError("--save-checkpoint-at: needs --checkpoint-dir DIR")
    if plan.save_dir is not None and not plan.save_at:
        raise UsageError("--checkpoint-dir: needs --save-checkpoint-at K")
    if plan.save_at and not 1 <= plan.save_at <= steps:
        raise UsageError(f"--save-checkpoint-at: {plan.save_at} is not a step of this run (1..{steps})")
    if plan.stop_at and not 1 <= plan.stop_at <= steps:
        raise UsageError(f"--stop-at-step: {plan.stop_at} is not a step of this run (1..{steps})")
    if plan.save_at and plan.stop_at and plan.save_at > plan.stop_at:
        raise UsageError(f"--save-checkpoint-at: {plan.save_at} is after --stop-at-step {plan.stop_at}")
    if diagnostic and (plan.resume_from is not None or plan.save_at):
        raise UsageError("--diagnostic-config: cannot be combined with checkpoint save or resume")
    return plan


def save_checkpoint(folder: Path, step: int, config: Mapping[str, Any], components: Mapping[str, Any],
                    driver: Mapping[str, Any]) -> Path:
    """Write ``folder/checkpoint.pt`` whole or not at all (a temporary file, then a rename)."""
    import torch

    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"--checkpoint-dir {folder}: cannot create it ({exc.strerror})") from None
    path = folder / FILE_NAME
    partial = folder / f".{FILE_NAME}.partial"
    torch.save({"format": FORMAT_VERSION, "step": step, "config": dict(config), **components,
                "driver": dict(driver)}, partial)
    os.replace(partial, path)
    return path


def load_checkpoint(folder: Path, config: Mapping[str, Any], steps: int) -> dict[str, Any]:
    """The checkpoint in ``folder``, checked against the resumed run's ``config``; a one-line ``UsageError``
    when it is missing, unreadable, of another format or config, or already at the last step."""
    import pickle

    import torch

    path = folder / FILE_NAME
    if not path.is_file():
        raise UsageError(f"--resume-from {folder}: no {FILE_NAME} there (save one with --save-checkpoint-at K "
                         "--checkpoint-dir DIR)")
    try:
        state = torch.load(path, weights_only=True)
    except (OSError, RuntimeError, EOFError, pickle.UnpicklingError) as exc:
        raise UsageError(f"--resume-from {folder}: cannot read {FILE_NAME} ({type(exc).__name__})") from None
    if not isinstance(state, dict) or state.get("format") != FORMAT_VERSION:
        raise UsageError(f"--resume-from {folder}: {FILE_NAME} is not a tiny-grpo checkpoint of format "
                         f"{FORMAT_VERSION}")
    saved = state["config"]
    changed = sorted(k for k in set(saved) | set(config) if k not in FREE_KEYS and saved.get(k) != config.get(k))
    if changed:
        key = changed[0]
        raise UsageError(f"--resume-from {folder}: the checkpoint was made with {key}={saved.get(key)!r}, this run "
                         f"has {config.get(key)!r}; resume with the config that saved it")
    if state["step"] >= steps:
        raise UsageError(f"--resume-from {folder}: the checkpoint is at step {state['step']}, the last step; "
                         "nothing left to train")
    return state
