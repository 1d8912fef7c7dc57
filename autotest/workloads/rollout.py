"""The rollout (inference) engine of the tiny GRPO workload.

It keeps its own copy of the model, in its own dtype (fp32 or bf16), receives weights
from the trainer through ``load_weights`` every step (the hook point for sync faults),
samples responses with a KV cache and returns the log-probs of the sampled tokens as it
computed them, which is what the mismatch metrics compare the trainer's recompute with.

``layout="engine"`` (GRPO) gives the copy an inference engine's module tree (fused ``qkv_proj``
and ``gate_up_proj``, engine class names; :mod:`.engine_lm`) and converts the trainer's weights
on every sync, as vLLM/SGLang do; ``layout="hf"`` (MOPD students and teachers) keeps the
trainer's own ``transformers`` tree.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from autotest.workloads.device import generator
from autotest.workloads.faults import FaultHooks, make_fault
from autotest.workloads.observer import (
    ROLLOUT_PHASE,
    ROLLOUT_SIDE,
    ForwardObserver,
    NullObserver,
)
from autotest.workloads.tasks import Judge, Prompt
from autotest.workloads.tiny_lm import (
    DigitTokenizer,
    TinyLMConfig,
    build_model,
    forward_logits,
    response_logprobs,
)

if TYPE_CHECKING:
    import torch

DTYPES = ("fp32", "bf16")
LAYOUTS = ("hf", "engine")


@dataclass(frozen=True)
class RolloutBatch:
    """The samples of one step, ordered prompt by prompt (``p0s0, p0s1, ..., p1s0, ...``)."""

    prompts: list[Prompt]
    """The prompt of each sample."""
    prompt_ids: torch.Tensor
    """[batch, prompt_len] prompt token ids (every prompt has the same length)."""
    response_ids: torch.Tensor
    """[batch, response_len] sampled ids, ``<pad>`` after ``<eos>``."""
    response_mask: torch.Tensor
    """[batch, response_len] 1.0 on generated tokens (``<eos>`` included), 0.0 on padding."""
    rollout_logprobs: torch.Tensor
    """[batch, response_len] fp32 log-prob of each sampled token as the engine computed it."""
    request_ids: list[str]
    """``step{S}-p{P}-s{K}`` per sample."""
    weight_version: int
    """Version of the weights that generated the batch (the trainer step they came from)."""
    kv_path: tuple[torch.Tensor, torch.Tensor] | None = None
    """[batch, response_len] each sampled token's scoring forward: the position id it gave its input token and
    the KV-cache length it attended over (engine layout; None otherwise)."""

    def sequences(self) -> list[list[int]]:
        """Prompt + response ids of each sample, without padding."""
        lengths = self.response_mask.sum(dim=1).long().tolist()
        return [
            list(p) + r[:n]
            for p, r, n in zip(self.prompt_ids.tolist(), self.response_ids.tolist(), lengths, strict=True)
        ]

    def token_logprobs(self, values: torch.Tensor) -> tuple[list[list[int]], list[list[int]], list[list[float]]]:
        """Per sample, the response tokens' (positions in prompt + response, token ids, ``values``)."""
        prompt_len = self.prompt_ids.shape[1]
        lengths = self.response_mask.sum(dim=1).long().tolist()
        return ([list(range(prompt_len, prompt_len + n)) for n in lengths],
                [r[:n] for r, n in zip(self.response_ids.tolist(), lengths, strict=True)],
                [v[:n] for v, n in zip(values.tolist(), lengths, strict=True)])

    def responses(self) -> list[list[int]]:
        """Response ids of each sample, without padding."""
        lengths = self.response_mask.sum(dim=1).long().tolist()
        return [r[:n] for r, n in zip(self.response_ids.tolist(), lengths, strict=True)]


def pass_at_1(rewards: Sequence[float]) -> float:
    """pass@1 estimated from samples: the mean reward over every sample of every prompt (each sample
    is one independent first attempt, so with n per prompt this is the unbiased pass@1 of the set)."""
    if not rewards:
        raise ValueError("pass@1 of no samples")
    return sum(rewards) / len(rewards)


