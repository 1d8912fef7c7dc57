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
| ``seq-mean-loss`` | GRPO | trainer | the loss aggregation is a mean over responses of each one's token mean, not a token mean over the mini-batch |
| ``entropy-from-next-step`` | GRPO | logging | the tracker holds each step's row until the next and merges the next step's entropy into it |
| ``prompts-drawn-twice`` | GRPO | data | an eval loader's repeat (each prompt twice) applied to training: half the distinct prompts per step |
| ``sync-half-buffer`` | GRPO | weight sync | every other sync stages into a buffer sized for half the parameters: the rest stay one step stale |
| ``sync-swap-before-copy`` | GRPO | weight sync | the rollout's double buffer swaps before it copies: it samples with the weights one version behind |
| ``resume-loader-state-lost`` | GRPO | checkpoint | a resumed run restores every RNG but the data loader's: its prompts start again from the seed |
| ``teacher-keys-renamed[:PREFIX]`` | MOPD | teacher | every teacher server loads a checkpoint whose keys under PREFIX were renamed: those weights are fresh |

Issue 44 item 7 added the last seven, each ``expected`` written and committed before any run of it. Besides the
primary rule (``triage``), ``expected`` may name ``triage_also`` (rules whose next step is the same one: scored
right too), ``names`` (a phrase the explanation must contain for a right score: the period, the versions behind,
the cause; without it a right rule scores uncertain), ``not_names`` (phrases that name several causes at once:
scored uncertain) and ``ab`` (the A/B verdict of head against base on the same seeds, with the kind of next step
its line must lead with).
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


class SeqMeanLoss(FaultHooks):
    """The policy loss's aggregation flipped from a token mean over the mini-batch to a sequence mean (each
    response's token mean, averaged over the responses: ``loss_agg_mode`` token-mean -> seq-mean-token-mean, a
    default changed in a config refactor): a short response's tokens weigh more than a long one's, so the update
    no longer pushes every token alike and the length the policy settles at moves. A training change: every logged
    metric is the trained policy's own. (The mini-batch's responses are counted as micro-batch rows x micro-batches:
    the case's micro-batches are equal.)"""

    name = "seq-mean-loss"
    # written before the run: the response length leaves the golden first (its tokens are what the aggregation
    # reweighs), entropy and the scores follow through the update; the next step is the loss, never the logger.
    # gradual (the training loop: loss, advantage, KL, sync) names the same place, less narrowly
    expected = {"verdict": "FAIL", "breached": [LENGTH], "triage": "loss-term", "triage_also": ["gradual"]}

    def loss_normaliser(self, num_tokens: torch.Tensor, micro_mask: torch.Tensor, micro_batches: int) -> torch.Tensor:
        responses = micro_mask.shape[0] * micro_batches
        return micro_mask.sum(dim=1, keepdim=True).clamp(min=1) * responses


class EntropyFromNextStep(FaultHooks):
    """The tracker holds each step's rows until the next step's summary arrives (to fill a field measured across
    the step boundary) and merges the new summary's trainer metrics into the held row by mistake: ``entropy/mean``
    of step k is written with step k+1's value. The run's last row, flushed at close, keeps its own. Training and
    every other metric are a clean run's; a resumed process flushes its own last step's entropy where the
    uninterrupted run wrote the step after's."""

    name = "entropy-from-next-step"
    # written before the run: a one-step shift of the entropy is below the golden gates' noise; the resume gate
    # sees it at the last resumed step alone with every other metric bitwise equal: logging across the resume. A
    # golden breach read as logging (logging-units) is the same next step. A/B (same seeds, clean base): entropy
    # moves alone while the other paired metrics are bitwise equal: logging
    expected = {"verdict": "FAIL", "breached": [ENTROPY], "triage": "resume-logging", "triage_also": ["logging-units"],
                "ab": {"verdict": "FAIL", "next_step": "logging"}}

    def wrap_tracker(self, tracker: Any) -> Any:
        return _NextStepTracker(tracker, ENTROPY)


class _NextStepTracker:
    """Holds the rows from one row carrying ``metric`` to the next such row, then writes them in order with the
    first one's ``metric`` replaced by the newer row's value; ``close`` writes what it holds as it is."""

    def __init__(self, inner: Any, metric: str) -> None:
        self.inner, self.metric = inner, metric
        self.held: list[Mapping[str, Any]] = []

    def write(self, row: Mapping[str, Any]) -> None:
        if self.metric in row and self.held:
            first, *rest = self.held
            self.held = []
            self.inner.write({**first, self.metric: row[self.metric]})
            for held in rest:
                self.inner.write(held)
        if self.metric in row or self.held:
            self.held.append(row)
        else:
            self.inner.write(row)

    def close(self) -> None:
        for held in self.held:
            self.inner.write(held)
        self.held = []
        self.inner.close()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


