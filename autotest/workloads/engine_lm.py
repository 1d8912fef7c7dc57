"""The rollout engine's model copy, laid out as inference engines lay it out.

vLLM, SGLang and lmdeploy do not run the training framework's module tree: they fuse the q/k/v
projections into one ``qkv_proj`` and the gate/up projections into one ``gate_up_proj`` (one
matmul instead of three or two) and use their own classes (``QKVParallelLinear``,
``MergedColumnParallelLinear``, ``RowParallelLinear``, ``RMSNorm``, ``VocabParallelEmbedding``,
``ParallelLMHead``). Weight sync therefore converts layouts: each training tensor is copied into
its shard of the fused parameter (vLLM's ``stacked_params_mapping`` + ``weight_loader``), which
is also how a partial sync (a never-synced layer) leaves stale shards behind.

The model computes the same function as ``transformers``' Qwen3 (same RMSNorm, rotary and
attention math), so the tiny workload's healthy fp32 mismatch stays at rounding level; only the
module names, classes and the fused matmuls differ, as they do between a trainer and an engine.
Module paths, as MSProbe's L0 dump sees them::

    model.embed_tokens                          VocabParallelEmbedding
    model.layers.N.input_layernorm              RMSNorm
    model.layers.N.self_attn.qkv_proj           QKVParallelLinear   [q | k | v] along the output dim
    model.layers.N.self_attn.q_norm / k_norm    RMSNorm
    model.layers.N.self_attn.o_proj             RowParallelLinear
    model.layers.N.post_attention_layernorm     RMSNorm
    model.layers.N.mlp.gate_up_proj             MergedColumnParallelLinear   [gate | up]
    model.layers.N.mlp.down_proj                RowParallelLinear
    model.norm                                  RMSNorm
    lm_head                                     ParallelLMHead (tied to embed_tokens)
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn
from torch.nn import functional as F

from autotest.workloads.tiny_lm import DigitTokenizer, TinyLMConfig

# (fused param, training param, shard id) as in vLLM's Qwen3 ``stacked_params_mapping``.
STACKED_PARAMS: tuple[tuple[str, str, str], ...] = (
    (".qkv_proj", ".q_proj", "q"),
    (".qkv_proj", ".k_proj", "k"),
    (".qkv_proj", ".v_proj", "v"),
    (".gate_up_proj", ".gate_proj", "gate"),
    (".gate_up_proj", ".up_proj", "up"),
)


class RMSNorm(nn.Module):
    """The engine's RMSNorm; same math as Qwen3RMSNorm (fp32 variance, eps inside the root)."""

    def __init__(self, hidden_size: int, eps: float) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(hidden_size))
        self.variance_epsilon = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        dtype = x.dtype
        x = x.to(torch.float32)
        x = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.variance_epsilon)
        return self.weight * x.to(dtype)


class _Linear(nn.Module):
    """A bias-free linear layer; subclasses carry the engine's class names and shard layout."""

    def __init__(self, in_features: int, shard_sizes: dict[str, int] | int) -> None:
        super().__init__()
        sizes = shard_sizes if isinstance(shard_sizes, dict) else {"": shard_sizes}
        self.shard_offsets: dict[str, tuple[int, int]] = {}
        start = 0
        for shard, size in sizes.items():
            self.shard_offsets[shard] = (start, size)
            start += size
        self.weight = nn.Parameter(torch.empty(start, in_features))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.linear(x, self.weight)

    def weight_loader(self, loaded: torch.Tensor, shard: str = "") -> None:
        """Copy a training tensor into its rows of the (fused) weight."""
        start, size = self.shard_offsets[shard]
        if loaded.shape != (size, self.weight.shape[1]):
            raise ValueError(f"shard {shard!r}: expected {(size, self.weight.shape[1])}, got {tuple(loaded.shape)}")
        self.weight.data.narrow(0, start, size).copy_(loaded)


class QKVParallelLinear(_Linear):
    """q, k and v projections in one matmul: output ``[q | k | v]``."""


class MergedColumnParallelLinear(_Linear):
    """gate and up projections in one matmul: output ``[gate | up]``."""


class RowParallelLinear(_Linear):
    """o_proj / down_proj (one shard at TP=1)."""


class VocabParallelEmbedding(nn.Embedding):
    """Token embedding (the engine's class name)."""


class ParallelLMHead(nn.Module):
    """Output projection, tied to the embedding weight or its own."""

    def __init__(self, embedding: nn.Embedding, tied: bool = True) -> None:
        super().__init__()
        self.weight = embedding.weight if tied else nn.Parameter(torch.empty_like(embedding.weight))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.linear(x, self.weight)


