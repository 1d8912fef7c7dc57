"""The training side of the tiny MOPD workload: sampled-token k1 distillation as policy gradient.

Per step, over the response tokens of the student's own samples (xtuner's
``DistillationLossConfig(loss_mode="k1", use_policy_gradient=True, task_adv_weight=0)``):

- ``d = logp_student - logp_teacher`` at the sampled token, the student's log-prob being
  the trainer's fp32 recompute before the update, clamped to [-20, 20] as the recipe does;
- per-token advantage ``-d`` (rewards do not enter the update);
- PPO-clip loss, token mean, over several mini-batches with Adam.

Logged: ``distillation/reduced_distillation_kl`` = token mean of ``d`` (k1 reverse KL),
``distillation/reduced_distillation_abs_loss`` = token mean of ``|d|``, their k1 aliases
``distillation/opd_reverse_kl`` and ``distillation/opd_abs_logprob_loss`` (equal by
construction, as in xtuner), per teacher at every step the KL (``teacher_kl/<t>``), ``|d|``
(``teacher_abs_loss/<t>``) and the teacher's mean log-prob of the sampled tokens (``teacher_logp/<t>``), the
train/inference ``mismatch/*`` family
and ``entropy/mean``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from autotest.workloads.metrics import masked_mean, mismatch_metrics
from autotest.workloads.tiny_lm import response_logprobs

if TYPE_CHECKING:
    import torch

    from autotest.workloads.rollout import RolloutBatch


@dataclass(frozen=True)
class DistillOptim:
    """Loss and optimiser settings of the student."""

    lr: float = 1e-3
    """Adam learning rate (constant, no warmup, as the recipe)."""
    clip_eps: float = 0.2
    """PPO ratio clip range."""
    mini_batches: int = 4
    """Optimiser steps per training step."""
    micro_batch_size: int = 256
    """Sequences per forward pass."""
    max_grad_norm: float = 1.0
    """Gradient clipping norm."""
    log_prob_diff_min: float = -20.0
    """Lower clamp of ``logp_student - logp_teacher``."""
    log_prob_diff_max: float = 20.0
    """Upper clamp of ``logp_student - logp_teacher``."""


@dataclass(frozen=True)
class DistillResult:
    """What one step reports."""

    mini_batch_rows: list[dict[str, float]]
    """Per optimiser step: loss, pg_clipfrac, grad_norm, lr, skipped."""
    metrics: dict[str, float]
    """Step-summary metrics: distillation/*, mismatch/*, entropy/mean."""


class DistillTrainer:
    """Owns the fp32 student and its optimiser."""

    def __init__(self, student_dir: Path, optim: DistillOptim, seed: int, num_threads: int = 1) -> None:
        import torch

        from autotest.workloads.teachers import load_checkpoint

        torch.set_num_threads(num_threads)
        self.model = load_checkpoint(student_dir)
        self.optim = optim
        self.optimizer = torch.optim.Adam(self.model.parameters(), lr=optim.lr)
        self.generator = torch.Generator().manual_seed(seed + 2)

    def state_dict(self) -> dict[str, torch.Tensor]:
        """Detached copies of the parameters (what a weight sync sends)."""
        return {name: p.detach().clone() for name, p in self.model.named_parameters()}

    def _recompute(self, input_ids: torch.Tensor, prompt_len: int) -> tuple[torch.Tensor, torch.Tensor]:
        import torch

        self.model.eval()
        parts = []
        with torch.no_grad():
            for chunk in input_ids.split(self.optim.micro_batch_size):
                parts.append(response_logprobs(self.model, chunk, prompt_len))
        return torch.cat([p[0] for p in parts]), torch.cat([p[1] for p in parts])

    def distill_step(self, batch: RolloutBatch, teacher_logp: torch.Tensor, teachers: Sequence[str]) -> DistillResult:
        """One step on ``batch``; ``teacher_logp`` is [batch, response_len], ``teachers`` names each row's teacher."""
        import torch

        mask = batch.response_mask
        prompt_len = batch.prompt_ids.shape[1]
        input_ids = torch.cat([batch.prompt_ids, batch.response_ids], dim=1)
        old_logp, entropy = self._recompute(input_ids, prompt_len)
        diff = (old_logp - teacher_logp).clamp(self.optim.log_prob_diff_min, self.optim.log_prob_diff_max)
        diff = torch.where(mask > 0, diff, 0.0)
        kl = float(masked_mean(diff.double(), mask.double()))
        abs_loss = float(masked_mean(diff.abs().double(), mask.double()))
        metrics = {
            "distillation/reduced_distillation_kl": kl,
            "distillation/reduced_distillation_abs_loss": abs_loss,
            "distillation/opd_reverse_kl": kl,
            "distillation/opd_abs_logprob_loss": abs_loss,
            "entropy/mean": float(masked_mean(entropy, mask)),
        }
        for name in sorted(set(teachers)):
            rows = torch.tensor([t == name for t in teachers])
            metrics[f"distillation/teacher_kl/{name}"] = float(masked_mean(diff[rows].double(), mask[rows].double()))
            # per teacher at every step (issue 30): |d| and the teacher's own answer, so a teacher that starts
            # answering otherwise shows at the step it did, on its own row
            metrics[f"distillation/teacher_abs_loss/{name}"] = float(
                masked_mean(diff[rows].abs().double(), mask[rows].double()))
            metrics[f"distillation/teacher_logp/{name}"] = float(
                masked_mean(teacher_logp[rows].double(), mask[rows].double()))
        metrics.update(mismatch_metrics(old_logp, batch.rollout_logprobs, mask))
        advantages = -diff
        order = torch.randperm(input_ids.shape[0], generator=self.generator)
        rows = [self._update(input_ids, prompt_len, mask, old_logp, advantages, idx)
                for idx in order.chunk(self.optim.mini_batches)]
        return DistillResult(mini_batch_rows=rows, metrics=metrics)

    def _update(self, input_ids: torch.Tensor, prompt_len: int, mask: torch.Tensor, old_logp: torch.Tensor,
                advantages: torch.Tensor, mini_batch: torch.Tensor) -> dict[str, Any]:
        """One optimiser step: token-mean PPO-clip loss with per-token advantages."""
        from autotest.workloads.trainer import ppo_clip_update

        return ppo_clip_update(self.model, self.optimizer, self.optim, input_ids, prompt_len, mask, old_logp,
                               advantages, mini_batch)
