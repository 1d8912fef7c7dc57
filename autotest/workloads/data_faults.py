"""Faults in what the trainer is fed, never in how it trains: the data loader repeats prompts, the mix of sources
changes (issue 44). The run logs its prompts' composition per step (:mod:`.data_metrics`), so the harness can name
the data metric that moved. Registered in :mod:`autotest.workloads.faults` beside the others.

| fault | effect | verdict | breached | triage |
|---|---|---|---|---|
| ``prompts-repeated[:N]`` | every prompt of a step is handed over N (8) times: the step trains on 1/N as many distinct prompts | FAIL | rewards, eval | training-data (``data composition``: repeated prompts) |
| ``source-mix[:K]`` | from step K (16) every fourth prompt comes from ``digit_product``, a source the run never trained on | FAIL | rewards | training-data (``data composition``: the sources' counts) |

Both act on the prompts after they are drawn (``FaultHooks.on_prompts``), draw nothing themselves, and leave the
run's random streams as they are.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from autotest.errors import UsageError
from autotest.workloads.fault_hooks import EVAL, REWARDS, FaultHooks

if TYPE_CHECKING:
    from autotest.workloads.tasks import Prompt

#: the triage rule that names other training data (autotest.judge.triage)
TRAINING_DATA = "training-data"
#: the source ``source-mix`` mixes in (a task of autotest.workloads.tasks the GRPO run does not train on)
MIXED_SOURCE = "digit_product"
#: every MIX_EVERY-th prompt is replaced from step K on
MIX_EVERY = 4


class PromptsRepeated(FaultHooks):
    """The data loader hands over every prompt of a step N times: it takes 1/N of the step's prompts and repeats each
    one (a ``repeat`` or an ``n``-times expansion applied at the prompt level as well as the sample level), so the
    step holds 1/N as many distinct prompts, each with N times the samples."""

    name = "prompts-repeated"
    arg_help = "N, how many times each prompt is handed over (default 8)"
    default_arg = "8"
    expected = {"verdict": "FAIL", "breached": [REWARDS, EVAL], "triage": TRAINING_DATA,
                "composition": "data/repeated_prompts",
                "measured": "seed 0: N = 8 logs 56 repeats of 64 at every step, rewards 0.81 and eval 0.81 at step 45 "
                "(golden 0.91, 0.92); N = 2 (the issue's case: 32 repeats) and N = 4 pass every accuracy gate "
                "(0.91 and 0.90 at step 45): 32 or 16 draws a step still hold most of the 9 targets"}

    def magnitude(self) -> int:
        """N, checked (``make_fault`` calls it up front)."""
        value = int(self.arg) if (self.arg or "").isdigit() else 0
        if value < 1:
            raise UsageError(f"--fault {self.name}: N must be a positive integer, e.g. {self.name}:2 "
                             f"(got {self.arg!r})")
        return value

    def on_prompts(self, prompts: list[Prompt], step: int) -> list[Prompt]:
        times = self.magnitude()
        kept = prompts[: -(-len(prompts) // times)]
        return [p for p in kept for _ in range(times)][: len(prompts)]


class SourceMix(FaultHooks):
    """From step K on, every fourth prompt comes from another source (``digit_product``): a data mixture whose weights
    are read again at an epoch boundary from a config that mixes that dataset in. The prompts replaced keep their
    place; each becomes the other task's prompt for a target chosen by the one it replaces."""

    name = "source-mix"
    arg_help = "K, the first step with the changed mix (default 16)"
    default_arg = "16"
    expected = {"verdict": "FAIL", "breached": [REWARDS], "triage": TRAINING_DATA,
                "composition": f"data/source/{MIXED_SOURCE}",
                "measured": "seed 0: data/source/digit_product 16 from step 16 (0 before), rewards 0.75 at step 45 "
                "(golden 0.91), eval 0.91: the digit_product prompts score ~0 and leave digit_sum's learning as it was"}

    def on_prompts(self, prompts: list[Prompt], step: int) -> list[Prompt]:
        from autotest.workloads.tasks import get_task

        if step < self.int_arg():
            return prompts
        other = get_task(MIXED_SOURCE)
        targets = other.train_targets
        return [other.prompt(targets[p.target % len(targets)]) if i % MIX_EVERY == MIX_EVERY - 1 else p
                for i, p in enumerate(prompts)]


DATA_FAULTS = (PromptsRepeated, SourceMix)
