"""Regressions the harness was never tuned on (issue 30 item 7): realistic framework bugs, each written with the
next step a good engineer would name *before* it was run, for ``benchmarks/explanations.py --set unseen``.

Registered in :mod:`.regressions` (``--fault NAME[:ARG]``); the MOPD ones are in ``MOPD_REGRESSIONS`` too. Each
acts only through its hooks, so a run without one is byte-identical to a clean run.

| regression | workload | part | what the code change does |
|---|---|---|---|
| ``sync-last-bucket`` | GRPO | weight sync | the bucketed sync never flushes its last, partial bucket: ``model.norm.weight`` stays at its initial value |
| ``stale-old-logprobs`` | GRPO | trainer | the old-policy log-prob buffer is read before this step's recompute lands: it holds the previous step's |
| ``eos-banned`` | GRPO | rollout | a bad-words list built from the tokenizer's special tokens includes ``<eos>``: sampling never stops |
| ``eval-lags`` | GRPO | eval | the eval engine's weight refresh runs after eval: each eval point scores the previous point's weights |
| ``minibatch-key-lost`` | GRPO | trainer | a renamed mini-batch key falls back to 1: one optimiser step per training step instead of 4 |
| ``tracker-ema[:A]`` | GRPO | logging | the tracker smooths every scalar with an EMA (A = 0.6) before it writes: training is a clean run's |
| ``length-from-shape`` | GRPO | logging | the mean response length is logged from the padded width (the batch's longest), not the mask |
| ``repeat-shard`` | GRPO | data | the sampler's shard index never advances: every prompt comes from shard 0 (the lowest third of targets) |
| ``route-off-by-one`` | MOPD | teacher | the router zips samples with their sources shifted by one: sample i goes to sample i-1's teacher |
| ``mopd-minibatch-key-lost`` | MOPD | trainer | the student's mini-batch key falls back to 1: one optimiser step per training step instead of 4 |
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from autotest.workloads.fault_hooks import EVAL, INCONSISTENCY, MISMATCH, REWARDS, FaultHooks

if TYPE_CHECKING:
    import torch

    from autotest.workloads.tasks import Prompt

LENGTH = "response/response_len/mean"
ENTROPY = "entropy/mean"
DISTILL_KL = "distillation/reduced_distillation_kl"


class SyncLastBucket(FaultHooks):
    """The bucketed weight sync sends full buckets only and never flushes the last, partial one (a loop that
    flushes when a bucket fills and forgets the tail): the last parameter of the state dict, the final RMSNorm's
    weight, keeps its initial value on the rollout while the trainer updates it."""

    name = "sync-last-bucket"
    # written before the run: k3 grows as the trainer's final norm moves away; the dump pins the stale parameter
    expected = {"verdict": "FAIL", "breached": [MISMATCH], "triage": INCONSISTENCY,
                "consistency": {"bucket": "parameter_sync_mismatch", "module": "model.norm", "side": "rollout"}}

    def on_sync(self, state_dict: Mapping[str, torch.Tensor], version: int) -> Mapping[str, torch.Tensor]:
        if version == 0 or not state_dict:  # the initial sync goes out in one piece
            return state_dict
        last = list(state_dict)[-1]
        return {k: v for k, v in state_dict.items() if k != last}


class StaleOldLogprobs(FaultHooks):
    """The trainer's old-policy log-prob buffer is filled asynchronously and the update reads it before this
    step's recompute lands: it holds the previous step's values (this step's where the previous step's responses
    were shorter). The model's forwards are right on both sides; the log-probs the trainer uses are not this
    batch's."""

    name = "stale-old-logprobs"
    expected = {"verdict": "FAIL", "breached": [MISMATCH], "triage": INCONSISTENCY,
                "consistency": {"bucket": "after_model", "module": "trainer log-prob computation (after the model)",
                                "side": "actor"}}

    def __init__(self, arg: str | None, seed: int) -> None:
        super().__init__(arg, seed)
        self.previous: torch.Tensor | None = None

    def on_actor_logprobs(self, step: int, logprobs: torch.Tensor) -> torch.Tensor:
        previous, self.previous = self.previous, logprobs.detach().clone()
        if previous is None or previous.shape[0] != logprobs.shape[0]:
            return logprobs
        width = min(previous.shape[1], logprobs.shape[1])
        stale = logprobs.clone()
        stale[:, :width] = previous[:, :width]
        return stale


class EosBanned(FaultHooks):
    """The rollout's bad-words list is built from every special token of the tokenizer, ``<eos>`` included: the
    sampler never draws ``<eos>`` (the reported log-probs stay the model's unfiltered ones), so every sampled
    response runs to the token limit without its end marker. Greedy eval does not use the sampler's filter."""

    name = "eos-banned"
    expected = {"verdict": "FAIL", "breached": [LENGTH, REWARDS, EVAL], "triage": "sampling-changed"}

    def draw_logprobs(self, logprobs: torch.Tensor) -> torch.Tensor:
        from autotest.workloads.tiny_lm import DigitTokenizer

        banned = logprobs.clone()
        banned[..., DigitTokenizer().eos_id] = float("-inf")
        return banned


class EvalLags(FaultHooks):
    """The eval engine's weight refresh was moved after eval: each eval point scores the weights of the previous
    eval point (step 0 its own, the initial sync's). Training is bitwise a clean run's; only eval moves."""

    name = "eval-lags"
    expected = {"verdict": "FAIL", "breached": [EVAL], "triage": "eval-path"}

    def __init__(self, arg: str | None, seed: int) -> None:
        super().__init__(arg, seed)
        self.current: torch.nn.Module | None = None
        self.previous: torch.nn.Module | None = None

    def eval_model(self, model: torch.nn.Module) -> torch.nn.Module:
        # the rollout engine has no step number: a new eval point is one whose weights differ from the last seen
        if self.current is None or not _same_weights(self.current, model):
            self.previous, self.current = self.current, copy.deepcopy(model)
        return self.previous if self.previous is not None else model


