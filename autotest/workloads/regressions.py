"""Realistic code regressions for the detection benchmark, kept apart from the fault catalogue.

The fault catalogue (``faults.FAULTS``) tests the verdict plumbing with breakages that any
check must catch. These are the mid-size changes a real merge brings in, graded by an ARG from
barely visible to obvious; ``benchmarks/detection`` measures how often the gates catch them.
They use the same hook points and the same ``--fault NAME[:ARG]`` switch (``make_fault`` looks
here after the catalogue), so the training code path is untouched without one.

| regression | workload | what the code change does |
|---|---|---|
| ``lr-scale[:F]`` | GRPO, MOPD | the optimiser's learning rate is F (0.5) x the configured one (a changed default) |
| ``lr-decay[:R]`` | GRPO | the schedule decays to R (1.0: no decay) x lr instead of 0.1 x lr (a lost decay) |
| ``grad-clip[:C]`` | GRPO | gradients are clipped at norm C (0.3) instead of 1.0 |
| ``adv-std-eps[:E]`` | GRPO | the advantage's std normalisation adds E (0.5) to the std instead of 1e-6 |
| ``clip-range[:E]`` | GRPO | the PPO ratio clip range is E (0.05) instead of 0.2 |
| ``entropy-scale[:F]`` | GRPO | the entropy bonus weighs F (10) x the configured one |
| ``judge-drops[:F]`` | GRPO, MOPD | the training judge scores a fraction F (0.3) of correct answers 0 |
| ``length-penalty[:P]`` | GRPO, MOPD | the training reward loses P (0.01) per response token (a shaping term left on) |
| ``sampling-temperature[:T]`` | GRPO | the rollout samples, and reports log-probs, at temperature T (1.3) |
| ``top-k[:K]`` | GRPO | the rollout samples from the K (8) likeliest tokens only and reports those log-probs |
| ``stale-eval`` | GRPO | the eval engine keeps its step-0 weights (its refresh before eval is lost) |
| ``eval-temperature[:T]`` | GRPO | the sampled eval runs at temperature T (1.5) instead of the rollout's 1 |
| ``undersample[:F]`` | GRPO, MOPD | the sampler drops a fraction F (0.5) of one shard's prompts, refilling with duplicates |
| ``misroute[:F]`` | MOPD | a fraction F (0.2) of samples is scored by another domain's teacher |
| ``teacher-temperature[:T]`` | MOPD | the teacher servers return log-probs at temperature T (1.2) |

The regressions around the model's paths (``trainer-gather-shift``, ``rope-theta``, ``top-p``,
``tracker-twice``, ``judge-scale``, ``step-offset``) live in :mod:`.regressions_paths` and are registered here.
"""

from __future__ import annotations

import dataclasses
import random
import zlib
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, ClassVar

from autotest.workloads.fault_hooks import EVAL, MISMATCH, REWARDS, FaultHooks
from autotest.workloads.metrics import group_advantages
from autotest.workloads.regressions_paths import PATH_REGRESSIONS
from autotest.workloads.regressions_unseen import UNSEEN_MOPD, UNSEEN_REGRESSIONS

if TYPE_CHECKING:
    import torch

    from autotest.workloads.tasks import Judge, Prompt


class _Graded(FaultHooks):
    """A regression whose ARG is a magnitude in (0, 1] (a fraction) or a positive factor."""

    fraction: ClassVar[bool] = True

    def magnitude(self) -> float:
        value = self.float_arg()
        if self.fraction and value > 1:
            from autotest.errors import UsageError

            raise UsageError(f"--fault {self.name}:{self.arg}: ARG is a fraction within (0, 1]")
        return value


class LrScale(_Graded):
    """The optimiser runs at F x the configured learning rate (a changed default or a units slip)."""

    name = "lr-scale"
    arg_help = "F, the factor on the learning rate (default 0.5)"
    default_arg = "0.5"
    fraction = False
    # measured (benchmarks/detection): GRPO x0.85 is below the MDE; MOPD x0.7 passes, x0.5 is caught on 2 of 3 seeds
    expected = {"verdict": "FAIL", "breached": [REWARDS, EVAL], "triage": "gradual"}

    def configure(self, config: Any) -> Any:
        return dataclasses.replace(config, lr=config.lr * self.magnitude())


