"""Tiny GRPO on CPU: the embedded workload the harness launches as a subprocess.

    python -m autotest.workloads.grpo --work-dir DIR [--seed N] [--steps 45] [--eval-every 15]
        [--rollout-dtype fp32|bf16] [--fault NAME[:ARG]] [--ray] [--prompts-per-step 64]
        [--samples-per-prompt 8] [--micro-batch-size 128] [--diagnostic-config PATH]
        [--save-checkpoint-at K --checkpoint-dir DIR] [--resume-from DIR] [--stop-at-step N]
        [--micro-batches N] [--padding max|longest] [--save-rollouts DIR | --replay-rollouts DIR]

Structured like a real RL framework: a rollout engine with its own model copy samples
responses (KV cache, temperature 1) and returns their log-probs; the driver grades them
with the task's judge; the trainer recomputes log-probs in fp32, logs the train/inference
mismatch, and runs PPO-clip updates on group-normalised advantages; the new weights are
synced to the rollout engine; eval runs at step 0 and every ``--eval-every`` steps: ``eval/accuracy``
is pass@1 from ``--eval-samples`` samples per eval prompt at the rollout temperature (a generator of
its own, seeded by (seed, step)), ``eval/greedy_accuracy`` the greedy answers' accuracy (reference).
Metrics go to ``$WORK_DIR/<timestamp>/logs/exp_tracking/tracker.jsonl`` (xtuner layout).

A run is bitwise deterministic for a seed (time metrics aside), and so is a run resumed from its checkpoint
(:mod:`autotest.workloads.checkpoint`): steps K+1.. match the uninterrupted run's. Exit code 0 on success,
1 on a crash, 2 on a usage error (one line on stderr).

A/B support (issue 32): ``RL_AUTOTEST_AA_PERTURB=N`` nudges the initial weights at ulp scale for A/A pairs
(:mod:`autotest.workloads.perturb`); ``--micro-batches N`` and ``--padding longest`` are variants that must train
the same as the defaults; ``--save-rollouts`` / ``--replay-rollouts`` freeze the rollout (:mod:`autotest.workloads.replay`).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from autotest.errors import UsageError
from autotest.workloads.device import generator, use_device, workload_device
from autotest.workloads.checkpoint import CheckpointPlan, check_plan, load_checkpoint, save_checkpoint
from autotest.workloads.faults import FaultHooks, catalogue, make_fault
from autotest.workloads.grpo_step import evaluate, train_step
from autotest.workloads.perturb import describe, perturbation_from_env
from autotest.workloads.regressions import listed
from autotest.workloads.replay import RolloutPlan, RolloutSaver, load_replay
from autotest.workloads.tasks import get_task
from autotest.workloads.tiny_lm import TinyLMConfig
from autotest.workloads.tracker import JsonlTracker, make_exp_dir, write_config

DIAGNOSTIC_OVERRIDES = ("prompts_per_step", "samples_per_prompt", "micro_batch_size")


@dataclass(frozen=True)
class GRPOConfig:
    """Everything that defines a run; saved as ``config.json`` beside the logs."""

    seed: int = 0
    """Seed of model init, prompt order, sampling and mini-batch order."""
    steps: int = 45
    """Training steps, numbered 1..steps."""
    eval_every: int = 15
    """Eval after every N-th step (and at step 0 and the last step)."""
    eval_samples: int = 32
    """Samples per eval prompt for pass@1 (9 prompts x 32 = 288 graded samples per eval point)."""
    task: str = "digit_sum"
    """Task (data_source) from ``tasks.TASKS``."""
    prompts_per_step: int = 64
    """Prompts sampled per step."""
    samples_per_prompt: int = 8
    """Responses per prompt (the GRPO group size)."""
    max_new_tokens: int = 8
    """Longest response, ``<eos>`` included."""
    temperature: float = 1.0
    """Sampling temperature (fixed: the rollout log-probs are those of the model itself)."""
    rollout_dtype: str = "fp32"
    """Dtype of the rollout engine's model copy: fp32 or bf16."""
    rollout_layout: str = "engine"
    """Module tree of the rollout copy: ``engine`` (fused qkv_proj/gate_up_proj, vLLM names) or ``hf``."""
    lr: float = 1e-3
    """Adam learning rate at step 1."""
    final_lr_ratio: float = 0.1
    """Linear decay to lr * final_lr_ratio at the last step: the policy settles, so late-step
    metrics vary little from seed to seed (constant lr left some seeds unlearning a target)."""
    clip_eps: float = 0.2
    """PPO clip range."""
    mini_batches: int = 4
    """Optimiser steps per training step."""
    micro_batch_size: int = 128
    """Sequences per forward pass."""
    padding: str = "max"
    """Update forwards padded to ``max`` (max_new_tokens) or trimmed to each micro-batch's ``longest`` response."""
    group_by_length: bool = False
    """Micro-batches filled in order of response length (set by ``--micro-batches N``)."""
    max_grad_norm: float = 1.0
    """Gradient clipping norm."""
    entropy_coef: float = 0.01
    """Entropy bonus weight (slows the collapse of the policy onto early answers)."""
    num_threads: int = 1
    """Torch threads per component (part of the numerics: keep it fixed for a baseline)."""
    model: TinyLMConfig = field(default_factory=TinyLMConfig)
    """Shape and init of the tiny model."""
    fault: str = ""
    """Injected fault ``NAME[:ARG]`` from ``faults.FAULTS``; empty for a healthy run."""
    ray: bool = False
    """Run rollout engine and trainer as Ray actors."""
    window_step: int = 0
    """Diagnostic runs only: the step whose forwards the observer sees; the run stops after it."""

    def to_json(self) -> dict[str, Any]:
        """The config as written to ``config.json``."""
        eval_set_size = len(get_task(self.task).eval_targets) * self.eval_samples
        return {**dataclasses.asdict(self), "recompute_logprobs": True, "algorithm": "grpo",
                "eval_set_size": {"eval/accuracy": eval_set_size}}


