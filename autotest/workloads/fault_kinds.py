"""The catalogue's faults, one ``FaultHooks`` subclass each (the table and registry: :mod:`.faults`)."""

from __future__ import annotations

import dataclasses
import sys
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from autotest.errors import UsageError
from autotest.workloads.fault_hooks import (
    EVAL,
    INCONSISTENCY,
    MISMATCH,
    REWARDS,
    FaultHooks,
)

if TYPE_CHECKING:
    import torch

    from autotest.workloads.tasks import Judge

class UnsyncedLayer(FaultHooks):
    """Parameters under PREFIX are never synced to the rollout engine after the initial sync.

    The rollout keeps the initial weights of that layer while the trainer updates them, so
    the engines drift apart step by step: k3 grows from ~2e-5 at step 2 past 1e-2.
    """

    name = "unsynced-layer"
    arg_help = "PREFIX of the parameter names left out (default model.layers.1.mlp.)"
    default_arg = "model.layers.1.mlp."
    expected = {
        "verdict": "FAIL",
        "breached": [MISMATCH],
        "triage": INCONSISTENCY,
        "consistency": {"bucket": "parameter_sync_mismatch", "module": "model.layers.1.mlp"},
        "measured": "seed 0: k3 9e-15 at step 1 (initial sync complete), 2e-5..1e-4 over steps 2-5, "
        "median 3e-2 over 45 steps, 39/45 steps > 1e-4; rewards and eval like a healthy run",
    }

    def check_model(self, model: torch.nn.Module) -> None:
        prefix = self.arg or ""
        if not any(name.startswith(prefix) for name, _ in model.named_parameters()):
            raise UsageError(f"--fault {self.name}:{prefix}: no parameter name starts with {prefix!r}")

    def on_sync(self, state_dict: Mapping[str, torch.Tensor], version: int) -> Mapping[str, torch.Tensor]:
        prefix = self.arg or ""
        if version == 0:
            return state_dict
        return {k: v for k, v in state_dict.items() if not k.startswith(prefix)}


class PerturbedSync(FaultHooks):
    """PARAM arrives at the rollout engine with fresh Gaussian noise on every sync.

    The noise std is half the parameter's own std: small for the model (k3 ~5e-4 to 1e-3
    from step 1, 100x a bf16 rollout) yet a sync fault a consistency dump must pin on PARAM.
    """

    name = "perturbed-sync"
    arg_help = "PARAM, the parameter perturbed (default model.layers.0.self_attn.o_proj.weight)"
    default_arg = "model.layers.0.self_attn.o_proj.weight"
    expected = {
        "verdict": "FAIL",
        "breached": [MISMATCH],
        "triage": INCONSISTENCY,
        "consistency": {"bucket": "parameter_sync_mismatch", "module": "model.layers.0.self_attn.o_proj"},
        "measured": "seed 0: k3 9.5e-4 at step 1, median 4.6e-4, 41/45 steps > 1e-4; rewards and eval healthy",
    }
    relative_noise = 0.5

    def check_model(self, model: torch.nn.Module) -> None:
        if self.arg not in dict(model.named_parameters()):
            raise UsageError(f"--fault {self.name}:{self.arg}: no such parameter; see model.named_parameters()")

    def on_sync(self, state_dict: Mapping[str, torch.Tensor], version: int) -> Mapping[str, torch.Tensor]:
        import torch

        weight = state_dict[self.arg]
        gen = torch.Generator().manual_seed(self.seed * 100_003 + version)
        noise = torch.randn(weight.shape, generator=gen, dtype=weight.dtype) * weight.std() * self.relative_noise
        return {**state_dict, self.arg: weight + noise}


