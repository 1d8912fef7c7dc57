"""Real MSProbe dumps of a tiny Qwen3 on both sides: the fault scenarios and their collection.

Each scenario builds an actor model and a rollout copy with identical weights, changes the
rollout copy the way a real bug would, and runs the diagnostic window through the real
observer (``make_observer``): two micro-batches of two requests per side, one step outside
the window (which must not dump), one inside.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

WINDOW_STEP = 2
REQUESTS = (("s2-p0-r0", "s2-p0-r1"), ("s2-p1-r0", "s2-p1-r1"))


@dataclass(frozen=True)
class ScenarioRun:
    """Where one scenario's collection landed."""

    name: str
    root: Path
    rollout_dump: Path
    actor_dump: Path
    rollout_log: Path
    actor_log: Path


def tiny_models(seed: int = 0) -> tuple[Any, Any]:
    """(actor, rollout): two Qwen3ForCausalLM with identical weights, 2 layers, hidden 64, vocab 16."""
    import torch
    from transformers import Qwen3Config, Qwen3ForCausalLM

    torch.set_num_threads(1)
    config = Qwen3Config(
        vocab_size=16,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=16,
        max_position_embeddings=64,
        tie_word_embeddings=False,
    )
    torch.manual_seed(seed)
    actor = Qwen3ForCausalLM(config).eval()
    rollout = copy.deepcopy(actor)
    return actor, rollout


def perturb_mlp(rollout: Any) -> Any:
    import torch

    gen = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for _, p in rollout.model.layers[1].mlp.named_parameters():
            p.add_(0.05 * p.abs().mean() * torch.randn(p.shape, generator=gen))
    return rollout


def _perturb_one_matrix(rollout: Any) -> Any:
    import torch

    with torch.no_grad():
        rollout.model.layers[0].self_attn.o_proj.weight.mul_(1.1)
    return rollout


def _rmsnorm_eps(rollout: Any) -> Any:
    rollout.model.layers[1].post_attention_layernorm.variance_epsilon = 1e-2
    return rollout


def _activation(rollout: Any) -> Any:
    from transformers.activations import GELUActivation

    rollout.model.layers[0].mlp.act_fn = GELUActivation()
    return rollout


def _attention_scaling(rollout: Any) -> Any:
    # The score scaling lives in Qwen3Attention's own code between its submodules (no hook).
    rollout.model.layers[0].self_attn.scaling *= 1.5
    return rollout


def _bf16(rollout: Any) -> Any:
    import torch

    return rollout.to(torch.bfloat16)


SCENARIOS: dict[str, Callable[[Any], Any]] = {
    "healthy_fp32": lambda r: r,
    "mlp_unsynced": perturb_mlp,
    "one_matrix": _perturb_one_matrix,
    "rmsnorm_eps": _rmsnorm_eps,
    "activation": _activation,
    "attention_scaling": _attention_scaling,
    "bf16": _bf16,
}


def collect(
    root: Path,
    mutate: Callable[[Any], Any],
    task: str = "statistics",
    module_list: tuple[str, ...] = (),
    actor_token_offset: int = 0,
) -> ScenarioRun:
    """Run the window through the real observer; ``actor_token_offset`` feeds the actor other tokens."""
    import torch

    from autotest.consistency.collect import make_observer

    actor, rollout = tiny_models()
    rollout = mutate(rollout)
    config: dict[str, Any] = {
        "output_dir": str(root),
        "window_step": WINDOW_STEP,
        "micro_batch_size": 2,
        "task": task,
        "msprobe_log_level": "error",
    }
    if module_list:
        config["list"] = list(module_list)
    observer = make_observer(config)
    gen = torch.Generator().manual_seed(7)
    for step in (WINDOW_STEP - 1, WINDOW_STEP):
        for batch in REQUESTS:
            ids = torch.randint(0, 16, (len(batch), 10), generator=gen)
            actor_ids = (ids + actor_token_offset) % 16
            with torch.no_grad():
                with observer.forward("rollout", step, "prefill", list(batch), ids.tolist(), step, rollout):
                    rollout(ids)
                with observer.forward("actor", step, "recompute_logprob", list(batch), actor_ids.tolist(), step, actor):
                    actor(actor_ids)
    observer.close()
    return scenario_run(root)


def scenario_run(root: Path) -> ScenarioRun:
    """Where ``collect`` puts a scenario's dumps and logs under ``root``."""
    return ScenarioRun(
        name=root.name,
        root=root,
        rollout_dump=root / "rollout" / "dump",
        actor_dump=root / "actor" / "dump",
        rollout_log=root / "rollout" / "correlation.jsonl",
        actor_log=root / "actor" / "correlation.jsonl",
    )