def run(config: GRPOConfig, work_dir: Path, diagnostic: dict[str, Any] | None = None,
        plan: CheckpointPlan = CheckpointPlan(), rollouts: RolloutPlan = RolloutPlan()) -> Path:
    """Run the workload; returns the experiment dir (``<work_dir>/<timestamp>``). ``plan``: save a checkpoint,
    resume from one, stop early (:mod:`autotest.workloads.checkpoint`); ``rollouts``: save the rollout batches or
    train on saved ones (:mod:`autotest.workloads.replay`). Reads ``RL_AUTOTEST_AA_PERTURB``."""
    import torch

    from autotest.workloads.engines import LocalEngines, RayEngines
    from autotest.workloads.trainer import OptimConfig

    torch.set_num_threads(config.num_threads)
    device = workload_device()
    use_device(device)  # RL_AUTOTEST_WORKLOAD_DEVICE: the GPU check's CUDA run; the CPU otherwise
    hooks = make_fault(config.fault, config.seed)
    task = get_task(config.task)
    _check_fault_against_model(hooks, config.model)
    resumed = load_checkpoint(plan.resume_from, config.to_json(), config.steps) if plan.resume_from else None
    if resumed is not None and plan.stop_at and plan.stop_at <= resumed["step"]:
        raise UsageError(f"--stop-at-step: {plan.stop_at} is not after the checkpoint's step {resumed['step']}")
    aa_perturb = perturbation_from_env()
    last_step = config.window_step or config.steps
    first_step = resumed["step"] + 1 if resumed is not None else 1
    end_step = plan.stop_at or hooks.loop_end(last_step)
    replayed = load_replay(rollouts.replay_dir, config.to_json(), first_step, end_step) if rollouts.replay_dir else None
    saver = RolloutSaver(rollouts.save_dir, config.to_json()) if rollouts.save_dir else None
    exp_dir = make_exp_dir(work_dir)
    # recorded only when on, so a default run's config.json stays what it was
    extras = {**({"aa_perturb": aa_perturb} if aa_perturb else {}),
              **({"replay_rollouts": str(rollouts.replay_dir)} if rollouts.replay_dir else {})}
    write_config(exp_dir, {**config.to_json(), **extras})
    tracker = hooks.wrap_tracker(JsonlTracker(exp_dir))
    train_judge = hooks.wrap_judge(task.judge)
    rollout_kwargs = {
        "model_config": config.model,
        "dtype": config.rollout_dtype,
        "seed": config.seed,
        "max_new_tokens": config.max_new_tokens,
        "fault": config.fault,
        "num_threads": config.num_threads,
        "layout": config.rollout_layout,
    }
    optim = OptimConfig(
        lr=config.lr,
        clip_eps=config.clip_eps,
        mini_batches=config.mini_batches,
        micro_batch_size=config.micro_batch_size,
        max_grad_norm=config.max_grad_norm,
        entropy_coef=config.entropy_coef,
        total_steps=config.steps,
        final_lr_ratio=config.final_lr_ratio,
        padding=config.padding,
        group_by_length=config.group_by_length,
    )
    trainer_kwargs = {
        "model_config": config.model,
        "optim": optim,
        "seed": config.seed,
        "group_size": config.samples_per_prompt,
        "fault": config.fault,
        "num_threads": config.num_threads,
        "aa_perturb": aa_perturb,
    }
    if aa_perturb:
        print(f"[tiny-grpo] {describe(aa_perturb)}", flush=True)
    if replayed is not None:
        print(f"[tiny-grpo] replaying the rollout batches of {rollouts.replay_dir} (steps {first_step}..{end_step}):"
              " rewards and response lengths are the saved run's", flush=True)
    print(f"[tiny-grpo] exp dir {exp_dir} (fault: {config.fault or 'none'}, ray: {config.ray}, device: {device})",
          flush=True)
    engines = (RayEngines if config.ray else LocalEngines)(rollout_kwargs, trainer_kwargs, diagnostic)
    try:
        prompt_gen = generator(config.seed)
        if resumed is None:
            engines.sync(0)
            scores = evaluate(config, engines, task, 0)
            tracker.write({**scores, "step": 0})
            print(f"[tiny-grpo] step 0 eval/accuracy {scores['eval/accuracy']:.3f}", flush=True)
        else:  # the step-0 eval and the initial sync belong to the run that saved the checkpoint
            engines.load_checkpoint_state(resumed)
            if "rng" in hooks.restored_parts("driver", ("rng",)):
                prompt_gen.set_state(resumed["driver"]["rng"])
            print(f"[tiny-grpo] resumed from {plan.resume_from} after step {resumed['step']}", flush=True)
        for step in range(first_step, end_step + 1):
            train_step(config, engines, hooks, tracker, task, train_judge, prompt_gen, step, last_step,
                        replayed=replayed, saver=saver)
            if step == plan.save_at and plan.save_dir is not None:  # after the step's rows: its numbers are final
                saved = save_checkpoint(plan.save_dir, step, config.to_json(), engines.checkpoint_state(),
                                        {"rng": prompt_gen.get_state()})
                print(f"[tiny-grpo] checkpoint after step {step}: {saved}", flush=True)
    finally:
        engines.close()
        tracker.close()
    return exp_dir