class PromptsDrawnTwice(FaultHooks):
    """A ``repeat`` meant for the eval loader (each prompt twice, for pass@2) is applied to the training loader too,
    after its batch is cut to size: each step trains on the first half of the prompts it drew, each prompt twice in
    a row (two groups of samples each), so half as many distinct prompts as a clean run. The prompt stream, the
    batch size and everything after the loader are a clean run's."""

    name = "prompts-drawn-twice"
    # written before the run: fewer distinct prompts per step is other training data: the next step is what the
    # trainer is fed (the loader, its repeat and deduplication), not the sampler's settings nor the loss. A/B: the
    # training changes (the data): data
    expected = {"verdict": "FAIL", "breached": [REWARDS], "triage": "training-data",
                "ab": {"verdict": "FAIL", "next_step": "data"}}

    def on_prompts(self, prompts: list[Prompt], step: int) -> list[Prompt]:
        half = prompts[: (len(prompts) + 1) // 2]
        return [p for p in half for _ in range(2)][: len(prompts)]


class SyncHalfBuffer(FaultHooks):
    """The weight sync stages its tensors in two buffers used in turn; the second was sized from half the parameter
    count (computed once, before the buffers were split): every other sync (after steps 1, 3, 5, ...) sends only the
    parameters that fit, in state-dict order, and the later ones keep the weights of the sync before. Every even
    step's rollout samples with the later half of the model one step stale; the odd steps are clean."""

    name = "sync-half-buffer"
    # written before the run: the mismatch metrics breach on the even steps only (a median reads a clean step); the
    # right next step is the weight sync, with the period: every 2nd step
    expected = {"verdict": "FAIL", "breached": [MISMATCH], "triage": INCONSISTENCY, "period": 2,
                "names": "every 2nd step"}

    def on_sync(self, state_dict: Mapping[str, torch.Tensor], version: int) -> Mapping[str, torch.Tensor]:
        if version % 2 == 0 or not state_dict:
            return state_dict
        room = sum(t.numel() for t in state_dict.values()) // 2
        staged: dict[str, torch.Tensor] = {}
        for key, tensor in state_dict.items():
            if tensor.numel() > room:
                break
            staged[key], room = tensor, room - tensor.numel()
        return staged


class SyncSwapBeforeCopy(FaultHooks):
    """The rollout engine double-buffers its weights and swaps the buffers before it copies a sync in, not after:
    each sync fills the back buffer and brings forward the one the sync before filled (the initial sync fills both).
    From step 2 on, every rollout samples with the weights one version behind the trainer's, at every step; the
    engine's version counter follows the buffer it samples with."""

    name = "sync-swap-before-copy"
    # written before the run: mismatch at every step from step 2; the consistency job pins a parameter the rollout
    # holds from the version before, on the rollout side, and names it one version behind
    expected = {"verdict": "FAIL", "breached": [MISMATCH], "triage": INCONSISTENCY,
                "consistency": {"bucket": "parameter_sync_mismatch", "side": "rollout"},
                "names": "1 version(s) behind"}

    def __init__(self, arg: str | None, seed: int) -> None:
        super().__init__(arg, seed)
        self.back: dict[str, torch.Tensor] | None = None

    def on_sync(self, state_dict: Mapping[str, torch.Tensor], version: int) -> Mapping[str, torch.Tensor]:
        front, self.back = self.back, {k: v.detach().clone() for k, v in state_dict.items()}
        return state_dict if version == 0 or front is None else front

    def held_version(self, version: int) -> int:
        return max(version - 1, 0)


class ResumePromptOrder(FaultHooks):
    """The checkpoint keeps the rollout's sampling RNG, the trainer's state and the step, but the data loader's
    position is never restored (its sampler state is not among what the driver loads back): a resumed run draws its
    prompts from the seed's start again, while sampling and the weights continue as saved. The run that saves the
    checkpoint is a clean run's."""

    name = "resume-loader-state-lost"
    # written before the run: the resume gate fails from the first resumed step (other prompts, so other rewards and
    # lengths); the right next step is the data loader's position in the checkpoint, named alone: prompt order, not
    # "the RNG (prompt order or sampling)". A/B: the main run is a clean run's: PASS
    expected = {"verdict": "FAIL", "breached": [REWARDS], "triage": "resume", "names": "prompt order",
                "not_names": ["(prompt order or sampling)", "(prompt order, sampling)"], "ab": {"verdict": "PASS"}}

    def restored_parts(self, component: str, parts: tuple[str, ...]) -> tuple[str, ...]:
        return tuple(p for p in parts if not (component == "driver" and p == "rng"))


class TeacherKeysRenamed(FaultHooks):
    """A conversion script renamed the teacher checkpoints' keys under PREFIX (``model.layers.1.self_attn.``: the
    attention of the last layer, split from a fused projection); the servers' loader reports the old names missing
    and initialises them afresh, and every teacher server serves those weights untrained. The student, the routing
    and the sampling are untouched."""

    name = "teacher-keys-renamed"
    arg_help = "PREFIX, the parameters every teacher server loads afresh (default model.layers.1.self_attn.)"
    default_arg = "model.layers.1.self_attn."
    # written before the run: the teacher probe (answers recorded when the fixture was made, not the server's own
    # code) differs at its first probe, and the distillation KL moves at once: the teacher path
    expected = {"verdict": "FAIL", "breached": [DISTILL_KL, "distillation/teacher_probe/digit_sum_teacher"],
                "triage": "teacher-path"}

    def teacher_server_args(self) -> list[str]:
        return ["--missing-keys", self.arg or self.default_arg]


UNSEEN_REGRESSIONS: tuple[type[FaultHooks], ...] = (
    SyncLastBucket, StaleOldLogprobs, EosBanned, EvalLags, MinibatchKeyLost, TrackerEma, LengthFromShape,
    RepeatShard, RouteOffByOne, MopdMinibatchKeyLost,
    SeqMeanLoss, EntropyFromNextStep, PromptsDrawnTwice, SyncHalfBuffer, SyncSwapBeforeCopy, ResumePromptOrder,
    TeacherKeysRenamed,
)
#: the ones tiny MOPD runs (in its training process; the teacher servers take ``teacher_server_args``)
UNSEEN_MOPD = ("route-off-by-one", "mopd-minibatch-key-lost", "teacher-keys-renamed")
