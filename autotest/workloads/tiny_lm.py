"""The tiny causal LM and digit tokenizer shared by the embedded CPU workloads.

A real ``transformers`` Qwen3 model (2 layers, hidden 64, ~75k parameters) with random
initialisation and a 16-token vocabulary: nothing is downloaded. The GRPO workload uses
it for the trainer and the rollout copy; the MOPD workload reuses it for student and
teachers. ``response_logprobs`` is the one full-sequence log-prob computation both sides
use, so a difference between them is a difference in weights, dtype or implementation,
never in the formula.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch

#: Token strings in id order: digits first so that ``id == int(digit)``.
VOCAB: tuple[str, ...] = (
    "0", "1", "2", "3", "4", "5", "6", "7", "8", "9",
    "<bos>", "<eos>", "<pad>", "=", "S", "P",
)  # fmt: skip

_TOKEN_RE = re.compile(r"<[a-z]+>|.", re.DOTALL)


@dataclass(frozen=True)
class DigitTokenizer:
    """Maps between token strings and ids; one character is one token, specials are ``<name>``."""

    vocab: tuple[str, ...] = VOCAB

    @property
    def vocab_size(self) -> int:
        """Number of token ids."""
        return len(self.vocab)

    @property
    def bos_id(self) -> int:
        """Id of ``<bos>``, the first prompt token."""
        return self.vocab.index("<bos>")

    @property
    def eos_id(self) -> int:
        """Id of ``<eos>``, which ends a response."""
        return self.vocab.index("<eos>")

    @property
    def pad_id(self) -> int:
        """Id of ``<pad>``, written after a finished response."""
        return self.vocab.index("<pad>")

    def token_id(self, token: str) -> int:
        """Id of one token string; ``ValueError`` when it is not in the vocabulary."""
        return self.vocab.index(token)

    def encode(self, text: str) -> list[int]:
        """Ids of ``text``, e.g. ``"<bos>S12="`` -> ``[10, 14, 1, 2, 13]``."""
        return [self.token_id(tok) for tok in _TOKEN_RE.findall(text)]

    def decode(self, ids: list[int]) -> str:
        """Inverse of ``encode``."""
        return "".join(self.vocab[i] for i in ids)

    def is_digit(self, token_id: int) -> bool:
        """Whether ``token_id`` is one of the digits 0-9."""
        return 0 <= token_id <= 9


@dataclass(frozen=True)
class TinyLMConfig:
    """Shape and initialisation of the tiny Qwen3 model."""

    hidden_size: int = 64
    """Width of the residual stream."""
    intermediate_size: int = 128
    """Width of the SwiGLU MLP."""
    num_layers: int = 2
    """Number of decoder layers."""
    num_heads: int = 4
    """Attention query heads."""
    num_kv_heads: int = 2
    """Attention key/value heads (grouped-query attention)."""
    head_dim: int = 16
    """Width of one attention head."""
    max_positions: int = 32
    """Longest prompt + response the rotary embedding is set up for."""
    rms_norm_eps: float = 1e-6
    """RMSNorm epsilon."""
    initializer_range: float = 0.02
    """Std of the normal init of linear and embedding weights (HF ``initializer_range``)."""
    attn_implementation: str = "sdpa"
    """Attention kernel name passed to transformers (``sdpa`` or ``eager``)."""

    def hf_config(self, vocab_size: int) -> Any:
        """The ``transformers.Qwen3Config`` for this shape."""
        from transformers import Qwen3Config

        return Qwen3Config(
            vocab_size=vocab_size,
            hidden_size=self.hidden_size,
            intermediate_size=self.intermediate_size,
            num_hidden_layers=self.num_layers,
            num_attention_heads=self.num_heads,
            num_key_value_heads=self.num_kv_heads,
            head_dim=self.head_dim,
            max_position_embeddings=self.max_positions,
            rms_norm_eps=self.rms_norm_eps,
            initializer_range=self.initializer_range,
            tie_word_embeddings=True,
            attn_implementation=self.attn_implementation,
        )


def build_model(config: TinyLMConfig, seed: int, dtype: torch.dtype | None = None) -> torch.nn.Module:
    """A freshly initialised ``Qwen3ForCausalLM``; same ``seed`` -> bitwise the same weights.

    The global torch RNG is forked, so building a model never shifts other random streams.
    """
    import torch
    from transformers import Qwen3ForCausalLM

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = Qwen3ForCausalLM(config.hf_config(DigitTokenizer().vocab_size))
    if dtype is not None:
        model = model.to(dtype)
    return model


def forward_logits(model: torch.nn.Module, input_ids: torch.Tensor, cache: Any = None,
                   positions: torch.Tensor | None = None) -> tuple[torch.Tensor, Any]:
    """One forward pass; returns (logits, kv cache). ``cache`` continues a previous call; ``positions`` (the
    engine layout only) gives the position ids instead of the cache length onwards."""
    extra = {} if positions is None else {"positions": positions}
    out = model(input_ids=input_ids, cache=cache, use_cache=True, **extra)
    return out.logits, out.cache


def response_logprobs(
    model: torch.nn.Module, input_ids: torch.Tensor, prompt_len: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """Full-sequence log-probs and entropies of the response tokens, in fp32.

    ``input_ids`` is [batch, prompt_len + response_len], right-padded; causal attention
    means padding after a token never changes that token's value. Returns two
    [batch, response_len] tensors: log p(token) and the entropy of the distribution
    that predicted it. The log-softmax runs in fp32 whatever the model dtype, as
    inference engines do.
    """
    out = model(input_ids=input_ids, use_cache=False)
    logits = out.logits[:, prompt_len - 1 : -1, :].float()
    logp_all = logits.log_softmax(dim=-1)
    targets = input_ids[:, prompt_len:]
    logp = logp_all.gather(-1, targets.unsqueeze(-1)).squeeze(-1)
    entropy = -(logp_all.exp() * logp_all).sum(dim=-1)
    return logp, entropy
