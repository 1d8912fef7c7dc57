"""The intermittent sync faults (autotest.workloads.intermittent_faults) at the hook: which syncs are dropped, and
the stale rank's shard sampled with the previous sync's weights while the other shards are the engine's."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from autotest.errors import UsageError  # noqa: E402
from autotest.workloads.faults import make_fault  # noqa: E402
from autotest.workloads.rollout import RolloutEngine  # noqa: E402
from autotest.workloads.tasks import TASKS  # noqa: E402
from autotest.workloads.tiny_lm import TinyLMConfig, build_model, response_logprobs  # noqa: E402


def _weights(seed: int) -> dict[str, torch.Tensor]:
    return {k: v.detach() for k, v in build_model(TinyLMConfig(), seed=seed).named_parameters()}


def test_sync_skip_alternate_drops_the_odd_syncs_and_every_n_every_nth():
    state = _weights(0)
    alternate, every = make_fault("sync-skip-alternate"), make_fault("sync-skip-every:5")
    assert [v for v in range(12) if not alternate.on_sync(state, v)] == [1, 3, 5, 7, 9, 11]
    assert [v for v in range(12) if not every.on_sync(state, v)] == [5, 10]
    assert make_fault("sync-skip-every").on_sync(state, 5) == {}  # default N 5
    assert alternate.on_sync(state, 0) is state  # the initial sync is whole


@pytest.mark.parametrize("spec,message", [
    ("sync-skip-every:1", "--fault sync-skip-every: N must be 2 or more"),
    ("sync-skip-every:x", "--fault sync-skip-every: needs a positive step"),
    ("sync-skip-alternate:3", "--fault sync-skip-alternate: takes no argument"),
    ("stale-rank:1", "--fault stale-rank: N must be 2 or more ranks"),
])
def test_bad_args_are_one_line(spec, message):
    with pytest.raises(UsageError) as info:
        make_fault(spec)
    assert str(info.value).startswith(message) and "\n" not in str(info.value)


def test_the_stale_rank_samples_its_shard_with_the_previous_sync():
    config = TinyLMConfig()
    engine = RolloutEngine(config, "fp32", seed=0, max_new_tokens=8, fault="stale-rank:4")
    old, new = _weights(0), _weights(1)
    engine.load_weights(old, 0)
    prompts = TASKS["digit_sum"].eval_prompts()[:4]
    first = engine.generate(prompts, 2, 1)  # after the initial sync every rank holds it
    assert first.response_ids.shape[0] == 8
    engine.load_weights(new, 1)
    batch = engine.generate(prompts, 2, 2)
    model_old, model_new = build_model(config, seed=0), build_model(config, seed=1)
    prompt_len = batch.prompt_ids.shape[1]
    ids = torch.cat([batch.prompt_ids, batch.response_ids], dim=1)
    mask = batch.response_mask.bool()
    with torch.no_grad():
        lp_new, _ = response_logprobs(model_new, ids, prompt_len)
        lp_old, _ = response_logprobs(model_old, ids, prompt_len)
    rows = slice(6, 8)  # the last of 4 ranks: the last 2 of 8 rows
    close = lambda a, b, r: torch.allclose(a[r][mask[r]], b[r][mask[r]], atol=1e-5)  # noqa: E731
    assert close(batch.rollout_logprobs, lp_new, slice(0, 6)) and not close(batch.rollout_logprobs, lp_new, rows)
    assert close(batch.rollout_logprobs, lp_old, rows)
    assert engine.weight_version == 1  # the engine reports the new version: the lag is the rank's