def eval_seed_of(seed: int, step: int) -> int:
    """The sampled eval's seed at ``step`` of the run seeded ``seed``: fixed per (seed, step), apart from
    every training stream (those are seeded seed, seed + 1, seed + 2)."""
    return 1_000_003 * (seed + 1) + 7 * step + 5


class RolloutEngine:
    """Generates responses with its own copy of the model."""

    def __init__(
        self,
        model_config: TinyLMConfig,
        dtype: str,
        seed: int,
        max_new_tokens: int,
        fault: str | None = None,
        observer: ForwardObserver | None = None,
        num_threads: int = 1,
        layout: str = "hf",
    ) -> None:
        import torch

        torch.set_num_threads(num_threads)
        self.tokenizer = DigitTokenizer()
        self.dtype = dtype
        self.torch_dtype = {"fp32": torch.float32, "bf16": torch.bfloat16}[dtype]
        if layout not in LAYOUTS:
            raise ValueError(f"layout must be one of {LAYOUTS}, got {layout!r}")
        self.layout = layout
        # Placeholder weights: the first load_weights (version 0) overwrites every parameter.
        if layout == "engine":
            from autotest.workloads.engine_lm import build_engine_model

            self.model = build_engine_model(model_config, dtype=self.torch_dtype).eval()
        else:
            self.model = build_model(model_config, seed=0, dtype=self.torch_dtype).eval()
        self.hooks: FaultHooks = make_fault(fault, seed)
        self.hooks.patch_rollout_model(self.model)
        self.max_new_tokens = max_new_tokens
        self.generator = generator(seed + 1)
        self.observer = observer or NullObserver()
        self.weight_version = -1
        #: the version of the weights this engine really holds (its last load that copied anything); the label
        #: ``weight_version`` follows every sync call, even one a fault dropped
        self.held_weight_version = -1

    def load_weights(self, state_dict: Mapping[str, torch.Tensor], version: int) -> None:
        """Copy the trainer's weights in (cast to the rollout dtype); sync faults act here."""
        import torch

        state_dict = self.hooks.on_sync(state_dict, version)
        if state_dict:
            self.held_weight_version = self.hooks.held_version(version)
        if self.layout == "engine":  # converts training names and layouts into the fused ones
            self.model.load_weights(state_dict.items())
            self.weight_version = version
            return
        params = dict(self.model.named_parameters())
        with torch.no_grad():
            for name, tensor in state_dict.items():
                params[name].copy_(tensor)
        self.weight_version = version

    def checkpoint_state(self) -> dict[str, Any]:
        """What a checkpoint keeps of the engine: its model copy as synced (a sync fault's effect included), the
        weights version, and its sampling RNG."""
        return {"model": self.model.state_dict(), "weight_version": self.weight_version,
                "held_weight_version": self.held_weight_version, "rng": self.generator.get_state()}

    def load_checkpoint_state(self, state: dict[str, Any]) -> None:
        """Restore :meth:`checkpoint_state` (every part but those a resume fault leaves out)."""
        for part in self.hooks.restored_parts("rollout", ("model", "rng")):
            if part == "model":
                self.model.load_state_dict(state["model"])
                self.weight_version = int(state["weight_version"])
                self.held_weight_version = int(state.get("held_weight_version", self.weight_version))
            else:
                self.generator.set_state(state["rng"])

    def _decode(self, prompt_ids: torch.Tensor, greedy: bool, model: Any = None,
                eval_generator: torch.Generator | None = None) -> tuple[torch.Tensor, ...]:
        """Autoregressive decoding with a KV cache; returns (ids, mask, log-probs, position ids, cache lengths),
        the last two per sampled token as its scoring forward saw them (empty outside the engine layout).

        The engine layout hands each decode forward its position ids, as an engine's scheduler does (the cache
        length onwards; ``FaultHooks.decode_positions`` may change them).

        With ``eval_generator`` it is the sampled eval: drawn from that generator (never the rollout's
        own, so training samples do not depend on whether or how often eval ran).
        """
        import torch

        model = self.model if model is None else model
        generator = self.generator if eval_generator is None else eval_generator
        tok = self.tokenizer
        batch = prompt_ids.shape[0]
        done = torch.zeros(batch, dtype=torch.bool)
        ids, masks, logps = [], [], []
        from autotest.workloads.engine_lm import cache_length

        engine = self.layout == "engine"
        prompt_len = prompt_ids.shape[1]
        # the prefill's last input token sits at prompt_len - 1 over a cache of prompt_len entries
        scored_at, cache_lengths = [torch.full((batch,), prompt_len - 1)], [torch.full((batch,), prompt_len)]
        with torch.no_grad():
            logits, cache = forward_logits(model, prompt_ids)
            for _ in range(self.max_new_tokens):
                step_logits = self.hooks.sampling_logits(logits[:, -1, :].float())
                if eval_generator is not None:
                    step_logits = self.hooks.eval_logits(step_logits)
                logp_all = step_logits.log_softmax(dim=-1)
                if greedy:
                    nxt = logp_all.argmax(dim=-1)
                else:  # temperature 1: sample from the model's own distribution
                    drawn = self.hooks.draw_logprobs(logp_all)
                    nxt = torch.multinomial(drawn.exp(), 1, generator=generator).squeeze(1)
                logp = logp_all.gather(1, nxt.unsqueeze(1)).squeeze(1)
                ids.append(torch.where(done, tok.pad_id, nxt))
                logps.append(torch.where(done, 0.0, logp))
                masks.append((~done).float())
                done = done | (nxt == tok.eos_id)
                if bool(done.all()):
                    break
                if engine:
                    positions = self.hooks.decode_positions(torch.full((batch, 1), cache_length(cache)), len(ids))
                    logits, cache = forward_logits(model, ids[-1].unsqueeze(1), cache, positions)
                    scored_at.append(positions[:, -1])
                    cache_lengths.append(torch.full((batch,), cache_length(cache)))
                else:
                    logits, cache = forward_logits(model, ids[-1].unsqueeze(1), cache)
        kv = (torch.stack(scored_at, 1), torch.stack(cache_lengths, 1)) if engine else (torch.empty(0), torch.empty(0))
        return torch.stack(ids, 1), torch.stack(masks, 1), torch.stack(logps, 1), *kv

    def generate(self, prompts: Sequence[Prompt], samples_per_prompt: int, step: int) -> RolloutBatch:
        """Sample ``samples_per_prompt`` responses per prompt at temperature 1."""
        import torch

        prompt_ids = torch.tensor([p.token_ids for p in prompts]).repeat_interleave(samples_per_prompt, dim=0)
        ranks = self.hooks.rollout_ranks(self.model)
        if len(ranks) == 1:
            response_ids, mask, logp, scored_at, cache_lengths = self._decode(prompt_ids, greedy=False)
        else:  # a fault's data-parallel ranks: each samples its shard with its own model (stale-rank)
            response_ids, mask, logp, scored_at, cache_lengths = self._decode_ranks(prompt_ids, ranks)
        return RolloutBatch(
            prompts=[p for p in prompts for _ in range(samples_per_prompt)],
            prompt_ids=prompt_ids,
            response_ids=response_ids,
            response_mask=mask,
            rollout_logprobs=logp,
            request_ids=[f"step{step}-p{i}-s{k}" for i in range(len(prompts)) for k in range(samples_per_prompt)],
            weight_version=self.weight_version,
            kv_path=(scored_at, cache_lengths) if self.layout == "engine" else None,
        )

    def _decode_ranks(self, prompt_ids: torch.Tensor, ranks: Sequence[Any]) -> tuple[torch.Tensor, ...]:
        """:meth:`_decode` of each rank's contiguous shard with its own model, joined (padded to the widest)."""
        import torch

        parts = [self._decode(shard, greedy=False, model=model)
                 for shard, model in zip(prompt_ids.tensor_split(len(ranks)), ranks, strict=True)]
        fills = (self.tokenizer.pad_id, 0.0, 0.0, 0, 0)  # ids, mask, log-probs, KV path: masked past the end

        def joined(i: int) -> torch.Tensor:
            if parts[0][i].dim() < 2:  # no KV-path record outside the engine layout
                return torch.cat([part[i] for part in parts])
            width = max(part[i].shape[1] for part in parts)
            return torch.cat([torch.nn.functional.pad(part[i], (0, width - part[i].shape[1]), value=fills[i])
                              for part in parts])

        return tuple(joined(i) for i in range(len(fills)))

    def evaluate(self, prompts: Sequence[Prompt], judge: Judge) -> float:
        """Greedy accuracy on ``prompts`` graded by ``judge``."""
        import torch

        prompt_ids = torch.tensor([p.token_ids for p in prompts])
        response_ids, mask, *_ = self._decode(prompt_ids, greedy=True, model=self.hooks.eval_model(self.model))
        lengths = mask.sum(dim=1).long().tolist()
        rewards = [judge(p.target, r[:n]) for p, r, n in zip(prompts, response_ids.tolist(), lengths, strict=True)]
        return sum(rewards) / len(rewards)

    def evaluate_sampled(self, prompts: Sequence[Prompt], judge: Judge, samples_per_prompt: int,
                         eval_seed: int) -> float:
        """pass@1 on ``prompts``: the mean reward of ``samples_per_prompt`` samples each, at the rollout's
        temperature, drawn from a generator seeded with ``eval_seed`` alone (the training stream is untouched)."""
        import torch

        prompt_ids = torch.tensor([p.token_ids for p in prompts]).repeat_interleave(samples_per_prompt, dim=0)
        eval_generator = generator(eval_seed)
        response_ids, mask, *_ = self._decode(prompt_ids, greedy=False, model=self.hooks.eval_model(self.model),
                                             eval_generator=eval_generator)
        lengths = mask.sum(dim=1).long().tolist()
        graded = [judge(p.target, r[:n]) for p, r, n in
                  zip([p for p in prompts for _ in range(samples_per_prompt)], response_ids.tolist(), lengths,
                      strict=True)]
        return pass_at_1(graded)

    def observe_prefill(self, batch: RolloutBatch, step: int) -> None:
        """Diagnostics only: one full-sequence forward per sample, wrapped by the observer."""
        import torch

        prompt_len = batch.prompt_ids.shape[1]
        recomputed = []
        with torch.no_grad():
            for rid, seq in zip(batch.request_ids, batch.sequences(), strict=True):
                with self.observer.forward(
                    ROLLOUT_SIDE, step, ROLLOUT_PHASE, [rid], [seq], batch.weight_version, self.model,
                    held_weight_version=self.held_weight_version,
                ):
                    logp, _ = response_logprobs(self.model, torch.tensor([seq]), prompt_len)
                recomputed.append(logp[0].tolist())
        # what the sampler returned, and the same tokens as this model's plain prefill scores them
        positions, token_ids, recorded = batch.token_logprobs(batch.rollout_logprobs)
        samples = list(range(len(batch.request_ids)))
        # the sampler's records carry the KV-cache path each token was scored through, where the engine knows it
        kv = {} if batch.kv_path is None else dict(zip(
            ("position_ids", "cache_lengths"), (batch.token_logprobs(t)[2] for t in batch.kv_path), strict=True))
        kv = {k: [[int(v) for v in row] for row in rows] for k, rows in kv.items()}
        self.observer.record_logprobs("recorded", step, samples, batch.request_ids, positions, token_ids, recorded,
                                      self.dtype, **kv)
        self.observer.record_logprobs("recomputed", step, samples, batch.request_ids, positions, token_ids,
                                      recomputed, self.dtype)

    def close_observer(self) -> None:
        """Let the observer flush what it collected."""
        self.observer.close()