def _rotate_half(x: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


class RotaryEmbedding(nn.Module):
    """Default RoPE (no scaling), cos/sin in the activation dtype as transformers computes them."""

    def __init__(self, head_dim: int, theta: float) -> None:
        super().__init__()
        inv_freq = 1.0 / (theta ** (torch.arange(0, head_dim, 2, dtype=torch.float) / head_dim))
        self.register_buffer("inv_freq", inv_freq, persistent=False)

    def forward(self, x: torch.Tensor, positions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        freqs = positions[..., None].float() * self.inv_freq
        emb = torch.cat((freqs, freqs), dim=-1)
        return emb.cos().to(x.dtype), emb.sin().to(x.dtype)


class Qwen3Attention(nn.Module):
    def __init__(self, cfg: TinyLMConfig, theta: float) -> None:
        super().__init__()
        self.num_heads, self.num_kv_heads, self.head_dim = cfg.num_heads, cfg.num_kv_heads, cfg.head_dim
        self.q_size, self.kv_size = cfg.num_heads * cfg.head_dim, cfg.num_kv_heads * cfg.head_dim
        self.qkv_proj = QKVParallelLinear(cfg.hidden_size, {"q": self.q_size, "k": self.kv_size, "v": self.kv_size})
        self.o_proj = RowParallelLinear(self.q_size, cfg.hidden_size)
        self.q_norm = RMSNorm(cfg.head_dim, cfg.rms_norm_eps)
        self.k_norm = RMSNorm(cfg.head_dim, cfg.rms_norm_eps)
        self.rotary_emb = RotaryEmbedding(cfg.head_dim, theta)
        self.scaling = cfg.head_dim**-0.5

    def forward(self, x: torch.Tensor, positions: torch.Tensor, kv: list[torch.Tensor] | None) -> torch.Tensor:
        batch, length, _ = x.shape
        q, k, v = self.qkv_proj(x).split([self.q_size, self.kv_size, self.kv_size], dim=-1)
        q = self.q_norm(q.view(batch, length, -1, self.head_dim)).transpose(1, 2)
        k = self.k_norm(k.view(batch, length, -1, self.head_dim)).transpose(1, 2)
        v = v.view(batch, length, -1, self.head_dim).transpose(1, 2)
        cos, sin = self.rotary_emb(x, positions)
        cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)
        q, k = q * cos + _rotate_half(q) * sin, k * cos + _rotate_half(k) * sin
        if kv is not None:  # the paged KV cache of an engine, as one tensor pair per layer
            if kv:
                k, v = torch.cat((kv[0], k), dim=2), torch.cat((kv[1], v), dim=2)
            kv[:] = [k, v]
        groups = self.num_heads // self.num_kv_heads
        k, v = k.repeat_interleave(groups, dim=1), v.repeat_interleave(groups, dim=1)
        # Causal over the new tokens; one decoded token attends to the whole cache.
        out = F.scaled_dot_product_attention(q, k, v, is_causal=length > 1, scale=self.scaling)
        return self.o_proj(out.transpose(1, 2).reshape(batch, length, -1))


class Qwen3MLP(nn.Module):
    def __init__(self, cfg: TinyLMConfig) -> None:
        super().__init__()
        self.intermediate_size = cfg.intermediate_size
        self.gate_up_proj = MergedColumnParallelLinear(
            cfg.hidden_size, {"gate": cfg.intermediate_size, "up": cfg.intermediate_size}
        )
        self.down_proj = RowParallelLinear(cfg.intermediate_size, cfg.hidden_size)
        # Applied to the gate half (vLLM's SiluAndMul); a plain module so a fault can swap it.
        self.act_fn: nn.Module = nn.SiLU()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        gate, up = self.gate_up_proj(x).chunk(2, dim=-1)
        return self.down_proj(self.act_fn(gate) * up)


class Qwen3DecoderLayer(nn.Module):
    def __init__(self, cfg: TinyLMConfig, theta: float) -> None:
        super().__init__()
        self.input_layernorm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)
        self.self_attn = Qwen3Attention(cfg, theta)
        self.post_attention_layernorm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)
        self.mlp = Qwen3MLP(cfg)

    def forward(self, x: torch.Tensor, positions: torch.Tensor, kv: list[torch.Tensor] | None) -> torch.Tensor:
        x = x + self.self_attn(self.input_layernorm(x), positions, kv)
        return x + self.mlp(self.post_attention_layernorm(x))


