"""Dump one side of a sharded run with MSProbe, one real process per rank (``torch.distributed``, gloo).

``python -m autotest.workloads.sharded_dump --side rollout --tp 4 --out DIR [--fault F] [--requests r0,r1]``
``python -m autotest.workloads.sharded_dump --side train [--pp 2] --out DIR [--fault pp-residual]``

Both sides build the embedded tiny Qwen3 (:mod:`autotest.workloads.tiny_lm`, seed 0). The rollout side serves its
engine copy tensor-parallel (:mod:`autotest.workloads.engine_tp`, ``--tp 1`` the unsharded engine in one process);
the train side runs the ``transformers`` model in one process, or split into ``--pp`` pipeline stages that hand the
hidden state on with ``send``/``recv``. Every process dumps the window step with MSProbe (L0, forward, tensors or
statistics) under ``DIR/dump/step{N}/rank{R}`` (``proc{pid}`` for a single process) and appends one correlation
line per forward to ``DIR/correlation.jsonl``. A request's tokens are derived from its id, so the two sides see the
same batch.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import zlib
from pathlib import Path

#: the trainer-side fault: the stage boundary hands on the last layer's own contribution, not the residual stream
PP_FAULTS = {"pp-residual": "pipeline stage 0 sends layer 0's output without its residual (the block's delta only)"}


def tokens_of(request_id: str, vocab: int = 16, length: int = 12) -> list[int]:
    import torch

    gen = torch.Generator().manual_seed(zlib.crc32(request_id.encode()))
    return torch.randint(0, vocab, (length,), generator=gen).tolist()


def dump_side(side: str, out: Path, *, tp: int = 1, pp: int = 1, fault: str = "", requests: str = "r0,r1",
              task: str = "tensor", step: int = 1, timeout_s: float = 300.0, scale: tuple[int, int, int] | None = None
              ) -> Path:
    """Run the side's processes to the end; the dump root (``out/dump``). A rank that fails raises RuntimeError
    with its log's tail (every rank's log stays in ``out/logs``). ``scale`` (layers, hidden, tokens) builds a larger
    model than the embedded one (the benchmark's), 8 query and 4 kv heads."""
    world = tp if side == "rollout" else pp
    out.mkdir(parents=True, exist_ok=True)
    (out / "logs").mkdir(exist_ok=True)
    base = [sys.executable, "-m", "autotest.workloads.sharded_dump", "--side", side, "--out", str(out),
            "--tp", str(tp), "--pp", str(pp), "--fault", fault, "--requests", requests, "--task", task,
            "--step", str(step), "--rank-process"]
    if scale:
        base += ["--scale", ",".join(map(str, scale))]
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK")}
    env.update(OMP_NUM_THREADS="1", MASTER_ADDR="127.0.0.1", MASTER_PORT=str(_free_port()))
    procs = []
    for rank in range(world):
        rank_env = dict(env, RANK=str(rank), WORLD_SIZE=str(world)) if world > 1 else env
        log = open(out / "logs" / f"{side}-rank{rank}.log", "wb")  # noqa: SIM115 - closed below
        procs.append((subprocess.Popen(base, env=rank_env, stdout=log, stderr=subprocess.STDOUT), log))
    failed = []
    try:
        for rank, (proc, _) in enumerate(procs):
            try:
                if proc.wait(timeout=timeout_s) != 0:
                    failed.append(rank)
            except subprocess.TimeoutExpired:
                failed.append(rank)
    finally:
        for proc, log in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            log.close()
    if failed:
        tail = (out / "logs" / f"{side}-rank{failed[0]}.log").read_text(errors="replace").splitlines()[-5:]
        raise RuntimeError(f"{side} rank {failed[0]} failed: {' | '.join(tail)}")
    return out / "dump"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _rank_main(args: argparse.Namespace) -> None:
    import torch

    from autotest.workloads.engine_lm import engine_copy
    from autotest.workloads.tiny_lm import TinyLMConfig, build_model

    torch.set_num_threads(1)
    rank = None
    if int(os.environ.get("WORLD_SIZE", "1")) > 1:
        import torch.distributed as dist

        dist.init_process_group("gloo")
        rank = dist.get_rank()
    config, length = TinyLMConfig(), 12
    if args.scale:
        layers, hidden, length = (int(v) for v in args.scale.split(","))
        config = TinyLMConfig(hidden_size=hidden, intermediate_size=2 * hidden, num_layers=layers, num_heads=8,
                              num_kv_heads=4, head_dim=hidden // 8, max_positions=2 * length)
    hf = build_model(config, seed=0).eval()
    if args.side == "rollout":
        from autotest.workloads.engine_tp import apply_shard_fault, shard_model

        full = engine_copy(hf).eval()
        model = shard_model(full, rank or 0, args.tp) if args.tp > 1 else full
        if args.tp > 1:
            apply_shard_fault(model, full, args.fault)
        forward = (lambda ids: model(ids)) if args.tp > 1 else (lambda ids: model(ids).logits)
    else:
        model = hf
        forward = (lambda ids: _pipeline_forward(hf, ids, rank or 0, args.pp, args.fault)) if args.pp > 1 \
            else (lambda ids: hf(input_ids=ids).logits)
    from msprobe.pytorch import PrecisionDebugger

    out = Path(args.out)
    config = out / f"msprobe_{args.side}_{os.getpid()}.json"
    config.write_text(json.dumps({"task": args.task, "dump_path": str(out / "dump"), "rank": [], "level": "L0",
                                  "step": [args.step], "async_dump": False,
                                  args.task: {"scope": [], "list": [], "data_mode": ["forward"],
                                              "summary_mode": "statistics"}}))  # fmt: skip
    debugger = PrecisionDebugger(config_path=str(config))
    debugger.set_init_step(args.step)
    for rid in args.requests.split(","):
        ids = torch.tensor([tokens_of(rid, length=length)])
        debugger.start(model=model)
        with torch.no_grad():
            forward(ids)
        debugger.stop()
        line = ({"source": "dispatch_logger", "pid": os.getpid(), "rank": rank, "step": args.step,
                 "phase": "prefill", "requests": [{"request_id": rid, "type": "prefill", "tokens": ids[0].tolist()}]}
                if args.side == "rollout" else
                {"source": "update_actor", "pid": os.getpid(), "rank": rank, "step": args.step,
                 "request_ids": [rid]})  # fmt: skip
        with open(out / "correlation.jsonl", "a", encoding="utf-8") as fh:
            fh.write(json.dumps(line) + "\n")
    debugger.step()
    if rank is not None:
        import torch.distributed as dist

        dist.destroy_process_group()


def _pipeline_forward(hf, ids, rank: int, stages: int, fault: str):
    """This stage's layers of the ``transformers`` model; the hidden state goes on to the next stage's rank."""
    import torch
    import torch.distributed as dist
    from transformers.masking_utils import create_causal_mask

    inner = hf.model
    layers = len(inner.layers)
    per = layers // stages
    mine = range(rank * per, layers if rank == stages - 1 else (rank + 1) * per)
    position_ids = torch.arange(ids.shape[1]).unsqueeze(0)
    if rank == 0:
        hidden = inner.embed_tokens(ids)
    else:
        hidden = torch.empty(ids.shape[0], ids.shape[1], hf.config.hidden_size)
        dist.recv(hidden, src=rank - 1)
    mask = create_causal_mask(config=hf.config, inputs_embeds=hidden, attention_mask=None, cache=None,
                              position_ids=position_ids)
    rotary = inner.rotary_emb(hidden, position_ids)
    for i in mine:
        before = hidden
        hidden = inner.layers[i](hidden, attention_mask=mask, position_embeddings=rotary, position_ids=position_ids)
    if rank < stages - 1:
        dist.send((hidden - before if fault == "pp-residual" else hidden).contiguous(), dst=rank + 1)
        return None
    return hf.lm_head(inner.norm(hidden))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--side", choices=("rollout", "train"), required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--tp", type=int, default=1)
    p.add_argument("--pp", type=int, default=1)
    p.add_argument("--fault", default="")
    p.add_argument("--requests", default="r0,r1")
    p.add_argument("--task", choices=("tensor", "statistics"), default="tensor")
    p.add_argument("--step", type=int, default=1)
    p.add_argument("--scale", help="LAYERS,HIDDEN,TOKENS: a larger model than the embedded one")
    p.add_argument("--rank-process", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.rank_process:
        _rank_main(args)
        return
    scale = tuple(int(v) for v in args.scale.split(",")) if args.scale else None
    dump_side(args.side, Path(args.out), tp=args.tp, pp=args.pp, fault=args.fault, requests=args.requests,
              task=args.task, step=args.step, scale=scale)  # type: ignore[arg-type]


if __name__ == "__main__":
    main()