class LrDecay(_Graded):
    """The linear schedule decays to R x lr at the last step instead of the configured 0.1 x lr.

    Models a lost or changed decay (R = 1 is a constant learning rate): the late policy keeps moving,
    so late-phase rewards and entropy drift while the early phase is bitwise that of a clean run.
    """

    name = "lr-decay"
    arg_help = "R, the final learning rate as a fraction of lr (default 1.0: no decay)"
    default_arg = "1.0"
    # the final reward rises (+0.06); where only eval breaches, triage says eval-path
    expected = {"verdict": "FAIL", "breached": [EVAL], "triage": "gradual or eval-path"}

    def configure(self, config: Any) -> Any:
        return dataclasses.replace(config, final_lr_ratio=self.magnitude())


class GradClip(_Graded):
    """Gradients are clipped at norm C instead of 1.0 (a changed default): smaller steps whenever the norm
    exceeds C, which is most of the early, high-advantage steps."""

    name = "grad-clip"
    arg_help = "C, the gradient-clipping norm (default 0.3; the trainer's is 1.0)"
    default_arg = "0.3"
    fraction = False
    # measured: at 0.3 the final reward moves -0.00..-0.09 and passes (below the MDE); 0.1 fails 2 of 3 seeds
    expected = {"verdict": "PASS", "breached": [], "triage": ""}

    def configure(self, config: Any) -> Any:
        return dataclasses.replace(config, max_grad_norm=self.magnitude())


class AdvStdEps(_Graded):
    """The advantage normalisation divides by (group std + E) instead of (std + 1e-6).

    A binary reward's group std is at most ~0.53, so E = 0.5 roughly halves every advantage
    (and more for the rare-success groups that matter early): a slower, re-weighted update.
    """

    name = "adv-std-eps"
    arg_help = "E, the epsilon added to the group std (default 0.5; the trainer's is 1e-6)"
    default_arg = "0.5"
    fraction = False
    # measured: the final reward moves 0.00..-0.05 at E = 0.5, below the MDE of the late-rewards gate
    expected = {"verdict": "PASS", "breached": [], "triage": ""}

    def on_advantages(self, advantages: torch.Tensor, rewards: torch.Tensor, group_size: int) -> torch.Tensor:
        return group_advantages(rewards, group_size, eps=self.magnitude())


class ClipRange(_Graded):
    """The PPO ratio clip range is E instead of 0.2 (a config key renamed, its default taken)."""

    name = "clip-range"
    arg_help = "E, the PPO clip range (default 0.05; the trainer's is 0.2)"
    default_arg = "0.05"
    expected = {"verdict": "FAIL", "breached": [REWARDS], "triage": "gradual"}

    def configure(self, config: Any) -> Any:
        return dataclasses.replace(config, clip_eps=self.magnitude())


class EntropyScale(_Graded):
    """The entropy bonus weighs F x the configured coefficient (e.g. a sum where a mean was meant)."""

    name = "entropy-scale"
    arg_help = "F, the factor on the entropy coefficient (default 10)"
    default_arg = "10"
    fraction = False
    # measured: x10 drops the final reward by 0.56-0.79 (FAIL); x3 by 0.00-0.07, caught on 1 of 3 seeds
    expected = {"verdict": "FAIL", "breached": ["entropy/mean", REWARDS], "triage": "gradual"}

    def configure(self, config: Any) -> Any:
        return dataclasses.replace(config, entropy_coef=config.entropy_coef * self.magnitude())


class JudgeDrops(_Graded):
    """The training judge scores a fraction F of the correct answers 0 (e.g. a stricter answer parser).

    Which answers are dropped is a fixed function of (seed, target, response), so a run is
    reproducible; eval grades with the task's own judge.
    """

    name = "judge-drops"
    arg_help = "F, the fraction of correct answers scored 0 (default 0.3)"
    default_arg = "0.3"
    # in GRPO the judge drives the update, so its drift reads as the training loop; in MOPD it does not
    expected = {"verdict": "FAIL", "breached": [REWARDS], "triage": "gradual (GRPO), rewards-only (MOPD)"}

    def wrap_judge(self, judge: Judge) -> Judge:
        fraction, seed = self.magnitude(), self.seed

        def dropping(target: Any, response: Sequence[int]) -> float:
            score = judge(target, response)
            key = zlib.crc32(repr((seed, target, list(response))).encode())
            return 0.0 if score > 0 and random.Random(key).random() < fraction else score

        return dropping


