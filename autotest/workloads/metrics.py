"""Metric formulas of the GRPO workload: train/inference mismatch and batch statistics.

The mismatch family follows xtuner (adapted from verl), over response tokens, with
``d = logp_train - logp_rollout`` (train = the trainer's fp32 recompute before the update,
rollout = what the inference engine returned for the sampled token):

| key                                 | formula                                              |
|-------------------------------------|------------------------------------------------------|
| ``mismatch/mismatch_k3_kl``         | token mean of ``exp(d) - d - 1``                     |
| ``mismatch/mismatch_kl``            | token mean of ``logp_rollout - logp_train``          |
| ``mismatch/mismatch_logprob_abs_diff`` | token mean of ``abs(d)``                          |
| ``mismatch/mismatch_training_ppl``  | sequence mean of ``exp(-seq_mean(logp_train))``      |
| ``mismatch/mismatch_rollout_ppl``   | sequence mean of ``exp(-seq_mean(logp_rollout))``    |
| ``mismatch/mismatch_log_ppl_diff``  | sequence mean of ``seq_mean(logp_rollout) - seq_mean(logp_train)`` |
| ``mismatch/mismatch_ppl_ratio``     | sequence mean of ``exp(log_ppl_diff)`` (training ppl / rollout ppl) |

The whole step batch is one group here (xtuner averages per packed micro-batch first;
with one micro-batch the two agree).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch


def masked_mean(values: torch.Tensor, mask: torch.Tensor, dim: int | None = None) -> torch.Tensor:
    """Mean of ``values`` where ``mask`` is 1 (over everything, or along ``dim``)."""
    if dim is None:
        return (values * mask).sum() / mask.sum()
    return (values * mask).sum(dim=dim) / mask.sum(dim=dim)


def mismatch_metrics(logp_train: torch.Tensor, logp_rollout: torch.Tensor, mask: torch.Tensor) -> dict[str, float]:
    """The ``mismatch/*`` metrics of one batch of [batch, response_len] log-probs."""
    import torch

    logp_train = logp_train.double()
    logp_rollout = logp_rollout.double()
    mask = mask.double()
    # Padding may hold anything (NaN included); zero it so it cannot leak into the sums.
    d = torch.where(mask > 0, logp_train - logp_rollout, 0.0)
    seq_train = masked_mean(torch.where(mask > 0, logp_train, 0.0), mask, dim=1)
    seq_rollout = masked_mean(torch.where(mask > 0, logp_rollout, 0.0), mask, dim=1)
    log_ppl_diff = seq_rollout - seq_train
    values = {
        # expm1(d) - d == exp(d) - d - 1, without cancellation when |d| ~ 1e-7 (healthy fp32).
        "mismatch_k3_kl": masked_mean(torch.expm1(d) - d, mask),
        "mismatch_kl": masked_mean(-d, mask),
        "mismatch_logprob_abs_diff": masked_mean(d.abs(), mask),
        "mismatch_training_ppl": torch.exp(-seq_train).mean(),
        "mismatch_rollout_ppl": torch.exp(-seq_rollout).mean(),
        "mismatch_log_ppl_diff": log_ppl_diff.mean(),
        "mismatch_ppl_ratio": torch.exp(log_ppl_diff).mean(),
    }
    return {f"mismatch/{k}": float(v) for k, v in values.items()}


def summary_stats(prefix: str, values: torch.Tensor, with_std: bool = True) -> dict[str, float]:
    """``{prefix}/mean|min|max[|std]`` of a 1-D tensor (population std)."""
    values = values.double()
    out = {
        f"{prefix}/mean": float(values.mean()),
        f"{prefix}/min": float(values.min()),
        f"{prefix}/max": float(values.max()),
    }
    if with_std:
        out[f"{prefix}/std"] = float(values.std(correction=0))
    return out


def group_advantages(rewards: torch.Tensor, group_size: int, eps: float = 1e-6) -> torch.Tensor:
    """GRPO advantages: each reward minus its group's mean, over the group's std (+ eps).

    ``rewards`` is [num_prompts * group_size], grouped contiguously. A group whose samples
    all scored the same gets advantage 0.
    """
    groups = rewards.view(-1, group_size)
    mean = groups.mean(dim=1, keepdim=True)
    std = groups.std(dim=1, keepdim=True)
    return ((groups - mean) / (std + eps)).view(-1)