class RolloutImpl(FaultHooks):
    """The rollout copy of MODULE computes differently from the trainer's.

    An MLP's activation becomes ReLU instead of SiLU (a mis-registered kernel); an RMSNorm
    gets epsilon 1e-2 instead of 1e-6. Weights and inputs stay aligned, so a consistency
    dump pins the difference on MODULE's own computation (an implementation mismatch), not
    on the sync. The MLP variant starts small (k3 ~5e-5, MLP outputs are small at init) and
    grows past 1e-4 as training sharpens the policy; the RMSNorm one is ~3e-3 from step 1.
    """

    name = "rollout-impl"
    arg_help = "MODULE, an MLP or RMSNorm of the rollout model (default model.layers.1.mlp)"
    default_arg = "model.layers.1.mlp"
    expected = {
        "verdict": "FAIL",
        "breached": [MISMATCH],
        "triage": INCONSISTENCY,
        "consistency": {"bucket": "module_impl_mismatch", "module": "model.layers.1.mlp"},
        "measured": "seed 0, MLP/ReLU: k3 6.8e-5 at step 1, median 3.8e-4, 34/45 steps > 1e-4; "
        "RMSNorm (model.layers.1.input_layernorm): 3e-3 at step 1, 31/45 steps > 1e-4",
    }

    def check_model(self, model: torch.nn.Module) -> None:
        try:
            module = model.get_submodule(self.arg or "")
        except AttributeError:
            raise UsageError(f"--fault {self.name}:{self.arg}: the model has no module {self.arg!r}") from None
        if not (hasattr(module, "act_fn") or hasattr(module, "variance_epsilon")):
            raise UsageError(f"--fault {self.name}:{self.arg}: pick an MLP (has act_fn) or an RMSNorm module")

    def patch_rollout_model(self, model: torch.nn.Module) -> None:
        import torch

        self.check_model(model)
        module = model.get_submodule(self.arg or "")
        if hasattr(module, "act_fn"):
            module.act_fn = torch.nn.ReLU()
        else:
            module.variance_epsilon = 1e-2


class Bf16Rollout(FaultHooks):
    """The rollout engine runs in bf16 while the trainer stays fp32: a precision change of the rollout.

    Healthy for a bf16 system, but the embedded case is calibrated with an fp32 rollout (k3 ~1e-14), so its
    k3 percentile gate (the case's own level, ~1e-11) sees the rollout's numerics change by eight orders.
    """

    name = "bf16-rollout"
    expected = {
        "verdict": "FAIL",
        "breached": [MISMATCH],
        "triage": INCONSISTENCY,
        "measured": "seed 0: k3 6.8e-7 at step 1, median 3.5e-6, max 1.8e-5 (p50 3.5e-6 > 1.5e-11, the fp32 "
        "baseline's percentile gate; under the 5e-3 stepwise bound); rewards/eval within seed noise. "
        "Seeds 1-3: isolated single steps reach 1.2e-4..5.5e-4 once the policy is sharp (a rare sampled "
        "token whose bf16 log-prob is off by ~0.2)",
    }

    def configure(self, config: Any) -> Any:
        return dataclasses.replace(config, rollout_dtype="bf16")


class AdvantageSign(FaultHooks):
    """Advantages are negated: the policy is pushed away from rewarded responses."""

    name = "advantage-sign"
    expected = {
        "verdict": "FAIL",
        "breached": [REWARDS, EVAL],
        "triage": "gradual",
        "measured": "seed 0: step 1 identical to healthy; rewards 0.000 from step ~5, eval 0.0 at 15/30/45",
    }

    def on_advantages(self, advantages: torch.Tensor, rewards: torch.Tensor, group_size: int) -> torch.Tensor:
        return -advantages


class LrX10(FaultHooks):
    """The learning rate is ten times the configured one."""

    name = "lr-x10"
    expected = {
        "verdict": "FAIL",
        "breached": [REWARDS, EVAL],
        "triage": "gradual",
        "measured": "seed 0: step 1 identical to healthy, then unstable: rewards 0.57 and eval 0.56 at step 45 "
        "(healthy seeds 0-5: rewards 0.89-0.94, eval 1.0)",
    }

    def configure(self, config: Any) -> Any:
        return dataclasses.replace(config, lr=config.lr * 10)