def _check_fault_against_model(hooks: FaultHooks, model_config: TinyLMConfig) -> None:
    """Fail fast (one line) when the fault's ARG names nothing in the model."""
    from autotest.workloads.tiny_lm import build_model

    hooks.check_model(build_model(model_config, seed=0))


def _positive(name: str, value: int) -> int:
    if value < 1:
        raise UsageError(f"{name}: must be a positive integer (got {value})")
    return value


def load_diagnostic(path: Path) -> dict[str, Any]:
    """Read and check a ``--diagnostic-config`` JSON file."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise UsageError(f"{path}: cannot read the diagnostic config ({exc.strerror})") from None
    except json.JSONDecodeError as exc:
        raise UsageError(f"{path}: line {exc.lineno}: not valid JSON ({exc.msg})") from None
    if not isinstance(data, dict):
        raise UsageError(f"{path}: the diagnostic config must be a JSON object")
    if "window_step" not in data:
        raise UsageError(f"{path}: key window_step: missing; set the step to collect, e.g. 3")
    for key in ("window_step", *DIAGNOSTIC_OVERRIDES):
        value = data.get(key, 1)
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise UsageError(f"{path}: key {key}: must be a positive integer (got {value!r})")
    return data


def build_config(args: argparse.Namespace, diagnostic: dict[str, Any] | None) -> GRPOConfig:
    """The run config from the command line, the diagnostic overrides and the fault."""
    if args.rollout_dtype not in ("fp32", "bf16"):
        raise UsageError(f"--rollout-dtype: must be fp32 or bf16 (got {args.rollout_dtype!r})")
    if args.padding not in ("max", "longest"):
        raise UsageError(f"--padding: must be max or longest (got {args.padding!r})")
    get_task(args.task)
    config = GRPOConfig(
        seed=args.seed,
        steps=_positive("--steps", args.steps),
        eval_every=_positive("--eval-every", args.eval_every),
        eval_samples=_positive("--eval-samples", args.eval_samples),
        task=args.task,
        prompts_per_step=_positive("--prompts-per-step", args.prompts_per_step),
        samples_per_prompt=_positive("--samples-per-prompt", args.samples_per_prompt),
        rollout_dtype=args.rollout_dtype,
        micro_batch_size=_positive("--micro-batch-size", args.micro_batch_size or GRPOConfig.micro_batch_size),
        mini_batches=_positive("--mini-batches", args.mini_batches),
        lr=args.lr,
        entropy_coef=args.entropy_coef,
        final_lr_ratio=args.final_lr_ratio,
        fault=args.fault or "",
        ray=args.ray,
        padding=args.padding,
    )
    if diagnostic is not None:
        overrides = {k: diagnostic[k] for k in DIAGNOSTIC_OVERRIDES if k in diagnostic}
        config = dataclasses.replace(config, window_step=diagnostic["window_step"], **overrides)
        config = dataclasses.replace(config, steps=max(config.steps, config.window_step))
    if args.micro_batches:
        config = dataclasses.replace(config, micro_batch_size=_micro_batch_size(config, args), group_by_length=True)
    return make_fault(config.fault, config.seed).configure(config)


def _micro_batch_size(config: GRPOConfig, args: argparse.Namespace) -> int:
    """``--micro-batches N``: each mini-batch in N equal micro-batches grouped by response length (gradient
    accumulation as length-grouping trainers do it, same token mean)."""
    n = _positive("--micro-batches", args.micro_batches)
    if args.micro_batch_size is not None:
        raise UsageError("--micro-batches: give it or --micro-batch-size, not both")
    batch = config.prompts_per_step * config.samples_per_prompt
    if batch % config.mini_batches or (batch // config.mini_batches) % n:
        raise UsageError(f"--micro-batches: {batch} sequences in {config.mini_batches} mini-batches do not split "
                         f"into {n} equal micro-batches; choose a divisor of {batch // max(config.mini_batches, 1)}")
    return batch // config.mini_batches // n


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    """The command line."""
    defaults = GRPOConfig()
    p = argparse.ArgumentParser(prog="python -m autotest.workloads.grpo", description=__doc__.split("\n\n")[0])
    p.add_argument("--work-dir", type=Path, help="where the timestamped exp dir goes (default: $WORK_DIR)")
    p.add_argument("--seed", type=int, default=defaults.seed)
    p.add_argument("--steps", type=int, default=defaults.steps)
    p.add_argument("--eval-every", type=int, default=defaults.eval_every)
    p.add_argument("--eval-samples", type=int, default=defaults.eval_samples, help="samples per eval prompt (pass@1)")
    p.add_argument("--task", default=defaults.task)
    p.add_argument("--rollout-dtype", default=defaults.rollout_dtype, help="fp32 or bf16")
    p.add_argument("--fault", help="inject a fault NAME[:ARG] (see --list-faults)")
    p.add_argument("--ray", action="store_true", help="rollout engine and trainer as Ray actors")
    p.add_argument("--prompts-per-step", type=int, default=defaults.prompts_per_step)
    p.add_argument("--samples-per-prompt", type=int, default=defaults.samples_per_prompt)
    p.add_argument("--micro-batch-size", type=int, help=f"sequences per forward (default {defaults.micro_batch_size})")
    p.add_argument("--micro-batches", type=int, default=0, metavar="N",
                   help="split each mini-batch into N equal micro-batches, grouped by response length "
                        "(must train as N = 1 does)")
    p.add_argument("--padding", default=defaults.padding,
                   help="update forwards padded to max (default) or trimmed to each micro-batch's longest response")
    p.add_argument("--save-rollouts", type=Path, metavar="DIR", help="write each step's rollout batch to DIR")
    p.add_argument("--replay-rollouts", type=Path, metavar="DIR",
                   help="train on the rollout batches saved in DIR instead of generating")
    p.add_argument("--mini-batches", type=int, default=defaults.mini_batches)
    p.add_argument("--lr", type=float, default=defaults.lr, help="Adam learning rate")
    p.add_argument("--entropy-coef", type=float, default=defaults.entropy_coef, help="entropy bonus weight")
    p.add_argument("--final-lr-ratio", type=float, default=defaults.final_lr_ratio, help="lr at the last step / lr")
    p.add_argument("--diagnostic-config", type=Path, help="JSON for a consistency dump run (default off)")
    p.add_argument("--save-checkpoint-at", type=int, default=0, metavar="K",
                   help="save a checkpoint after step K (needs --checkpoint-dir; the run's numbers do not change)")
    p.add_argument("--checkpoint-dir", type=Path, help="where --save-checkpoint-at writes checkpoint.pt")
    p.add_argument("--resume-from", type=Path, metavar="DIR", help="resume from DIR/checkpoint.pt at its step + 1")
    p.add_argument("--stop-at-step", type=int, default=0, metavar="N",
                   help="train up to step N and stop (the LR schedule still spans --steps)")
    p.add_argument("--list-faults", action="store_true", help="print the fault catalogue as JSON and exit")
    return p.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; returns the exit code."""
    args = parse_args(argv)
    if args.list_faults:
        print(json.dumps(catalogue() + listed(), indent=2))  # the detection benchmark's regressions too
        return 0
    try:
        work_dir = args.work_dir or (Path(os.environ["WORK_DIR"]) if os.environ.get("WORK_DIR") else None)
        if work_dir is None:
            raise UsageError("--work-dir: missing; pass --work-dir DIR or set WORK_DIR")
        diagnostic = load_diagnostic(args.diagnostic_config) if args.diagnostic_config else None
        config = build_config(args, diagnostic)
        plan = check_plan(CheckpointPlan(args.save_checkpoint_at, args.checkpoint_dir, args.resume_from,
                                         args.stop_at_step), config.steps, diagnostic is not None)
        if args.save_rollouts and args.replay_rollouts:
            raise UsageError("--save-rollouts: not with --replay-rollouts (the replayed batches are saved already)")
        run(config, work_dir, diagnostic, plan, RolloutPlan(args.save_rollouts, args.replay_rollouts))
    except UsageError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
