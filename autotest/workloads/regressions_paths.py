"""Regressions on the paths around the model: the trainer's log-prob gather, the rollout's rotary base, its
sampler, the training reward's scale and the metric log (issue 21's scenarios, kept beside :mod:`.regressions`,
which registers them).

| regression | workload | what the code change does |
|---|---|---|
| ``trainer-gather-shift`` | GRPO | the trainer gathers each token's log-prob from the logits one position late |
| ``rope-theta[:THETA]`` | GRPO | the rollout's rotary embedding uses base THETA (100) instead of the model's 1e4 |
| ``top-p[:P]`` | GRPO | the rollout draws from the top-P (0.7) nucleus but reports the unfiltered log-probs |
| ``tracker-twice`` | GRPO | the metric log writes every row twice |
| ``judge-scale[:F]`` | GRPO | the training judge's rewards are F (2) times the task's (0/2 instead of 0/1) |
| ``step-offset[:K]`` | GRPO | every training row (steps 1..N) is logged at step + K (1); the step-0 eval row stays |
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from autotest.workloads.fault_hooks import INCONSISTENCY, MISMATCH, REWARDS, FaultHooks, LogprobFn

if TYPE_CHECKING:
    import torch

    from autotest.workloads.tasks import Judge


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
    arg_help = "THETA, the rollout's rotary base (default 100; the model's is 1e4)"
    default_arg = "100"
    # measured (seed 0, 45 steps): 100 gives k3 4.5e-4 at step 1 and breaches the percentile gate; Qwen3's
    # real 1e6 stays near 1e-4 (attention at init is almost uniform, so the rotation barely matters) and passes
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


class JudgeScale(FaultHooks):
    """The training judge's rewards are F times the task's (a reward scale changed in a config). GRPO normalises
    advantages within each group, so training, eval, length and entropy stay a clean run's; only the logged
    rewards move, over the whole run."""

    name = "judge-scale"
    arg_help = "F, the factor on every training reward (default 2)"
    default_arg = "2"
    expected = {"verdict": "FAIL", "breached": [REWARDS], "triage": "rewards-only"}

    def wrap_judge(self, judge: Judge) -> Judge:
        factor = self.float_arg()

        def scaled(target: Any, response: Any) -> float:
            return factor * judge(target, response)

        return scaled


class StepOffset(FaultHooks):
    """Every training row is logged at step + K (an off-by-one in the logger's step counter); training is a clean
    run's and the step-0 eval row keeps its step."""

    name = "step-offset"
    arg_help = "K, added to every training step number (default 1)"
    default_arg = "1"
    expected = {"verdict": "ERROR", "breached": [], "triage": "step-accounting"}

    def wrap_tracker(self, tracker: Any) -> Any:
        return _OffsetTracker(tracker, self.int_arg())


class _OffsetTracker:
    def __init__(self, inner: Any, offset: int) -> None:
        self.inner, self.offset = inner, offset

    def write(self, row: Mapping[str, Any]) -> None:
        step = row["step"]
        self.inner.write({**row, "step": step + self.offset if step >= 1 else step})

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


PATH_REGRESSIONS: tuple[type[FaultHooks], ...] = (TrainerGatherShift, RopeTheta, TopP, TrackerTwice, JudgeScale,
                                                  StepOffset)
