"""One side of a framework's run, dumped with MSProbe as that framework would: a separate process.

``python make_dump.py --side train|rollout --scenario NAME --dump-path DIR --log FILE
--requests r0,r1 [--task statistics|tensor] [--window 3[,4]] [--steps 3]``

The training side is a ``transformers`` Qwen3 (HF names; under ``torch.distributed`` when
``WORLD_SIZE`` is set, so MSProbe writes ``step{N}/rank{R}``); the rollout side is its
engine-layout copy (fused ``qkv_proj`` / ``gate_up_proj``, vLLM names; no process group, so
``step{N}/proc{pid}``). Both build the same weights from seed 0 and feed each request's tokens
(derived from its id), one forward per request per step; only the window step is dumped. Each
dumped forward appends one correlation line in the seed's format. ``--scenario`` perturbs the
rollout copy: ``healthy``, ``norm`` (an RMSNorm's epsilon), ``fused-k`` (the k shard of a fused
qkv_proj), ``unsynced`` (layer 1's MLP keeps other weights), ``other`` (an unrelated model).
"""

from __future__ import annotations

import argparse
import json
import os
import zlib
from pathlib import Path

import torch


def tiny_qwen3() -> torch.nn.Module:
    from transformers import Qwen3Config, Qwen3ForCausalLM

    config = Qwen3Config(vocab_size=32, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, head_dim=16, max_position_embeddings=64,
                         tie_word_embeddings=False)  # fmt: skip
    torch.manual_seed(0)
    return Qwen3ForCausalLM(config).eval()


def rollout_model(scenario: str) -> torch.nn.Module:
    from autotest.workloads.engine_lm import engine_copy

    if scenario == "other":
        torch.manual_seed(0)
        return torch.nn.Sequential(torch.nn.Embedding(32, 16), torch.nn.Linear(16, 32)).eval()
    model = engine_copy(tiny_qwen3()).eval()
    with torch.no_grad():
        if scenario == "norm":
            model.model.layers[1].post_attention_layernorm.variance_epsilon = 1e-2
        elif scenario == "fused-k":
            attn = model.model.layers[0].self_attn
            start, size = attn.qkv_proj.shard_offsets["k"]
            attn.qkv_proj.weight[start : start + size].mul_(1.2)
        elif scenario == "unsynced":  # as left by an earlier weight version: other values, same shapes
            gen = torch.Generator().manual_seed(1)
            for p in model.model.layers[1].mlp.parameters():
                p.add_(0.3 * p.abs().mean() * torch.randn(p.shape, generator=gen))
    return model


def tokens_of(request_id: str) -> list[int]:
    gen = torch.Generator().manual_seed(zlib.crc32(request_id.encode()))
    return torch.randint(0, 32, (12,), generator=gen).tolist()


def main() -> None:
    p = argparse.ArgumentParser()
    for flag in ("--side", "--scenario", "--dump-path", "--log", "--requests"):
        p.add_argument(flag, required=True)
    p.add_argument("--task", default="statistics")
    p.add_argument("--window", default="3", help="dumped step(s), comma-separated")
    p.add_argument("--steps", type=int, default=3)
    args = p.parse_args()
    windows = [int(w) for w in args.window.split(",")]
    torch.set_num_threads(1)
    rank = None
    if os.environ.get("WORLD_SIZE"):
        import torch.distributed as dist

        dist.init_process_group("gloo")
        rank = dist.get_rank()
    model = tiny_qwen3() if args.side == "train" else rollout_model(args.scenario)
    config = Path(args.dump_path).parent / f"msprobe_{args.side}_{os.getpid()}.json"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text(json.dumps({"task": args.task, "dump_path": args.dump_path, "rank": [], "level": "L0",
                                  "step": windows, "async_dump": False,
                                  args.task: {"scope": [], "list": [], "data_mode": ["forward"],
                                              "summary_mode": "statistics"}}))  # fmt: skip
    from msprobe.pytorch import PrecisionDebugger

    debugger = PrecisionDebugger(config_path=str(config))
    debugger.set_init_step(1)  # MSProbe counts from 0; the run's steps are numbered from 1
    requests = args.requests.split(",")
    for step in range(1, args.steps + 1):
        for rid in requests:
            ids = torch.tensor([tokens_of(rid)])
            debugger.start(model=model)
            with torch.no_grad():
                model(ids)
            debugger.stop()
            if step in windows:
                line = ({"source": "dispatch_logger", "pid": os.getpid(), "rank": rank, "step": step, "phase": "prefill",
                         "requests": [{"request_id": rid, "type": "prefill", "tokens": ids[0].tolist()}]}
                        if args.side == "rollout" else
                        {"source": "update_actor", "pid": os.getpid(), "rank": rank, "step": step,
                         "request_ids": [rid]})  # fmt: skip
                with open(args.log, "a", encoding="utf-8") as fh:
                    fh.write(json.dumps(line) + "\n")
        debugger.step()


if __name__ == "__main__":
    main()