def _same_weights(a: torch.nn.Module, b: torch.nn.Module) -> bool:
    import torch

    return all(torch.equal(x, y) for x, y in zip(a.parameters(), b.parameters(), strict=True))


class MinibatchKeyLost(FaultHooks):
    """A renamed config key (``ppo_mini_batches`` -> ``mini_batches``) is read under its old name and falls back
    to 1: one optimiser step per training step instead of the configured 4, the same learning rate."""

    name = "minibatch-key-lost"
    expected = {"verdict": "FAIL", "breached": [REWARDS, EVAL], "triage": "gradual"}

    def configure(self, config: Any) -> Any:
        return dataclasses.replace(config, mini_batches=1)


class MopdMinibatchKeyLost(MinibatchKeyLost):
    """MOPD's student trainer reads its mini-batch count under an old key and falls back to 1: one optimiser step
    per training step instead of 4; the teachers, routing and sampling are untouched."""

    name = "mopd-minibatch-key-lost"
    # a slower student leaves the distillation KL higher: a training-loop change, whatever breaches first
    expected = {"verdict": "FAIL", "breached": [DISTILL_KL], "triage": "gradual"}


class TrackerEma(FaultHooks):
    """The metric logger smooths every scalar with an exponential moving average before writing it (a dashboard
    smoothing option applied at write time): logged = A x previous logged + (1 - A) x value, per metric. Training
    is bitwise a clean run's; every logged curve lags."""

    name = "tracker-ema"
    arg_help = "A, the EMA's weight on the previous logged value, within (0, 1) (default 0.6)"
    default_arg = "0.6"
    # logging: the right next step is the logger, not the training
    expected = {"verdict": "FAIL", "breached": [REWARDS], "triage": "logging-units"}

    def magnitude(self) -> float:
        value = self.float_arg()
        if value >= 1:
            from autotest.errors import UsageError

            raise UsageError(f"--fault {self.name}:{self.arg}: A is a weight within (0, 1)")
        return value

    def wrap_tracker(self, tracker: Any) -> Any:
        return _EmaTracker(tracker, self.magnitude())


class _EmaTracker:
    def __init__(self, inner: Any, weight: float) -> None:
        self.inner, self.weight = inner, weight
        self.logged: dict[str, float] = {}

    def write(self, row: Mapping[str, Any]) -> None:
        out = dict(row)
        for key, value in row.items():
            if key == "step" or isinstance(value, bool) or not isinstance(value, (int, float)):
                continue
            previous = self.logged.get(key)
            out[key] = value if previous is None else self.weight * previous + (1 - self.weight) * value
            self.logged[key] = out[key]
        self.inner.write(out)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


class LengthFromShape(FaultHooks):
    """The mean response length is logged from the padded tensor's width (the batch's longest response) instead of
    the mask's per-row sums: ``response_len/mean`` equals ``response_len/max``. Training is a clean run's."""

    name = "length-from-shape"
    expected = {"verdict": "FAIL", "breached": [LENGTH], "triage": "logging-units"}

    def wrap_tracker(self, tracker: Any) -> Any:
        return _PaddedLengthTracker(tracker)


class _PaddedLengthTracker:
    def __init__(self, inner: Any) -> None:
        self.inner = inner

    def write(self, row: Mapping[str, Any]) -> None:
        widest = row.get("response/response_len/max")
        self.inner.write(row if widest is None or LENGTH not in row else {**row, LENGTH: widest})

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


class RepeatShard(FaultHooks):
    """The distributed sampler's shard index never advances (``set_epoch`` / the rank offset is lost): every prompt
    of every step comes from shard 0, the lowest third of the targets; the others are replaced in turn by that
    shard's prompts of the same step. The model never trains on two thirds of the eval targets."""

    name = "repeat-shard"
    # written before the run as first-step, the one rule then that named the data; its first step is the golden's
    # (rewards near 0 on every target), and the evidence is a policy that scores higher on its training prompts
    # and lower on eval: the training-data rule, whose next step is the sampler
    expected = {"verdict": "FAIL", "breached": [REWARDS, EVAL], "triage": "training-data"}

    def on_prompts(self, prompts: list[Prompt], step: int) -> list[Prompt]:
        targets = sorted({p.target for p in prompts})
        low = set(targets[: max(1, len(targets) // 3)])
        shard = [p for p in prompts if p.target in low]
        if not shard:
            return prompts
        picks = iter(range(len(prompts)))
        return [p if p.target in low else shard[next(picks) % len(shard)] for p in prompts]


class RouteOffByOne(FaultHooks):
    """MOPD's router pairs each sample with the source of the sample before it (``zip(samples, sources[1:])``
    fixed the wrong way round): with two domains drawn at random, about half of the samples are scored by the
    other domain's teacher, and the trainer still books each under its own domain."""

    name = "route-off-by-one"
    expected = {"verdict": "FAIL", "breached": [DISTILL_KL], "triage": "teacher-path"}

    def route_sources(self, sources: Sequence[str], step: int) -> list[str]:
        return list(sources[-1:]) + list(sources[:-1])


UNSEEN_REGRESSIONS: tuple[type[FaultHooks], ...] = (
    SyncLastBucket, StaleOldLogprobs, EosBanned, EvalLags, MinibatchKeyLost, TrackerEma, LengthFromShape,
    RepeatShard, RouteOffByOne, MopdMinibatchKeyLost,
)
#: the ones tiny MOPD runs (in its training process)
UNSEEN_MOPD = ("route-off-by-one", "mopd-minibatch-key-lost")
