"""The rollout engine's model served tensor-parallel, as vLLM / SGLang shard it over ``torch.distributed`` ranks.

Each rank builds the engine layout of :mod:`autotest.workloads.engine_lm` with its own slice of every sharded
weight, taken from the full engine copy the way an engine's weight loader takes it:

==========================  =========================  ====================================================
module                      weight on rank r           output on rank r
==========================  =========================  ====================================================
``embed_tokens``            vocab rows of rank r       all-reduced: the full embedding (every rank the same)
``qkv_proj``                [q heads | k | v] of r     its heads only: ``[q_r | k_r | v_r]`` (fused and split)
``q_norm`` / ``k_norm``     replicated                 its heads only (split along the head dim)
``o_proj``, ``down_proj``   input columns of rank r    all-reduced (``reduce_results``, vLLM's default)
``gate_up_proj``            [gate_r | up_r]            ``[gate_r | up_r]``
``lm_head``                 vocab rows of rank r       its vocab slice (the logits are gathered after it)
==========================  =========================  ====================================================

With more ranks than key/value heads each kv head lives on ``tp / num_kv_heads`` ranks (vLLM's
``num_kv_head_replicas``): rank r serves kv head ``r // replicas``.

``SHARD_FAULTS`` are the bugs that live in one shard, each applied to the rank's model or its collectives.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import distributed as dist
from torch import nn
from torch.nn import functional as F

from autotest.workloads import engine_lm
from autotest.workloads.engine_lm import RMSNorm, RotaryEmbedding, _rotate_half

#: fault name -> what it does (the sharded dump's ``--fault``)
SHARD_FAULTS = {
    "stale-shard": "rank R's slice of layer 1's down_proj weight is left from an earlier weight version (R: last rank)",
    "fused-split": "every rank takes a contiguous chunk of the fused qkv weight instead of its q, k and v heads",
    "no-allreduce": "layer 0's o_proj skips its all-reduce: every rank goes on with its own partial sum",
}


@dataclass(frozen=True)
class Shard:
    """Where rank ``rank`` of ``size`` sits, and the model's head counts that decide its slices."""

    rank: int
    size: int
    num_heads: int
    num_kv_heads: int
    head_dim: int

    @property
    def kv_replicas(self) -> int:
        return max(1, self.size // self.num_kv_heads)

    def q_heads(self) -> range:
        per = self.num_heads // self.size
        return range(self.rank * per, (self.rank + 1) * per)

    def kv_heads(self) -> range:
        per = max(1, self.num_kv_heads // self.size)
        first = (self.rank // self.kv_replicas) * per
        return range(first, first + per)


def _all_reduce(x: torch.Tensor) -> torch.Tensor:
    dist.all_reduce(x)
    return x


class VocabParallelEmbedding(nn.Module):
    """Vocabulary rows [start, start + rows) on this rank; other ids look up zeros, summed over ranks."""

    def __init__(self, weight: torch.Tensor, start: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(weight.clone())
        self.start = start

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        local = input_ids - self.start
        inside = (local >= 0) & (local < self.weight.shape[0])
        out = F.embedding(local.clamp(0, self.weight.shape[0] - 1), self.weight) * inside.unsqueeze(-1)
        return _all_reduce(out)


class ColumnParallelLinear(nn.Module):
    """Output rows of this rank; no communication (the output stays split)."""

    def __init__(self, weight: torch.Tensor) -> None:
        super().__init__()
        self.weight = nn.Parameter(weight.clone())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.linear(x, self.weight)


class QKVParallelLinear(ColumnParallelLinear):
    """``[q_r | k_r | v_r]``: this rank's query heads and its (possibly replicated) key/value heads."""


class MergedColumnParallelLinear(ColumnParallelLinear):
    """``[gate_r | up_r]``."""


class ParallelLMHead(ColumnParallelLinear):
    """Logits of this rank's vocabulary slice."""


class RowParallelLinear(nn.Module):
    """Input columns of this rank; the partial products are summed over ranks inside the forward."""

    def __init__(self, weight: torch.Tensor) -> None:
        super().__init__()
        self.weight = nn.Parameter(weight.clone())
        self.reduce_results = True

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = F.linear(x, self.weight)
        return _all_reduce(out) if self.reduce_results else out


class Qwen3Attention(nn.Module):
    def __init__(self, full: nn.Module, shard: Shard) -> None:
        super().__init__()
        self.shard = shard
        d = shard.head_dim
        fused = full.qkv_proj.weight.detach()
        rows = {part: fused.narrow(0, *full.qkv_proj.shard_offsets[part]) for part in ("q", "k", "v")}
        q = torch.cat([rows["q"][h * d:(h + 1) * d] for h in shard.q_heads()])
        k = torch.cat([rows["k"][h * d:(h + 1) * d] for h in shard.kv_heads()])
        v = torch.cat([rows["v"][h * d:(h + 1) * d] for h in shard.kv_heads()])
        self.q_size, self.kv_size = q.shape[0], k.shape[0]
        self.qkv_proj = QKVParallelLinear(torch.cat((q, k, v)))
        cols = torch.cat([torch.arange(h * d, (h + 1) * d) for h in shard.q_heads()])
        self.o_proj = RowParallelLinear(full.o_proj.weight.detach()[:, cols])
        self.q_norm, self.k_norm = full.q_norm, full.k_norm
        self.rotary_emb: RotaryEmbedding = full.rotary_emb
        self.scaling = full.scaling

    def forward(self, x: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        batch, length, _ = x.shape
        d = self.shard.head_dim
        q, k, v = self.qkv_proj(x).split([self.q_size, self.kv_size, self.kv_size], dim=-1)
        q = self.q_norm(q.view(batch, length, -1, d)).transpose(1, 2)
        k = self.k_norm(k.view(batch, length, -1, d)).transpose(1, 2)
        v = v.view(batch, length, -1, d).transpose(1, 2)
        cos, sin = self.rotary_emb(x, positions)
        cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)
        q, k = q * cos + _rotate_half(q) * sin, k * cos + _rotate_half(k) * sin
        groups = q.shape[1] // k.shape[1]
        k, v = k.repeat_interleave(groups, dim=1), v.repeat_interleave(groups, dim=1)
        out = F.scaled_dot_product_attention(q, k, v, is_causal=length > 1, scale=self.scaling)
        return self.o_proj(out.transpose(1, 2).reshape(batch, length, -1))


class Qwen3MLP(nn.Module):
    def __init__(self, full: nn.Module, shard: Shard) -> None:
        super().__init__()
        inter = full.intermediate_size
        per = inter // shard.size
        lo, hi = shard.rank * per, (shard.rank + 1) * per
        gate_up = full.gate_up_proj.weight.detach()
        self.gate_up_proj = MergedColumnParallelLinear(torch.cat((gate_up[lo:hi], gate_up[inter + lo:inter + hi])))
        self.down_proj = RowParallelLinear(full.down_proj.weight.detach()[:, lo:hi])
        self.act_fn = full.act_fn

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        gate, up = self.gate_up_proj(x).chunk(2, dim=-1)
        return self.down_proj(self.act_fn(gate) * up)


class Qwen3DecoderLayer(nn.Module):
    def __init__(self, full: nn.Module, shard: Shard) -> None:
        super().__init__()
        self.input_layernorm: RMSNorm = full.input_layernorm
        self.self_attn = Qwen3Attention(full.self_attn, shard)
        self.post_attention_layernorm: RMSNorm = full.post_attention_layernorm
        self.mlp = Qwen3MLP(full.mlp, shard)

    def forward(self, x: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        x = x + self.self_attn(self.input_layernorm(x), positions)
        return x + self.mlp(self.post_attention_layernorm(x))


class Qwen3Model(nn.Module):
    def __init__(self, full: nn.Module, shard: Shard) -> None:
        super().__init__()
        vocab = full.embed_tokens.weight.shape[0]
        per = vocab // shard.size
        self.embed_tokens = VocabParallelEmbedding(full.embed_tokens.weight.detach()[shard.rank * per:][:per],
                                                   shard.rank * per)
        self.layers = nn.ModuleList(Qwen3DecoderLayer(layer, shard) for layer in full.layers)
        self.norm: RMSNorm = full.norm

    def forward(self, input_ids: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        x = self.embed_tokens(input_ids)
        for layer in self.layers:
            x = layer(x, positions)
        return self.norm(x)


class Qwen3ForCausalLM(nn.Module):  # the engine class name: MSProbe keys carry it
    """One rank's tensor-parallel engine model; ``forward`` returns the gathered full-vocabulary logits."""

    def __init__(self, full: engine_lm.Qwen3ForCausalLM, shard: Shard) -> None:
        super().__init__()
        self.shard = shard
        self.model = Qwen3Model(full.model, shard)
        vocab = full.lm_head.weight.shape[0]
        per = vocab // shard.size
        self.lm_head = ParallelLMHead(full.lm_head.weight.detach()[shard.rank * per:][:per])

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        positions = torch.arange(input_ids.shape[1]).unsqueeze(0).expand(input_ids.shape[0], -1)
        local = self.lm_head(self.model(input_ids, positions))
        parts = [torch.empty_like(local) for _ in range(self.shard.size)]
        dist.all_gather(parts, local.contiguous())
        return torch.cat(parts, dim=-1)


def shard_model(full: engine_lm.Qwen3ForCausalLM, rank: int, size: int) -> Qwen3ForCausalLM:
    """Rank ``rank``'s slice of the engine copy ``full`` (the head counts must divide by ``size``, or kv heads
    replicate)."""
    attn = full.model.layers[0].self_attn
    shard = Shard(rank, size, attn.num_heads, attn.num_kv_heads, attn.head_dim)
    if attn.num_heads % size or (size % attn.num_kv_heads and attn.num_kv_heads % size):
        raise ValueError(f"tensor parallel {size} does not divide {attn.num_heads} query / {attn.num_kv_heads} kv heads")
    return Qwen3ForCausalLM(full, shard).eval()


def apply_shard_fault(model: Qwen3ForCausalLM, full: engine_lm.Qwen3ForCausalLM, fault: str) -> None:
    """Break ``model`` (one rank's) the way ``fault`` says; a no-op on the ranks a fault spares."""
    shard = model.shard
    with torch.no_grad():
        if fault == "stale-shard":
            if shard.rank == shard.size - 1:
                weight = model.model.layers[1].mlp.down_proj.weight
                gen = torch.Generator().manual_seed(1)
                weight.add_(0.3 * weight.abs().mean() * torch.randn(weight.shape, generator=gen))
        elif fault == "fused-split":
            fused = full.model.layers[0].self_attn.qkv_proj.weight.detach()
            qkv = model.model.layers[0].self_attn.qkv_proj.weight
            rows = qkv.shape[0]
            # the naive split: rank r takes rows [r*rows, (r+1)*rows) of [q | k | v], ignoring where k and v start
            qkv.copy_(fused[shard.rank * rows:(shard.rank + 1) * rows] if (shard.rank + 1) * rows <= fused.shape[0]
                      else torch.cat((fused[shard.rank * rows:], fused[:(shard.rank + 1) * rows - fused.shape[0]])))
        elif fault == "no-allreduce":
            model.model.layers[0].self_attn.o_proj.reduce_results = False
        elif fault not in ("", "healthy"):
            raise ValueError(f"unknown shard fault {fault!r}; known: {', '.join(SHARD_FAULTS)}")
