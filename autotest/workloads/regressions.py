"""Realistic code regressions for the detection benchmark, kept apart from the fault catalogue.

The fault catalogue (``faults.FAULTS``) tests the verdict plumbing with breakages that any
check must catch. These are the mid-size changes a real merge brings in, graded by an ARG from
barely visible to obvious; ``benchmarks/detection`` measures how often the gates catch them.
They use the same hook points and the same ``--fault NAME[:ARG]`` switch (``make_fault`` looks
here after the catalogue), so the training code path is untouched without one.

| regression | workload | what the code change does |
|---|---|---|
| ``lr-scale[:F]`` | GRPO | the optimiser's learning rate is F (0.5) x the configured one (a changed default) |
| ``judge-drops[:F]`` | GRPO, MOPD | the training judge scores a fraction F (0.3) of correct answers 0 |
| ``stale-eval`` | GRPO | the eval engine keeps its step-0 weights (its refresh before eval is lost) |
| ``sampling-temperature[:T]`` | GRPO | the rollout samples, and reports log-probs, at temperature T (1.3) |
| ``misroute[:F]`` | MOPD | a fraction F (0.2) of samples is scored by another domain's teacher |
"""

from __future__ import annotations

import dataclasses
import random
import zlib
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, ClassVar

from autotest.workloads.fault_hooks import EVAL, MISMATCH, REWARDS, FaultHooks

if TYPE_CHECKING:
    import torch

    from autotest.workloads.tasks import Judge


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
    expected = {"verdict": "FAIL", "breached": [REWARDS], "triage": "gradual"}

    def configure(self, config: Any) -> Any:
        return dataclasses.replace(config, lr=config.lr * self.magnitude())


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


REGRESSIONS: dict[str, type[FaultHooks]] = {
    cls.name: cls for cls in (LrScale, JudgeDrops, StaleEval, SamplingTemperature, Misroute)
}
#: the regressions tiny MOPD's training process accepts
MOPD_REGRESSIONS = ("judge-drops", "misroute")


def listed(names: tuple[str, ...] | None = None) -> list[dict[str, Any]]:
    """Regressions as ``--list-faults`` entries (kind "regression"), so the harness accepts them too."""
    return [{"name": cls.name, "kind": "regression", "description": " ".join((cls.__doc__ or "").split()),
             "expected": dict(cls.expected)}
            for name, cls in REGRESSIONS.items() if names is None or name in names]
