"""One iteration of the embedded GRPO loop (:mod:`.grpo`): rollout (or the replayed batch), reward, train, sync,
maybe eval, and the tracker rows it writes."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from autotest.workloads.faults import FaultHooks
from autotest.workloads.replay import RolloutSaver

if TYPE_CHECKING:  # grpo.py imports this module; its config is only named here
    from autotest.workloads.grpo import GRPOConfig


def train_step(
    config: GRPOConfig,
    engines: Any,
    hooks: FaultHooks,
    tracker: Any,
    task: Any,
    train_judge: Any,
    prompt_gen: Any,
    step: int,
    last_step: int,
    replayed: dict[int, Any] | None = None,
    saver: RolloutSaver | None = None,
) -> None:
    """One iteration: rollout (or the replayed batch), reward, train, sync, maybe eval; writes its tracker rows."""
    import torch

    from autotest.workloads.data_metrics import composition_metrics
    from autotest.workloads.memory import memory_metrics
    from autotest.workloads.metrics import summary_stats

    start = time.perf_counter()
    hooks.on_step_start(step)
    observe = step == config.window_step
    data: dict[str, float] = {}  # a replayed batch's prompts were drawn by the saving run: not logged again
    if replayed is None:
        prompts = hooks.on_prompts(task.sample_prompts(config.prompts_per_step, prompt_gen), step)
        data = composition_metrics(prompts)  # read only: nothing the step trains depends on it
        batch = engines.generate(prompts, config.samples_per_prompt, step)
    else:  # frozen rollout: no generation, no grading; the saved batch and rewards
        batch, rewards = replayed[step]
    if observe:
        engines.observe_prefill(batch, step)
    t_generate = time.perf_counter()
    if replayed is None:
        responses = batch.responses()
        rewards = torch.tensor([train_judge(p.target, r) for p, r in zip(batch.prompts, responses, strict=True)])
    if saver is not None:
        saver.save(step, batch, rewards)
    t_reward = time.perf_counter()
    result = engines.train_step(batch, rewards, step, observe)
    t_train = time.perf_counter()
    engines.sync(step)
    t_sync = time.perf_counter()
    summary: dict[str, Any] = {}
    if step % config.eval_every == 0 or step == last_step:
        summary.update(evaluate(config, engines, task, step))
        summary["time/eval"] = time.perf_counter() - t_sync
    summary.update(
        {
            "time/generate": t_generate - start,
            "time/reward": t_reward - t_generate,
            "time/train": t_train - t_reward,
            "time/sync": t_sync - t_train,
        }
    )
    summary.update(summary_stats("response/rewards", rewards, with_std=False))
    summary.update(summary_stats("response/response_len", batch.response_mask.sum(dim=1)))
    summary.update(result.metrics)
    summary.update(data)
    for row in result.mini_batch_rows:
        tracker.write({**{f"train_metrics/worker_0/{k}": v for k, v in row.items()}, "step": step})
    summary.update(memory_metrics())  # after the step's work: a reference kept per step shows as growth
    summary["time/step"] = time.perf_counter() - start
    tracker.write({**dict(sorted(summary.items())), "step": step})
    evaluated = f" eval {summary['eval/accuracy']:.3f}" if "eval/accuracy" in summary else ""
    print(
        f"[tiny-grpo] step {step}/{last_step} reward {summary['response/rewards/mean']:.3f}"
        f" len {summary['response/response_len/mean']:.2f} k3 {summary['mismatch/mismatch_k3_kl']:.2e}"
        f"{evaluated} time {summary['time/step']:.2f}s",
        flush=True,
    )


def evaluate(config: GRPOConfig, engines: Any, task: Any, step: int) -> dict[str, float]:
    """``eval/accuracy`` (sampled pass@1, the gated one) and ``eval/greedy_accuracy`` (reference)."""
    from autotest.workloads.rollout import eval_seed_of

    prompts = task.eval_prompts()
    return {"eval/accuracy": engines.evaluate_sampled(prompts, task.judge, config.eval_samples,
                                                      eval_seed_of(config.seed, step)),
            "eval/greedy_accuracy": engines.evaluate(prompts, task.judge)}