class Qwen3Model(nn.Module):
    def __init__(self, cfg: TinyLMConfig, vocab_size: int, theta: float) -> None:
        super().__init__()
        self.embed_tokens = VocabParallelEmbedding(vocab_size, cfg.hidden_size)
        self.layers = nn.ModuleList(Qwen3DecoderLayer(cfg, theta) for _ in range(cfg.num_layers))
        self.norm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)

    def forward(self, input_ids: torch.Tensor, positions: torch.Tensor, cache: list[list[torch.Tensor]] | None):
        x = self.embed_tokens(input_ids)
        for i, layer in enumerate(self.layers):
            x = layer(x, positions, cache[i] if cache is not None else None)
        return self.norm(x)


@dataclass
class EngineOutput:
    """What ``tiny_lm.forward_logits`` / ``response_logprobs`` read from a model call."""

    logits: torch.Tensor
    cache: list[list[torch.Tensor]] | None


class Qwen3ForCausalLM(nn.Module):
    """The engine-layout tiny Qwen3. ``load_weights`` takes training (HF) names."""

    def __init__(self, cfg: TinyLMConfig, vocab_size: int, theta: float, tie_word_embeddings: bool = True) -> None:
        super().__init__()
        self.model = Qwen3Model(cfg, vocab_size, theta)
        self.lm_head = ParallelLMHead(self.model.embed_tokens, tied=tie_word_embeddings)

    def forward(self, input_ids: torch.Tensor, cache: Any = None, use_cache: bool = False,
                positions: torch.Tensor | None = None) -> EngineOutput:
        """``positions`` ([batch, length] position ids) as an engine's scheduler hands them over; by default
        the cache length onwards."""
        if use_cache and cache is None:
            cache = [[] for _ in self.model.layers]
        if positions is None:
            positions = torch.arange(cache_length(cache), cache_length(cache) + input_ids.shape[1])
            positions = positions.unsqueeze(0).expand(input_ids.shape[0], -1)
        hidden = self.model(input_ids, positions, cache if use_cache else None)
        return EngineOutput(self.lm_head(hidden), cache if use_cache else None)

    def load_weights(self, weights: Iterable[tuple[str, torch.Tensor]]) -> set[str]:
        """Copy training tensors in, converting to the fused layout; returns the engine params touched."""
        params = dict(self.named_parameters())
        loaded: set[str] = set()
        with torch.no_grad():
            for name, tensor in weights:
                for fused, part, shard in STACKED_PARAMS:
                    if part in name:
                        target = name.replace(part, fused)
                        module = self.get_submodule(target.removesuffix(".weight"))
                        module.weight_loader(tensor.to(module.weight.dtype), shard)
                        loaded.add(target)
                        break
                else:
                    if name not in params:
                        raise KeyError(f"{name}: no engine parameter of this name (and no known fusion)")
                    params[name].copy_(tensor)
                    loaded.add(name)
        return loaded


def cache_length(cache: Any) -> int:
    """Entries per sequence in an engine-layout KV cache (0 for none or an empty one)."""
    return int(cache[0][0].shape[2]) if cache and cache[0] else 0


def _rope_theta(hf_config: Any) -> float:
    params = getattr(hf_config, "rope_parameters", None) or {}
    return float(params.get("rope_theta", getattr(hf_config, "rope_theta", 10000.0)))


def engine_copy(hf_model: nn.Module) -> Qwen3ForCausalLM:
    """An engine-layout copy of a ``transformers`` Qwen3ForCausalLM, weights converted by ``load_weights``."""
    c = hf_model.config
    cfg = TinyLMConfig(
        hidden_size=c.hidden_size, intermediate_size=c.intermediate_size, num_layers=c.num_hidden_layers,
        num_heads=c.num_attention_heads, num_kv_heads=c.num_key_value_heads, head_dim=c.head_dim,
        max_positions=c.max_position_embeddings, rms_norm_eps=c.rms_norm_eps,
    )  # fmt: skip
    model = Qwen3ForCausalLM(cfg, c.vocab_size, _rope_theta(c), tie_word_embeddings=c.tie_word_embeddings)
    params = hf_model.named_parameters()  # tied lm_head is not listed twice
    model.load_weights((n, p.detach()) for n, p in params)
    return model.to(next(hf_model.parameters()).dtype)


def build_engine_model(config: TinyLMConfig, dtype: torch.dtype | None = None) -> Qwen3ForCausalLM:
    """An engine-layout model with placeholder weights (the first weight sync overwrites all)."""
    theta = _rope_theta(config.hf_config(DigitTokenizer().vocab_size))
    model = Qwen3ForCausalLM(config, DigitTokenizer().vocab_size, theta)
    with torch.no_grad():
        for p in model.parameters():
            p.zero_()
    return model.to(dtype) if dtype is not None else model
