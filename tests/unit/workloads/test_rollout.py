"""The rollout engine's sampled eval: pass@1 from its own generator, never the training stream; the KV-cache path
each sampled token was scored through."""

from __future__ import annotations

import pytest
import torch

from autotest.workloads.rollout import RolloutEngine, eval_seed_of, pass_at_1
from autotest.workloads.tasks import TASKS
from autotest.workloads.tiny_lm import TinyLMConfig, build_model


def _engine(fault: str | None = None) -> RolloutEngine:
    config = TinyLMConfig()
    engine = RolloutEngine(config, "fp32", seed=0, max_new_tokens=8, fault=fault)
    engine.load_weights({k: v.detach() for k, v in build_model(config, seed=0).named_parameters()}, 0)
    return engine


def test_pass_at_1_is_the_mean_over_every_sample() -> None:
    assert pass_at_1([1.0, 0.0, 1.0, 1.0]) == 0.75
    with pytest.raises(ValueError, match="no samples"):
        pass_at_1([])


def test_eval_seeds_differ_by_run_seed_and_step_and_stay_off_the_training_seeds() -> None:
    seeds = {eval_seed_of(s, step) for s in range(20) for step in range(0, 50, 5)}
    assert len(seeds) == 200 and not seeds & set(range(0, 100))


def test_sampled_eval_is_the_graded_mean_and_leaves_the_training_stream_alone() -> None:
    task = TASKS["digit_sum"]
    engine = _engine()
    before = engine.generator.get_state()
    graded: list[float] = []

    def judge(target: int, response: list[int]) -> float:
        graded.append(float(len(response) % 2))
        return graded[-1]

    score = engine.evaluate_sampled(task.eval_prompts(), judge, samples_per_prompt=32, eval_seed=7)
    assert len(graded) == 9 * 32 and score == pytest.approx(sum(graded) / len(graded))
    assert torch.equal(engine.generator.get_state(), before)
    again = engine.evaluate_sampled(task.eval_prompts(), judge, samples_per_prompt=32, eval_seed=7)
    other = engine.evaluate_sampled(task.eval_prompts(), judge, samples_per_prompt=32, eval_seed=8)
    assert again == score and other != score


def test_eval_temperature_moves_the_sampled_eval_only() -> None:
    task = TASKS["digit_sum"]
    prompts = task.eval_prompts()

    def length(target: int, response: list[int]) -> float:
        return float(len(response))

    clean, hot = _engine(), _engine("eval-temperature:3")
    assert clean.evaluate(prompts, length) == hot.evaluate(prompts, length)  # greedy unchanged
    assert clean.evaluate_sampled(prompts, length, 32, 1) != hot.evaluate_sampled(prompts, length, 32, 1)
    batch_clean, batch_hot = clean.generate(prompts, 4, 1), hot.generate(prompts, 4, 1)
    assert torch.equal(batch_clean.response_ids, batch_hot.response_ids)  # training samples unchanged


def _engine_layout(fault: str | None = None) -> RolloutEngine:
    config = TinyLMConfig()
    engine = RolloutEngine(config, "fp32", seed=0, max_new_tokens=8, fault=fault, layout="engine")
    engine.load_weights({k: v.detach() for k, v in build_model(config, seed=0).named_parameters()}, 0)
    return engine


def test_the_engine_records_each_token_s_kv_cache_path_and_decode_positions_shifts_only_the_decode() -> None:
    prompts = TASKS["digit_sum"].eval_prompts()[:4]
    clean, shifted = (_engine_layout(f).generate(prompts, 2, step=1) for f in (None, "decode-positions"))
    prompt_len = clean.prompt_ids.shape[1]
    position_ids, cache_lengths = clean.kv_path
    width = position_ids.shape[1]
    assert position_ids[0].tolist() == list(range(prompt_len - 1, prompt_len - 1 + width))
    assert cache_lengths[0].tolist() == list(range(prompt_len, prompt_len + width))
    bad_ids, bad_cache = shifted.kv_path
    assert bad_ids[:, 0].tolist() == position_ids[:, 0].tolist()  # the prefill is right
    assert bad_ids[0, 1:].tolist() == list(range(prompt_len + 1, prompt_len + bad_ids.shape[1]))  # one too high
    assert bad_cache[0].tolist() == list(range(prompt_len, prompt_len + bad_cache.shape[1]))
    # same first token, same log-prob (scored by the prefill); the decode-scored ones move
    assert torch.equal(clean.response_ids[:, 0], shifted.response_ids[:, 0])
    assert torch.equal(clean.rollout_logprobs[:, 0], shifted.rollout_logprobs[:, 0])
    assert not torch.equal(clean.rollout_logprobs[:, 1], shifted.rollout_logprobs[:, 1])
