"""Regressions on the paths around the model: the trainer's log-prob gather, the rollout's rotary base, its
sampler and the metric log (issue 21's scenarios, kept beside :mod:`.regressions`, which registers them).

| regression | workload | what the code change does |
|---|---|---|
| ``trainer-gather-shift`` | GRPO | the trainer gathers each token's log-prob from the logits one position late |
| ``rope-theta[:THETA]`` | GRPO | the rollout's rotary embedding uses base THETA (1e6) instead of the model's 1e4 |
| ``top-p[:P]`` | GRPO | the rollout draws from the top-P (0.7) nucleus but reports the unfiltered log-probs |
| ``tracker-twice`` | GRPO | the metric log writes every row twice |
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from autotest.workloads.fault_hooks import INCONSISTENCY, MISMATCH, REWARDS, FaultHooks, LogprobFn

if TYPE_CHECKING:
    import torch


class TrainerGatherShift(FaultHooks):
    """The trainer scores token t with the logits of position t instead of t-1 (a label shift lost in a refactor).

    The rollout is untouched and its forward is the trainer's to rounding: every module of a consistency dump
    agrees, the rollout's recorded log-probs equal its own recompute, and only the trainer's differ.
    """

    name = "trainer-gather-shift"
    expected = {"verdict": "FAIL", "breached": [MISMATCH], "triage": INCONSISTENCY,
                "consistency": {"bucket": "after_model", "module": "trainer log-prob computation (after the model)"}}

    def actor_logprob_fn(self, fn: LogprobFn) -> LogprobFn:
        return gathered_one_position_late


def gathered_one_position_late(model: torch.nn.Module, input_ids: torch.Tensor,
                               prompt_len: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``tiny_lm.response_logprobs`` with the logits sliced from ``prompt_len`` instead of ``prompt_len - 1``."""
    out = model(input_ids=input_ids, use_cache=False)
    logp_all = out.logits[:, prompt_len:, :].float().log_softmax(dim=-1)
    logp = logp_all.gather(-1, input_ids[:, prompt_len:].unsqueeze(-1)).squeeze(-1)
    return logp, -(logp_all.exp() * logp_all).sum(dim=-1)


class RopeTheta(FaultHooks):
    """The rollout's rotary embedding uses base THETA instead of the model's (a config key the engine reads
    under another name, falling back to its own default).

    The difference is made inside each attention's own code, where q and k are rotated between the
    projections and ``o_proj``: the module to name is ``self_attn``, not the decoder layer around it.
    """

    name = "rope-theta"
    arg_help = "THETA, the rollout's rotary base (default 1e6; the model's is 1e4)"
    default_arg = "1e6"
    expected = {"verdict": "FAIL", "breached": [MISMATCH], "triage": INCONSISTENCY,
                "consistency": {"bucket": "module_impl_mismatch", "module": "model.layers.0.self_attn"}}

    def magnitude(self) -> float:
        return self.float_arg()

    def patch_rollout_model(self, model: torch.nn.Module) -> None:
        import torch

        theta = self.magnitude()
        for module in model.modules():
            inv_freq = getattr(module, "inv_freq", None)
            if isinstance(inv_freq, torch.Tensor):
                dim = 2 * inv_freq.numel()
                exponents = torch.arange(0, dim, 2, dtype=torch.float) / dim
                inv_freq.copy_(1.0 / (theta ** exponents))


class TopP(FaultHooks):
    """The rollout draws from the nucleus of probability P (a sampling default left on) while the log-probs it
    reports are the model's unfiltered ones, which the trainer recomputes exactly: k3 cannot see it."""

    name = "top-p"
    arg_help = "P, the nucleus' probability mass (default 0.7)"
    default_arg = "0.7"
    expected = {"verdict": "FAIL", "breached": [REWARDS], "triage": "sampling-changed"}

    def magnitude(self) -> float:
        value = self.float_arg()
        if value > 1:
            from autotest.errors import UsageError

            raise UsageError(f"--fault {self.name}:{self.arg}: P is a probability within (0, 1]")
        return value

    def draw_logprobs(self, logprobs: torch.Tensor) -> torch.Tensor:
        import torch

        ordered, order = logprobs.sort(dim=-1, descending=True)
        # keep the likeliest tokens until their mass reaches P (the likeliest one always stays)
        mass_before = ordered.exp().cumsum(dim=-1) - ordered.exp()
        dropped_sorted = mass_before >= self.magnitude()
        dropped = torch.zeros_like(dropped_sorted).scatter(-1, order, dropped_sorted)
        return torch.where(dropped, float("-inf"), logprobs)


class TrackerTwice(FaultHooks):
    """The metric log writes every row twice (a handler registered twice); training is a clean run's."""

    name = "tracker-twice"
    expected = {"verdict": "PASS", "breached": [], "triage": ""}

    def wrap_tracker(self, tracker: Any) -> Any:
        return _TwiceTracker(tracker)


class _TwiceTracker:
    def __init__(self, inner: Any) -> None:
        self.inner = inner

    def write(self, row: Mapping[str, Any]) -> None:
        self.inner.write(row)
        self.inner.write(row)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


PATH_REGRESSIONS: tuple[type[FaultHooks], ...] = (TrainerGatherShift, RopeTheta, TopP, TrackerTwice)