class LengthPenalty(_Graded):
    """The training reward loses P per response token (``<eos>`` included): a shaping term left on.

    Logged rewards drop by about P x the mean response length at once, and the update pushes
    towards shorter answers; eval grades with the task's own judge.
    """

    name = "length-penalty"
    arg_help = "P, the reward lost per response token (default 0.01)"
    default_arg = "0.01"
    # GRPO: any P collapses training (group normalisation turns length differences in all-wrong groups into
    # +-1 advantages); MOPD: rewards never enter the distillation update and P = 0.01 passes
    expected = {"verdict": "FAIL (GRPO), PASS (MOPD)", "breached": [REWARDS], "triage": "rewards-only"}

    def wrap_judge(self, judge: Judge) -> Judge:
        penalty = self.magnitude()

        def penalised(target: Any, response: Sequence[int]) -> float:
            return judge(target, response) - penalty * len(response)

        return penalised


class StaleEval(FaultHooks):
    """Eval runs on the weights the rollout engine had at step 0: its refresh before eval is lost.

    Training (sampling, rewards, updates, k3) is bitwise that of a clean run; only eval moves.
    """

    name = "stale-eval"
    expected = {"verdict": "FAIL", "breached": [EVAL], "triage": "eval-path"}

    def __init__(self, arg: str | None, seed: int) -> None:
        super().__init__(arg, seed)
        self.frozen: torch.nn.Module | None = None

    def eval_model(self, model: torch.nn.Module) -> torch.nn.Module:
        import copy

        if self.frozen is None:  # the first eval is step 0, right after the initial sync
            self.frozen = copy.deepcopy(model)
        return self.frozen


class SamplingTemperature(_Graded):
    """The rollout samples, and reports the log-probs of its samples, at temperature T instead of 1.

    The model's modules compute exactly what the trainer's do; the divergence is in sampling.
    """

    name = "sampling-temperature"
    arg_help = "T, the rollout's sampling temperature (default 1.3; the trainer assumes 1)"
    default_arg = "1.3"
    fraction = False
    expected = {"verdict": "FAIL", "breached": [MISMATCH], "triage": "mismatch",
                "consistency": {"bucket": "after_model"}}

    def sampling_logits(self, logits: torch.Tensor) -> torch.Tensor:
        return logits / self.magnitude()


class TopK(FaultHooks):
    """The rollout samples from the K likeliest tokens only (a logits processor left on) and reports the
    log-probs of that truncated distribution; the trainer recomputes the full one."""

    name = "top-k"
    arg_help = "K, the tokens kept per sampling step (default 8; the vocabulary has 16)"
    default_arg = "8"
    expected = {"verdict": "FAIL", "breached": [MISMATCH], "triage": "mismatch",
                "consistency": {"bucket": "after_model"}}

    def magnitude(self) -> int:
        if not (self.arg or "").isdigit() or int(self.arg or "0") < 1:
            from autotest.errors import UsageError

            raise UsageError(f"--fault {self.name}: ARG is the number of tokens kept, e.g. {self.name}:8 "
                             f"(got {self.arg!r})")
        return int(self.arg or "0")

    def sampling_logits(self, logits: torch.Tensor) -> torch.Tensor:
        import torch

        keep = min(self.magnitude(), logits.shape[-1])
        cutoff = logits.topk(keep, dim=-1).values[..., -1:]
        return torch.where(logits < cutoff, float("-inf"), logits)


class EvalTemperature(_Graded):
    """The sampled eval draws at temperature T instead of the rollout's 1 (an eval config that lost its
    temperature key). Training is bitwise that of a clean run; only eval moves."""

    name = "eval-temperature"
    arg_help = "T, the sampled eval's temperature (default 1.5)"
    default_arg = "1.5"
    fraction = False
    expected = {"verdict": "FAIL", "breached": [EVAL], "triage": "eval-path"}

    def eval_logits(self, logits: torch.Tensor) -> torch.Tensor:
        return logits / self.magnitude()


