"""The hook points a fault of the embedded workloads may override; with no fault each is the identity.

Hook points (and who calls them): ``configure`` (the entry point, on the run config),
``on_step_start`` and ``loop_end`` (the driver loop), ``on_sync``, ``held_version``, ``patch_rollout_model`` and
``rollout_ranks`` (the rollout engine),
``wrap_judge`` (the training reward), ``on_advantages``, ``on_actor_logprobs``, ``actor_logprob_fn`` and
``recompute_logprob_fn`` and ``loss_normaliser`` (the trainer), ``decode_positions`` (the rollout's decode forwards), ``wrap_tracker`` (the metric log), ``on_prompts`` (the driver's prompt batch),
``draw_logprobs`` (what the rollout draws from, apart from what it reports), ``eval_logits`` (the rollout
engine's sampled eval), ``restored_parts`` (what a resumed run restores from its checkpoint: driver, rollout
engine, trainer) and ``teacher_server_args`` (MOPD's launcher). The named faults are in
:mod:`autotest.workloads.faults`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar

from autotest.errors import UsageError

if TYPE_CHECKING:
    import torch

    from autotest.workloads.tasks import Judge, Prompt

MISMATCH = "mismatch/mismatch_k3_kl"
REWARDS = "response/rewards/mean"
EVAL = "eval/accuracy"
INCONSISTENCY = "mismatch"  # triage rule ids are autotest.judge.triage's
#: ``(model, input_ids, prompt_len) -> (log-probs, entropies)`` of the response tokens
LogprobFn = Callable[["torch.nn.Module", "torch.Tensor", int], "tuple[torch.Tensor, torch.Tensor]"]
#: ``(mini-batch token count, micro-batch mask, micro-batches in the mini-batch) -> divisor of its summed token loss``
LossNormaliser = Callable[["torch.Tensor", "torch.Tensor", int], "torch.Tensor"]


class FaultHooks:
    """No fault: every hook is the identity. Subclasses override what they break."""

    name: ClassVar[str] = "none"
    arg_help: ClassVar[str] = ""
    """What ARG means, with its default; empty when the fault takes none."""
    default_arg: ClassVar[str | None] = None
    arg_required: ClassVar[bool] = False
    expected: ClassVar[dict[str, Any]] = {"verdict": "PASS", "breached": [], "triage": ""}

    def __init__(self, arg: str | None, seed: int) -> None:
        self.arg = arg if arg is not None else self.default_arg
        self.seed = seed

    def configure(self, config: Any) -> Any:
        """Return the run config to use (a frozen dataclass)."""
        return config

    def on_step_start(self, step: int) -> None:
        """Called at the start of each training step, inside its timing."""

    def loop_end(self, last_step: int) -> int:
        """The last step the driver's training loop runs; by default ``last_step``, the run's configured last step
        (the LR schedule and the last eval still count from that one)."""
        return last_step

    def on_sync(self, state_dict: Mapping[str, torch.Tensor], version: int) -> Mapping[str, torch.Tensor]:
        """The weights the rollout engine copies in at ``version`` (0 = initial sync)."""
        return state_dict

    def held_version(self, version: int) -> int:
        """The weight version the rollout engine serves after a sync labelled ``version`` copied something in (the
        version of the tensors ``on_sync`` handed over); by default ``version``."""
        return version

    def patch_rollout_model(self, model: torch.nn.Module) -> None:
        """Change the rollout copy of the model once, after it is built."""

    def rollout_ranks(self, model: torch.nn.Module) -> list[torch.nn.Module]:
        """The model each data-parallel rollout rank samples its equal, contiguous shard of a training batch with;
        by default one rank, the engine's synced ``model``."""
        return [model]

    def wrap_judge(self, judge: Judge) -> Judge:
        """The reward function used for training rewards (eval grades with the task's own)."""
        return judge

    def on_advantages(self, advantages: torch.Tensor, rewards: torch.Tensor, group_size: int) -> torch.Tensor:
        """Per-sample advantages the PPO update uses."""
        return advantages

    def on_actor_logprobs(self, step: int, logprobs: torch.Tensor) -> torch.Tensor:
        """The trainer's recomputed (old) log-probs."""
        return logprobs

    def actor_logprob_fn(self, fn: LogprobFn) -> LogprobFn:
        """The function the trainer computes log-probs and entropies with (``tiny_lm.response_logprobs``)."""
        return fn

    def recompute_logprob_fn(self, fn: LogprobFn) -> LogprobFn:
        """The function the trainer's old-log-prob recompute (before the update) uses; ``fn`` is the one the
        update uses too (after ``actor_logprob_fn``)."""
        return fn

    def loss_normaliser(self, num_tokens: torch.Tensor, micro_mask: torch.Tensor, micro_batches: int) -> torch.Tensor:
        """The trainer's divisor of one micro-batch's summed token loss: the mini-batch's token count (a token mean
        over the whole mini-batch, however it is split into micro-batches); a [rows, 1] tensor divides each row's
        tokens by its own divisor."""
        return num_tokens

    def decode_positions(self, positions: torch.Tensor, decoded: int) -> torch.Tensor:
        """The [batch, 1] position ids of the rollout's decode forward that feeds its ``decoded``-th sampled token
        (1 = the first decoded token) over the KV cache; by default the cache length."""
        return positions

    def wrap_tracker(self, tracker: Any) -> Any:
        """The metric-log writer (``write(row)``, ``write_text(text)``)."""
        return tracker

    def eval_model(self, model: torch.nn.Module) -> torch.nn.Module:
        """The model the rollout engine evaluates with (its own, current one)."""
        return model

    def sampling_logits(self, logits: torch.Tensor) -> torch.Tensor:
        """The logits the rollout samples from and takes its reported log-probs of."""
        return logits

    def draw_logprobs(self, logprobs: torch.Tensor) -> torch.Tensor:
        """The log-probs the rollout draws its next token from (unnormalised is fine); the ones it reports stay
        ``logprobs``, the log_softmax of ``sampling_logits``."""
        return logprobs

    def eval_logits(self, logits: torch.Tensor) -> torch.Tensor:
        """The logits the sampled (pass@1) eval draws from, after ``sampling_logits``."""
        return logits

    def on_prompts(self, prompts: list[Prompt], step: int) -> list[Prompt]:
        """The training prompts of ``step`` as the data loader hands them over (after they are drawn)."""
        return prompts

    def restored_parts(self, component: str, parts: tuple[str, ...]) -> tuple[str, ...]:
        """The checkpoint ``parts`` that ``component`` (``driver``, ``rollout`` or ``trainer``) restores when the
        run resumes from a checkpoint; called only in a resumed process."""
        return parts

    def teacher_server_args(self) -> list[str]:
        """MOPD: extra command-line arguments of every teacher server."""
        return []

    def route_sources(self, sources: Sequence[str], step: int) -> list[str]:
        """MOPD: the data source each sample's teacher request is routed by."""
        return list(sources)

    def check_model(self, model: torch.nn.Module) -> None:
        """Raise ``UsageError`` when ARG names nothing in ``model`` (run before any work)."""

    def int_arg(self) -> int:
        """ARG as a positive integer (a step number)."""
        try:
            value = int(self.arg or "")
        except ValueError:
            value = 0
        if value < 1:
            raise UsageError(f"--fault {self.name}: needs a positive step, e.g. {self.name}:3 (got {self.arg!r})")
        return value

    def float_arg(self) -> float:
        """ARG as a positive number."""
        try:
            value = float(self.arg or "")
        except ValueError:
            value = 0.0
        if value <= 0:
            raise UsageError(f"--fault {self.name}: ARG must be a positive number (got {self.arg!r})")
        return value
