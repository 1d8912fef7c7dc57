"""The training side of the tiny GRPO workload (the "actor").

Per step: recompute the log-probs of the sampled responses in fp32 with the current
weights (the old log-probs; ``recompute_logprobs: true``), compare them with the rollout
engine's (mismatch metrics), turn rewards into group-normalised advantages and run
several PPO-clip mini-batch updates with Adam. Non-finite gradients skip the update, as
production trainers do.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from autotest.workloads.device import generator
from autotest.workloads.fault_hooks import LogprobFn, LossNormaliser
from autotest.workloads.faults import FaultHooks, make_fault
from autotest.workloads.metrics import (
    group_advantages,
    masked_mean,
    mismatch_metrics,
    summary_stats,
)
from autotest.workloads.observer import (
    ACTOR_PHASE,
    ACTOR_SIDE,
    ForwardObserver,
    NullObserver,
)
from autotest.workloads.tiny_lm import TinyLMConfig, build_model, response_logprobs

if TYPE_CHECKING:
    import torch

    from autotest.workloads.rollout import RolloutBatch


#: the parts of the trainer's checkpoint, in the order they are restored
CHECKPOINT_PARTS = ("model", "optimizer", "scheduler", "rng")


@dataclass(frozen=True)
class OptimConfig:
    """PPO and optimiser settings of the trainer."""

    lr: float
    """Adam learning rate (constant)."""
    clip_eps: float
    """PPO ratio clip range: ratios outside [1 - eps, 1 + eps] stop pushing."""
    mini_batches: int
    """Optimiser steps per training step (the batch is split into this many mini-batches)."""
    micro_batch_size: int
    """Sequences per forward pass (gradient accumulation inside a mini-batch)."""
    max_grad_norm: float
    """Gradient clipping norm."""
    entropy_coef: float = 0.0
    """Weight of the entropy bonus (token mean) subtracted from the loss."""
    total_steps: int = 1
    """Length of the linear learning-rate decay, in training steps."""
    final_lr_ratio: float = 1.0
    """Learning rate at ``total_steps`` as a fraction of ``lr`` (1.0 = constant)."""
    padding: str = "max"
    """Update forwards: ``max`` pads every micro-batch to the longest possible response; ``longest`` trims it to
    its own longest response (as the recompute does). The two must train the same (an equivalence variant)."""
    group_by_length: bool = False
    """Fill a mini-batch's micro-batches in order of response length (as length-grouped gradient accumulation does,
    to cut padding): the token mean is the same, but micro-batches then differ in token count, so a loss normalised
    per micro-batch shows."""

    def lr_at(self, step: int) -> float:
        """Learning rate of training step ``step`` (1-based): linear from lr to lr * final_lr_ratio."""
        progress = min(max(step - 1, 0) / max(self.total_steps - 1, 1), 1.0)
        return self.lr * (1.0 - (1.0 - self.final_lr_ratio) * progress)


@dataclass(frozen=True)
class TrainResult:
    """What one training step reports."""

    mini_batch_rows: list[dict[str, float]]
    """Per optimiser step: loss, pg_clipfrac, grad_norm, lr, skipped (keys without prefix)."""
    metrics: dict[str, float]
    """Step-summary metrics: mismatch/*, entropy/mean, response/advantages/*."""


class Trainer:
    """Owns the fp32 training model and its optimiser."""

    def __init__(
        self,
        model_config: TinyLMConfig,
        optim: OptimConfig,
        seed: int,
        group_size: int,
        fault: str | None = None,
        observer: ForwardObserver | None = None,
        num_threads: int = 1,
        aa_perturb: int = 0,
    ) -> None:
        import torch

        torch.set_num_threads(num_threads)
        self.model = build_model(model_config, seed=seed)
        if aa_perturb:  # A/A pairs (autotest.workloads.perturb); a resumed run then loads the checkpoint's weights
            from autotest.workloads.perturb import nudge_weights

            nudge_weights(self.model, aa_perturb)
        self.optim = optim
        self.group_size = group_size
        self.optimizer = torch.optim.Adam(self.model.parameters(), lr=optim.lr)
        self.generator = generator(seed + 2)
        #: the LR schedule's position: training steps it has stepped through (a checkpoint saves it)
        self.schedule_steps = 0
        self.hooks: FaultHooks = make_fault(fault, seed)
        self.observer = observer or NullObserver()
        self.logprobs = self.hooks.actor_logprob_fn(response_logprobs)
        self.recompute_logprobs = self.hooks.recompute_logprob_fn(self.logprobs)

    def checkpoint_state(self) -> dict[str, Any]:
        """What a checkpoint keeps of the trainer: weights, optimiser state, LR-schedule position, mini-batch RNG."""
        return {"model": self.model.state_dict(), "optimizer": self.optimizer.state_dict(),
                "scheduler": {"schedule_steps": self.schedule_steps}, "rng": self.generator.get_state()}

    def load_checkpoint_state(self, state: dict[str, Any]) -> None:
        """Restore :meth:`checkpoint_state` (every part but those a resume fault leaves out)."""
        for part in self.hooks.restored_parts("trainer", CHECKPOINT_PARTS):
            if part == "model":
                self.model.load_state_dict(state["model"])
            elif part == "optimizer":
                self.optimizer.load_state_dict(state["optimizer"])
            elif part == "scheduler":
                self.schedule_steps = int(state["scheduler"]["schedule_steps"])
            else:
                self.generator.set_state(state["rng"])

    def state_dict(self) -> dict[str, torch.Tensor]:
        """Detached copies of the parameters, by name (what a weight sync sends)."""
        return {name: p.detach().clone() for name, p in self.model.named_parameters()}

    def _chunks(self, indices: torch.Tensor) -> list[torch.Tensor]:
        return list(indices.split(self.optim.micro_batch_size))

    def _recompute(self, batch: RolloutBatch, step: int, observe: bool) -> tuple[torch.Tensor, torch.Tensor]:
        """Old log-probs and entropies in fp32, micro-batch by micro-batch."""
        import torch

        input_ids = torch.cat([batch.prompt_ids, batch.response_ids], dim=1)
        prompt_len = batch.prompt_ids.shape[1]
        lengths = batch.response_mask.sum(dim=1).long()
        logp = torch.zeros_like(batch.rollout_logprobs)
        entropy = torch.zeros_like(batch.rollout_logprobs)
        self.model.eval()
        with torch.no_grad():
            for idx in self._chunks(torch.arange(input_ids.shape[0])):
                # Trim to the longest response in the micro-batch: a one-sample micro-batch is
                # then exactly prompt + response, the same tokens the rollout side observes.
                width = int(lengths[idx].max())
                ids = input_ids[idx, : prompt_len + width]
                ctx = (
                    self.observer.forward(
                        ACTOR_SIDE,
                        step,
                        ACTOR_PHASE,
                        [batch.request_ids[i] for i in idx.tolist()],
                        [ids[j, : prompt_len + int(lengths[i])].tolist() for j, i in enumerate(idx.tolist())],
                        batch.weight_version,
                        self.model,
                        # what this model holds: one version per update applied (the sync after step k is version k)
                        held_weight_version=self.schedule_steps,
                    )
                    if observe
                    else contextlib.nullcontext()
                )
                with ctx:
                    lp, ent = self.recompute_logprobs(self.model, ids, prompt_len)
                logp[idx, :width] = lp
                entropy[idx, :width] = ent
        return logp, entropy

    def train_step(self, batch: RolloutBatch, rewards: torch.Tensor, step: int, observe: bool = False) -> TrainResult:
        """One GRPO step on ``batch`` with per-sample ``rewards``."""
        import torch

        mask = batch.response_mask
        old_logp, entropy = self._recompute(batch, step, observe)
        old_logp = self.hooks.on_actor_logprobs(step, old_logp)
        if observe:  # the values the mismatch metrics use, for the three-way log-prob comparison
            positions, token_ids, values = batch.token_logprobs(old_logp)
            self.observer.record_logprobs("trainer", step, list(range(len(batch.request_ids))), batch.request_ids,
                                          positions, token_ids, values, "fp32")
        metrics = mismatch_metrics(old_logp, batch.rollout_logprobs, mask)
        metrics["entropy/mean"] = float(masked_mean(entropy, mask))

        advantages = group_advantages(rewards, self.group_size)
        advantages = self.hooks.on_advantages(advantages, rewards, self.group_size)
        metrics.update(summary_stats("response/advantages", advantages))
        del metrics["response/advantages/min"], metrics["response/advantages/max"]

        input_ids = torch.cat([batch.prompt_ids, batch.response_ids], dim=1)
        # the schedule steps with the trainer (as a scheduler object would), not with the driver's step number
        self.schedule_steps += 1
        for group in self.optimizer.param_groups:
            group["lr"] = self.optim.lr_at(self.schedule_steps)
        rows = [
            self._update(input_ids, batch.prompt_ids.shape[1], mask, old_logp, advantages, idx)
            for idx in torch.randperm(input_ids.shape[0], generator=self.generator).chunk(self.optim.mini_batches)
        ]
        return TrainResult(mini_batch_rows=rows, metrics=metrics)

    def _update(self, input_ids: torch.Tensor, prompt_len: int, mask: torch.Tensor, old_logp: torch.Tensor,
                advantages: torch.Tensor, mini_batch: torch.Tensor) -> dict[str, Any]:
        """One optimiser step on one mini-batch (one advantage per sample, broadcast over its tokens)."""
        return ppo_clip_update(self.model, self.optimizer, self.optim, input_ids, prompt_len, mask, old_logp,
                               advantages.unsqueeze(1), mini_batch, entropy_coef=self.optim.entropy_coef,
                               logprobs_fn=self.logprobs, trim=self.optim.padding == "longest",
                               loss_normaliser=self.hooks.loss_normaliser, group_by_length=self.optim.group_by_length)


def ppo_clip_update(model: torch.nn.Module, optimizer: torch.optim.Optimizer, optim: Any,
                    input_ids: torch.Tensor, prompt_len: int, mask: torch.Tensor, old_logp: torch.Tensor,
                    advantages: torch.Tensor, mini_batch: torch.Tensor, *, entropy_coef: float = 0.0,
                    logprobs_fn: LogprobFn = response_logprobs, trim: bool = False,
                    loss_normaliser: LossNormaliser | None = None, group_by_length: bool = False) -> dict[str, Any]:
    """One optimiser step on one mini-batch: token-mean PPO-clip loss over micro-batches.

    ``optim`` has clip_eps, micro_batch_size and max_grad_norm (OptimConfig or the distillation one).
    ``advantages`` broadcasts against the per-token log-probs: one per sample (GRPO, shape [B, 1])
    or one per token (distillation, [B, T]). A non-finite gradient norm skips the step. ``logprobs_fn`` is the
    trainer's log-prob computation (a fault may change it). ``trim`` cuts each micro-batch to its longest response
    (padding-free in effect; it must train the same). ``loss_normaliser`` gives the divisor of a micro-batch's summed
    token loss (default: the mini-batch's token count, so any micro-batch split trains the same; a fault may change it,
    or give one divisor per row).
    ``group_by_length`` fills the micro-batches in order of response length.
    """
    import torch

    model.train()
    optimizer.zero_grad(set_to_none=True)
    num_tokens = mask[mini_batch].sum()
    loss_sum = torch.zeros((), dtype=torch.float64)
    clipped = torch.zeros((), dtype=torch.float64)
    eps = optim.clip_eps
    micro_batches = mini_batch.split(optim.micro_batch_size)
    if group_by_length and len(micro_batches) > 1:
        lengths = mask[mini_batch].sum(dim=1)
        micro_batches = mini_batch[torch.sort(lengths, stable=True).indices].split(optim.micro_batch_size)
    for idx in micro_batches:
        ids, m, old, adv = input_ids[idx], mask[idx], old_logp[idx], advantages[idx]
        if trim:
            width = int(m.sum(dim=1).max())
            ids, m, old = ids[:, : prompt_len + width], m[:, :width], old[:, :width]
            adv = adv[:, :width] if adv.shape[1] > 1 else adv  # per-token advantages (distillation) trim too
        logp, entropy = logprobs_fn(model, ids, prompt_len)
        ratio = torch.exp(logp - old)
        per_token = -torch.min(ratio * adv, ratio.clamp(1 - eps, 1 + eps) * adv)
        if entropy_coef:
            per_token = per_token - entropy_coef * entropy
        divisor = num_tokens if loss_normaliser is None else loss_normaliser(num_tokens, m, len(micro_batches))
        masked = torch.where(m > 0, per_token, 0.0)
        # a [rows, 1] divisor weighs each row's tokens by its own (a sequence-level mean); a scalar is a token mean
        loss = masked.sum() / divisor if divisor.dim() == 0 else (masked / divisor).sum()
        loss.backward()
        loss_sum += loss.detach().double()
        clipped += (((ratio - 1).abs() > eps).float() * m).sum().double()
    grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), optim.max_grad_norm)
    finite = bool(torch.isfinite(grad_norm))
    if finite:
        optimizer.step()
    return {
        "loss": float(loss_sum),
        "pg_clipfrac": float(clipped / num_tokens),
        "grad_norm": float(grad_norm),
        "lr": optimizer.param_groups[0]["lr"],
        "skipped": 0.0 if finite else 1.0,
    }
