"""Verifiable digit tasks for the embedded workloads: prompts, judge and eval set.

A prompt is ``<bos> MARKER t t`` where ``tt`` is a two-digit target; the response (digits
followed by ``<eos>``) starts right after the target. The judge (reward function) gives
1.0 when the response is well-formed (at least one digit, only digits, ends with
``<eos>``) and its digits meet the task's condition for the target, else 0.0.

| task          | data_source       | marker | targets                              | digits must    |
|---------------|-------------------|--------|--------------------------------------|----------------|
| digit_sum     | ``digit_sum``     | ``S``  | 1..9                                 | sum to it      |
| digit_product | ``digit_product`` | ``P``  | 10, 12, 14, 15, 16, 18, 20, 21, 24   | multiply to it |

``digit_sum`` is the GRPO task: a random-init model starts near 0.01 reward and reaches
~0.9 sampled reward and 1.0 greedy eval accuracy in 45 steps (64 prompts x 8 samples). Wider target ranges learned too slowly to
saturate in 45 steps, and a saturated curve is what keeps run-to-run noise small.
``digit_product`` is a second domain (for multi-teacher distillation): every answer
needs two or more digits, so ``digit_sum``'s single-digit answers never solve it; GRPO
from a random init does not learn it within 45 steps (reward stays ~0.01), so the MOPD
workload starts from fine-tuned checkpoints.

Why the eval set has few distinct items, and how eval still resolves a few points: a prompt is
a marker and a two-digit target, and a target outside what the model trains on would measure
generalisation no tiny model has, so each task has exactly one eval prompt per training target
(9 each). Graded greedily these saturate (``digit_sum`` reaches 1.0 by step 30: a 9-item
accuracy cannot see a 0.05 change, its binomial floor is 0.21). The workloads therefore report
pass@1 from sampling: every eval prompt is sampled n times (32) at the rollout temperature and
the mean reward over the 9 x 32 = 288 samples is the eval metric. That measures the sampled
policy, which stays below saturation (~0.9 at the end), with a binomial floor of
2 x sqrt(p(1 - p) / 288) ~ 0.035 instead of 0.21; greedy accuracy is kept as a reference.
A new task is one more ``DigitTask`` in ``TASKS``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from autotest.errors import UsageError
from autotest.workloads.tiny_lm import DigitTokenizer

if TYPE_CHECKING:
    import torch

#: A judge maps (target, response token ids) to a reward in [0, 1].
Judge = Callable[[int, Sequence[int]], float]


@dataclass(frozen=True)
class Prompt:
    """One prompt of one task."""

    data_source: str
    """Name of the task (dataset) the prompt comes from."""
    target: int
    """The number the response must reach."""
    token_ids: tuple[int, ...]
    """Encoded prompt, ``<bos> MARKER t t``."""


def response_digits(response_ids: Sequence[int], tokenizer: DigitTokenizer) -> list[int] | None:
    """The digits of a well-formed response (digits then ``<eos>``), else None."""
    if tokenizer.eos_id not in response_ids:
        return None
    body = list(response_ids[: list(response_ids).index(tokenizer.eos_id)])
    if not body or not all(tokenizer.is_digit(t) for t in body):
        return None
    return body


@dataclass(frozen=True)
class DigitTask:
    """A verifiable task over digit responses."""

    data_source: str
    """Task and dataset name, written as ``data_source`` in logs."""
    marker: str
    """Vocabulary token that tells the model which task a prompt is."""
    train_targets: tuple[int, ...]
    """Targets sampled (uniformly) for training prompts."""
    eval_targets: tuple[int, ...]
    """The fixed eval prompt set, one prompt per target (each sampled n times for pass@1)."""
    combine: Callable[[Sequence[int]], int]
    """How the response digits are reduced before comparing with the target."""

    def prompt(self, target: int, tokenizer: DigitTokenizer | None = None) -> Prompt:
        """The prompt for ``target`` (0..99)."""
        tok = tokenizer or DigitTokenizer()
        return Prompt(self.data_source, target, tuple(tok.encode(f"<bos>{self.marker}{target:02d}")))

    def judge(self, target: int, response_ids: Sequence[int]) -> float:
        """Reward: 1.0 for a well-formed response whose digits reach ``target``, else 0.0."""
        digits = response_digits(response_ids, DigitTokenizer())
        return 1.0 if digits is not None and self.combine(digits) == target else 0.0

    def sample_prompts(self, count: int, generator: torch.Generator) -> list[Prompt]:
        """``count`` training prompts with targets drawn uniformly by ``generator``."""
        import torch

        idx = torch.randint(len(self.train_targets), (count,), generator=generator).tolist()
        return [self.prompt(self.train_targets[i]) for i in idx]

    def eval_prompts(self) -> list[Prompt]:
        """The fixed eval prompt set."""
        return [self.prompt(t) for t in self.eval_targets]


def _product_targets(low: int, high: int) -> tuple[int, ...]:
    """Targets in [low, high] that are products of digits (no prime factor above 7)."""

    def smooth(n: int) -> bool:
        for p in (2, 3, 5, 7):
            while n % p == 0:
                n //= p
        return n == 1

    return tuple(n for n in range(low, high + 1) if smooth(n))


TASKS: dict[str, DigitTask] = {
    "digit_sum": DigitTask(
        data_source="digit_sum",
        marker="S",
        train_targets=tuple(range(1, 10)),
        eval_targets=tuple(range(1, 10)),
        combine=sum,
    ),
    "digit_product": DigitTask(
        data_source="digit_product",
        marker="P",
        train_targets=_product_targets(10, 24),
        eval_targets=_product_targets(10, 24),
        combine=math.prod,
    ),
}


def get_task(name: str) -> DigitTask:
    """The task registered as ``name``; a ``UsageError`` lists the known names otherwise."""
    if name not in TASKS:
        raise UsageError(f"--task: unknown task {name!r}; choose one of {', '.join(sorted(TASKS))}")
    return TASKS[name]
