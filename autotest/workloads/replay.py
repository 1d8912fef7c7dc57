"""Frozen-rollout replay of the tiny GRPO workload: train on the rollout batches another run saved.

``--save-rollouts DIR`` writes each step's batch as the trainer consumes it (prompt and response ids, the response
mask, the rollout's recorded log-probs, the graded rewards, the request ids and weight version) to
``DIR/step-NNNN.pt``, and ``DIR/rollouts.json`` (the shape of the run that saved them); saving draws nothing and
changes no number of the run. ``--replay-rollouts DIR`` skips generation and grading: each step trains on the saved
batch, so the rollout-side metrics (``response/rewards/*``, ``response/response_len/*``) are the saved run's and
every trainer metric is this run's. The weight sync and eval still run on this run's weights. A trainer-side fault
acts under replay; a rollout-side one (sampling, judge) then changes nothing the trainer sees: the split says on
which side a regression lives.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from autotest.errors import UsageError

if TYPE_CHECKING:
    import torch

    from autotest.workloads.rollout import RolloutBatch

MANIFEST = "rollouts.json"
FORMAT_VERSION = 1
#: the run config keys a replay must share with the run that saved the batches (the batch's shape and grading)
SHAPE_KEYS = ("task", "prompts_per_step", "samples_per_prompt", "max_new_tokens")
TENSORS = ("prompt_ids", "response_ids", "response_mask", "rollout_logprobs", "rewards")


@dataclass(frozen=True)
class RolloutPlan:
    """What the command line asks of rollout batches: save them, or replay saved ones."""

    save_dir: Path | None = None
    replay_dir: Path | None = None


def step_file(folder: Path, step: int) -> Path:
    """The saved batch of ``step``."""
    return folder / f"step-{step:04d}.pt"


class RolloutSaver:
    """Writes each step's batch (one ``torch.save`` per step, written to a temp name and renamed)."""

    def __init__(self, folder: Path, config: Mapping[str, Any]) -> None:
        try:
            folder.mkdir(parents=True, exist_ok=True)
            manifest = {"format": FORMAT_VERSION, **{k: config[k] for k in SHAPE_KEYS}, "seed": config["seed"],
                        "fault": config["fault"]}
            (folder / MANIFEST).write_text(json.dumps(manifest, indent=1) + "\n", encoding="utf-8")
        except OSError as exc:
            raise UsageError(f"--save-rollouts {folder}: cannot write there ({exc.strerror})") from None
        self.folder = folder

    def save(self, step: int, batch: RolloutBatch, rewards: torch.Tensor) -> None:
        import torch

        record = {name: getattr(batch, name) for name in TENSORS[:-1]}
        record.update(rewards=rewards, targets=[p.target for p in batch.prompts],
                      data_sources=[p.data_source for p in batch.prompts], request_ids=list(batch.request_ids),
                      weight_version=int(batch.weight_version), kv_path=batch.kv_path)
        target = step_file(self.folder, step)
        torch.save(record, target.with_suffix(".tmp"))
        os.replace(target.with_suffix(".tmp"), target)


def load_replay(folder: Path, config: Mapping[str, Any], first: int, last: int
                ) -> dict[int, tuple[RolloutBatch, torch.Tensor]]:
    """Every batch steps ``first..last`` train on, read and checked up front; a missing, short, corrupt or
    mismatched folder raises a one-line ``UsageError``."""
    flag = f"--replay-rollouts {folder}"
    if not folder.is_dir():
        raise UsageError(f"{flag}: no such folder; give a folder written by --save-rollouts")
    try:
        manifest = json.loads((folder / MANIFEST).read_text(encoding="utf-8"))
    except OSError:
        raise UsageError(f"{flag}: no readable {MANIFEST}; not a --save-rollouts folder") from None
    except json.JSONDecodeError as exc:
        raise UsageError(f"{flag}/{MANIFEST}: line {exc.lineno}: not valid JSON ({exc.msg})") from None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT_VERSION:
        raise UsageError(f"{flag}/{MANIFEST}: not a format-{FORMAT_VERSION} rollout manifest; re-save the rollouts")
    for key in SHAPE_KEYS:
        if manifest.get(key) != config[key]:
            raise UsageError(f"{flag}: saved with {key} {manifest.get(key)!r}, this run has {config[key]!r}; "
                             "replay with the saving run's shape")
    missing = [step for step in range(first, last + 1) if not step_file(folder, step).is_file()]
    if missing:
        raise UsageError(f"{flag}: no saved batch for step {missing[0]} ({len(missing)} of steps {first}..{last} "
                         "missing); save a run at least as long as this one")
    return {step: _read(step_file(folder, step), config) for step in range(first, last + 1)}


def _read(path: Path, config: Mapping[str, Any]) -> tuple[RolloutBatch, torch.Tensor]:
    import torch

    from autotest.workloads.rollout import RolloutBatch
    from autotest.workloads.tasks import Prompt

    try:
        record = torch.load(path, weights_only=True)
    except Exception as exc:  # torch.load raises many kinds on a truncated or foreign file
        raise UsageError(f"{path}: not a readable rollout batch ({type(exc).__name__}); re-save the rollouts") from None
    size = config["prompts_per_step"] * config["samples_per_prompt"]
    fields = (*TENSORS, "targets", "data_sources", "request_ids", "weight_version", "kv_path")
    if not isinstance(record, dict) or any(k not in record for k in fields) or any(
            not isinstance(record[k], torch.Tensor) or record[k].shape[0] != size for k in TENSORS) or any(
            not isinstance(record[k], list) or len(record[k]) != size for k in fields[5:8]):
        raise UsageError(f"{path}: not a rollout batch of {size} samples; re-save the rollouts")
    prompts = [Prompt(data_source=s, target=int(t), token_ids=tuple(ids))
               for s, t, ids in zip(record["data_sources"], record["targets"], record["prompt_ids"].tolist(),
                                    strict=True)]
    kv = record["kv_path"]
    batch = RolloutBatch(prompts=prompts, prompt_ids=record["prompt_ids"], response_ids=record["response_ids"],
                         response_mask=record["response_mask"], rollout_logprobs=record["rollout_logprobs"],
                         request_ids=list(record["request_ids"]), weight_version=int(record["weight_version"]),
                         kv_path=tuple(kv) if kv is not None else None)
    return batch, record["rewards"]