class EntropySign(FaultHooks):
    """The entropy term enters the loss with its sign flipped: a penalty of weight COEF where the config asks for a
    bonus (a regulariser written ``+ coef * entropy`` instead of ``- coef * entropy``). Step 1's rollout is the
    clean run's; the entropy falls from the first update on, the rewards only follow later."""

    name = "entropy-sign"
    arg_help = "COEF, the weight of the flipped term (default 0.1; the clean bonus is 0.01)"
    default_arg = "0.1"
    expected = {
        "verdict": "FAIL",
        "breached": [REWARDS],
        "triage": "loss-term",
        "measured": "seeds 0, 11-14, COEF 0.1: step 1 within 0.33 sd of golden; entropy below golden from step 2-3 "
        "(-3 to -4 sd, steadily: step-to-step rms 0.96-1.5 sd), the scores 7-10 steps later; lr-x10 on seeds 0, 11-13 "
        "leads as well, in jumps (2.2-3.7 sd): ranked gradual, loss-term named",
    }

    def magnitude(self) -> float:
        return self.float_arg()

    def configure(self, config: Any) -> Any:
        return dataclasses.replace(config, entropy_coef=-self.float_arg())


class JudgeBug(FaultHooks):
    """The training reward function is wrong; eval still grades with the task's judge.

    ``flip`` rewards every response the real judge rejects; ``off-by-one`` checks against
    target + 1. Step-1 rollouts are bitwise those of a healthy run: only rewards move.
    """

    name = "judge-bug"
    arg_help = "MODE: flip (default) or off-by-one"
    default_arg = "flip"
    expected = {
        "verdict": "FAIL",
        "breached": [REWARDS, EVAL],
        "triage": "rewards-only",
        "measured": "flip, seed 0: step-1 rollouts, lengths and entropy bitwise those of a healthy run, "
        "rewards 0.994 vs 0.006; eval 0.0 at 15/30/45. off-by-one: rewards learn (0.63 at 45), eval 0.0: "
        "breaches eval/accuracy only",
    }

    modes = ("flip", "off-by-one")

    def check_arg(self) -> None:
        if self.arg not in self.modes:
            raise UsageError(f"--fault {self.name}:{self.arg}: MODE must be flip or off-by-one")

    def wrap_judge(self, judge: Judge) -> Judge:
        if self.arg == "flip":
            return lambda target, response: 1.0 - judge(target, response)
        return lambda target, response: judge(target + 1, response)


class ChangedInit(FaultHooks):
    """The weights are initialised with std STD instead of 0.02 (a changed init scheme)."""

    name = "changed-init"
    arg_help = "STD of the normal weight init (default 0.2; healthy 0.02)"
    default_arg = "0.2"
    expected = {
        "verdict": "FAIL",
        "breached": ["entropy/mean", REWARDS],
        "triage": "first-step",
        "measured": "seed 0, step 1: response_len 7.59 vs 6.59 (+15%), entropy 1.81 vs 2.72, rewards "
        "0.002 vs 0.006; then learns faster (rewards 0.98 vs ~0.5 at step 20); eval 0.0 at step 0 as healthy",
    }

    def configure(self, config: Any) -> Any:
        return dataclasses.replace(config, model=dataclasses.replace(config.model, initializer_range=self.float_arg()))


class SlowStep(FaultHooks):
    """Each training step sleeps SECONDS more (a performance regression)."""

    name = "slow-step"
    arg_help = "SECONDS added to every step (default 1.5)"
    default_arg = "1.5"
    expected = {
        "verdict": "FAIL",
        "breached": ["time/step"],
        "triage": "performance-only",
        "measured": "time/step + SECONDS on every step; every other metric bitwise healthy",
    }

    def on_step_start(self, step: int) -> None:
        time.sleep(self.float_arg())