class Undersample(_Graded):
    """The sampler drops a fraction F of one shard's prompts and refills the batch with duplicates of
    the other prompts of the same step (a filter or sharding bug).

    The shard is the first data source by name when a batch mixes several (MOPD: ``digit_product``),
    else the top third of the targets (GRPO: ``digit_sum`` 7-9). Which prompts go is a fixed
    function of (seed, step), drawn from a stream of its own: the run's own random streams are untouched.
    """

    name = "undersample"
    arg_help = "F, the fraction of the shard's prompts dropped (default 0.5)"
    default_arg = "0.5"
    # measured at 0.5: MOPD 3 of 3 seeds (product teacher's KL); GRPO 1 of 3 (eval); GRPO at 1.0 3 of 3 (eval)
    expected = {"verdict": "FAIL", "breached": [EVAL], "triage": "eval-path (GRPO), teacher-path (MOPD)"}

    def on_prompts(self, prompts: list[Prompt], step: int) -> list[Prompt]:
        in_shard = shard_of(prompts)
        others = [p for p, inside in zip(prompts, in_shard, strict=True) if not inside]
        if not others:
            return prompts
        rng = random.Random(self.seed * 100_003 + step + 7_919)
        fraction = self.magnitude()
        return [others[rng.randrange(len(others))] if inside and rng.random() < fraction else p
                for p, inside in zip(prompts, in_shard, strict=True)]


def shard_of(prompts: Sequence[Prompt]) -> list[bool]:
    """Which prompts are in the under-sampled shard (see ``Undersample``)."""
    sources = sorted({p.data_source for p in prompts})
    if len(sources) > 1:
        return [p.data_source == sources[0] for p in prompts]
    targets = sorted({p.target for p in prompts})
    top = set(targets[len(targets) - max(1, len(targets) // 3):])
    return [p.target in top for p in prompts]


class Misroute(_Graded):
    """A fraction F of the samples is sent to the other domain's teacher (a routing-table bug).

    The trainer still books them under their own domain, as a real router bug would.
    """

    name = "misroute"
    arg_help = "F, the fraction of samples routed to the wrong teacher (default 0.2)"
    default_arg = "0.2"
    expected = {"verdict": "FAIL", "breached": ["distillation/reduced_distillation_kl"], "triage": "teacher-path"}

    def route_sources(self, sources: Sequence[str], step: int) -> list[str]:
        domains = sorted(set(sources))
        if len(domains) < 2:
            return list(sources)
        rng = random.Random(self.seed * 100_003 + step)
        fraction = self.magnitude()
        return [domains[(domains.index(s) + 1) % len(domains)] if rng.random() < fraction else s for s in sources]


class TeacherTemperature(_Graded):
    """Every teacher server returns log-probs of its logits over T (a serving config's temperature,
    meant for sampling, applied to scoring). The student distils a flatter (T > 1) target."""

    name = "teacher-temperature"
    arg_help = "T, the teachers' scoring temperature (default 1.2)"
    default_arg = "1.2"
    fraction = False
    expected = {"verdict": "FAIL", "breached": ["distillation/reduced_distillation_kl"], "triage": "teacher-path"}

    def teacher_server_args(self) -> list[str]:
        return ["--temperature", repr(self.magnitude())]


REGRESSIONS: dict[str, type[FaultHooks]] = {
    cls.name: cls for cls in (
        LrScale, LrDecay, GradClip, AdvStdEps, ClipRange, EntropyScale, JudgeDrops, LengthPenalty,
        SamplingTemperature, TopK, StaleEval, EvalTemperature, Undersample, Misroute, TeacherTemperature,
        *PATH_REGRESSIONS, *UNSEEN_REGRESSIONS,
    )
}  # fmt: skip
#: the regressions tiny MOPD accepts (teacher-temperature acts in its launcher, the rest in training)
MOPD_REGRESSIONS = ("lr-scale", "judge-drops", "length-penalty", "undersample", "misroute", "teacher-temperature",
                    *UNSEEN_MOPD)


def listed(names: tuple[str, ...] | None = None) -> list[dict[str, Any]]:
    """Regressions as ``--list-faults`` entries (kind "regression"), so the harness accepts them too."""
    return [{"name": cls.name, "kind": "regression", "description": " ".join((cls.__doc__ or "").split()),
             "expected": dict(cls.expected)}
            for name, cls in REGRESSIONS.items() if names is None or name in names]