class LeakMemory(FaultHooks):
    """Each training step keeps a reference to MB more memory (a leak: a tensor held in a list per step).

    The held tensor is filled with ones, so its pages are resident (a zero-filled allocation may not be):
    ``memory/rss_mb`` grows by about MB per step while the training itself is untouched.
    """

    name = "leak-memory"
    arg_help = "MB kept per step (default 4)"
    default_arg = "4"
    expected = {
        "verdict": "FAIL",
        "breached": ["memory/rss_mb"],
        "triage": "memory",
        "measured": "memory/rss_mb grows by ~MB per step over the clean run's slope; every non-memory metric "
        "bitwise healthy (time aside)",
    }

    def __init__(self, arg: str | None, seed: int) -> None:
        super().__init__(arg, seed)
        self.kept: list[Any] = []

    def on_step_start(self, step: int) -> None:
        import torch

        self.kept.append(torch.ones(int(self.float_arg() * 1024 * 1024) // 4, dtype=torch.float32))


class CrashAt(FaultHooks):
    """The run raises at the start of step K and exits non-zero."""

    name = "crash-at"
    arg_help = "K, the step that crashes (required)"
    arg_required = True
    expected = {"verdict": "ERROR", "breached": [], "triage": "run-incomplete", "measured": "exit 1 with a traceback"}

    def on_step_start(self, step: int) -> None:
        if step == self.int_arg():
            raise RuntimeError(f"injected fault crash-at:{step}")


class HangAt(FaultHooks):
    """The run sleeps forever at the start of step K (only a timeout ends it)."""

    name = "hang-at"
    arg_help = "K, the step that hangs (required)"
    arg_required = True
    expected = {"verdict": "ERROR", "breached": [], "triage": "run-incomplete", "measured": "no new rows after step K-1"}

    def on_step_start(self, step: int) -> None:
        if step == self.int_arg():
            print(f"injected fault hang-at:{step}: sleeping forever", file=sys.stderr, flush=True)
            while True:
                time.sleep(3600)


class NanAt(FaultHooks):
    """From step K the trainer's recomputed log-probs are NaN (an overflow in the log-prob path).

    Loss, grad norm and the mismatch metrics become NaN; the trainer skips non-finite
    updates, so the run goes on to the end with frozen weights.
    """

    name = "nan-at"
    arg_help = "K, the first step with NaN (required)"
    arg_required = True
    expected = {
        "verdict": "FAIL",
        "breached": [MISMATCH, REWARDS],
        "triage": "non-finite",
        "measured": "nan-at:20, seed 0: mismatch/*, loss and grad_norm NaN from step 20, updates skipped; "
        "rewards freeze near 0.45 (healthy ~0.9 at 45)",
    }

    def on_actor_logprobs(self, step: int, logprobs: torch.Tensor) -> torch.Tensor:
        return logprobs + float("nan") if step >= self.int_arg() else logprobs


class TruncatedTracker(FaultHooks):
    """At step K the metric log gets half a line, then the run exits 0.

    Like a crashed trainer behind ``tee``: the exit code says success, the log says otherwise.
    """

    name = "truncated-tracker"
    arg_help = "K, the step whose first row is cut (required)"
    arg_required = True
    expected = {
        "verdict": "ERROR",
        "breached": [],
        "triage": "run-incomplete",
        "measured": "exit 0; the log ends in half of step K's first row",
    }

    def wrap_tracker(self, tracker: Any) -> Any:
        return _TruncatingTracker(tracker, self.int_arg())


class _TruncatingTracker:
    """Writes rows through until step K, then half of the first step-K row, then exits 0."""

    def __init__(self, inner: Any, stop_step: int) -> None:
        self.inner = inner
        self.stop_step = stop_step

    def write(self, row: Mapping[str, Any]) -> None:
        if row.get("step", 0) < self.stop_step:
            self.inner.write(row)
            return
        text = self.inner.serialize(row)
        self.inner.write_text(text[: len(text) // 2])
        print(f"injected fault truncated-tracker:{self.stop_step}: log cut, exiting 0", file=sys.stderr, flush=True)
        raise SystemExit(0)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)
