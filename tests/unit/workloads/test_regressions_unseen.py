"""The unseen regressions (issue 30 item 7): each hook changes what its docstring says, and nothing else."""

from __future__ import annotations

import pytest
import torch

from autotest.errors import UsageError
from autotest.workloads.faults import make_fault
from autotest.workloads.grpo import GRPOConfig
from autotest.workloads.regressions import MOPD_REGRESSIONS, REGRESSIONS
from autotest.workloads.regressions_unseen import UNSEEN_MOPD, UNSEEN_REGRESSIONS
from autotest.workloads.tiny_lm import DigitTokenizer, TinyLMConfig, build_model


class _Rows:
    def __init__(self) -> None:
        self.rows: list[dict] = []

    def write(self, row: dict) -> None:
        self.rows.append(row)


def test_registered_documented_and_the_mopd_ones_accepted_by_mopd() -> None:
    assert len(UNSEEN_REGRESSIONS) >= 10
    for cls in UNSEEN_REGRESSIONS:
        assert REGRESSIONS[cls.name] is cls and cls.__doc__
        assert cls.expected["verdict"] in ("PASS", "FAIL", "ERROR") and cls.expected["triage"], cls.name
    assert set(UNSEEN_MOPD) <= set(MOPD_REGRESSIONS)
    from autotest.workloads.mopd import ACCEPTED_FAULTS

    assert set(UNSEEN_MOPD) <= set(ACCEPTED_FAULTS)


def test_sync_last_bucket_drops_the_final_norm_after_the_initial_sync() -> None:
    state = {n: p.detach() for n, p in build_model(TinyLMConfig(), seed=0).named_parameters()}
    hooks = make_fault("sync-last-bucket")
    assert hooks.on_sync(state, 0) is state
    synced = hooks.on_sync(state, 3)
    assert set(state) - set(synced) == {"model.norm.weight"}
    assert all(synced[k] is state[k] for k in synced)


def test_stale_old_logprobs_hands_back_the_previous_steps_values() -> None:
    hooks = make_fault("stale-old-logprobs")
    first, second = torch.full((4, 3), -1.0), torch.full((4, 5), -2.0)
    assert torch.equal(hooks.on_actor_logprobs(1, first), first)  # nothing earlier yet
    stale = hooks.on_actor_logprobs(2, second)
    assert stale.shape == second.shape
    assert torch.equal(stale[:, :3], first) and torch.equal(stale[:, 3:], second[:, 3:])
    assert torch.equal(second, torch.full((4, 5), -2.0))  # the trainer's own tensor is untouched
    assert torch.equal(hooks.on_actor_logprobs(3, first)[:, :3], second[:, :3])


def test_eos_banned_never_draws_eos_and_reports_what_it_was_given() -> None:
    hooks = make_fault("eos-banned")
    logp = torch.randn(2, 16).log_softmax(-1)
    drawn = hooks.draw_logprobs(logp)
    eos = DigitTokenizer().eos_id
    assert torch.isinf(drawn[:, eos]).all()
    assert torch.equal(torch.cat([drawn[:, :eos], drawn[:, eos + 1:]], 1), torch.cat([logp[:, :eos], logp[:, eos + 1:]], 1))
    assert not torch.isinf(logp).any()  # the reported log-probs are not filtered
    assert torch.equal(hooks.sampling_logits(logp), logp)


def test_eval_lags_scores_the_previous_eval_points_weights() -> None:
    hooks = make_fault("eval-lags")
    model = torch.nn.Linear(2, 2)
    assert hooks.eval_model(model) is model and hooks.eval_model(model) is model  # step 0: its own weights
    at_zero = model.weight.detach().clone()
    with torch.no_grad():
        model.weight.add_(1.0)
    lagged = hooks.eval_model(model)
    assert torch.equal(lagged.weight, at_zero) and hooks.eval_model(model) is lagged  # greedy eval, same point
    at_one = model.weight.detach().clone()
    with torch.no_grad():
        model.weight.add_(1.0)
    assert torch.equal(hooks.eval_model(model).weight, at_one)


def test_minibatch_key_lost_changes_only_the_mini_batch_count() -> None:
    from autotest.workloads.mopd import MOPDConfig

    for spec, config in (("minibatch-key-lost", GRPOConfig()), ("mopd-minibatch-key-lost", MOPDConfig("s"))):
        changed = make_fault(spec).configure(config)
        assert config.mini_batches > 1 and changed.mini_batches == 1
        assert {k: v for k, v in vars(changed).items() if k != "mini_batches"} == \
            {k: v for k, v in vars(config).items() if k != "mini_batches"}


def test_tracker_ema_smooths_each_scalar_but_not_the_step() -> None:
    inner = _Rows()
    tracker = make_fault("tracker-ema:0.5").wrap_tracker(inner)
    tracker.write({"step": 1, "r": 1.0, "tag": "x"})
    tracker.write({"step": 2, "r": 0.0, "e": 4.0})
    tracker.write({"step": 3, "r": 0.0})
    assert inner.rows == [{"step": 1, "r": 1.0, "tag": "x"}, {"step": 2, "r": 0.5, "e": 4.0}, {"step": 3, "r": 0.25}]
    with pytest.raises(UsageError, match="within"):
        make_fault("tracker-ema:1.5").wrap_tracker(inner)


def test_length_from_shape_logs_the_longest_as_the_mean() -> None:
    inner = _Rows()
    tracker = make_fault("length-from-shape").wrap_tracker(inner)
    tracker.write({"step": 1, "response/response_len/mean": 2.5, "response/response_len/max": 8.0, "x": 1.0})
    tracker.write({"step": 1, "train_metrics/worker_0/loss": 0.1})
    assert inner.rows == [{"step": 1, "response/response_len/mean": 8.0, "response/response_len/max": 8.0, "x": 1.0},
                          {"step": 1, "train_metrics/worker_0/loss": 0.1}]


def test_repeat_shard_keeps_only_the_lowest_third_of_targets() -> None:
    from autotest.workloads.tasks import TASKS

    prompts = [TASKS["digit_sum"].prompt(t) for t in range(1, 10)] * 7
    out = make_fault("repeat-shard").on_prompts(prompts, step=4)
    assert len(out) == len(prompts) and {p.target for p in out} == {1, 2, 3}
    assert all(a is b for a, b in zip(prompts, out) if a.target <= 3)
    assert make_fault("").on_prompts(prompts, step=4) == prompts


def test_route_off_by_one_shifts_every_source_by_one_sample() -> None:
    hooks = make_fault("route-off-by-one")
    sources = ["a", "a", "b", "a", "b"]
    assert hooks.route_sources(sources, step=1) == ["b", "a", "a", "b", "a"]
    assert hooks.route_sources([], step=1) == []


def test_seq_mean_loss_divides_each_row_by_its_own_length_times_the_responses() -> None:
    hooks = make_fault("seq-mean-loss")
    mask = torch.tensor([[1.0, 1.0, 1.0, 0.0], [1.0, 0.0, 0.0, 0.0], [0.0, 0.0, 0.0, 0.0]])
    divisor = hooks.loss_normaliser(mask.sum(), mask, micro_batches=2)
    assert divisor.shape == (3, 1)
    assert divisor.flatten().tolist() == [3 * 6, 1 * 6, 1 * 6]  # an empty row divides by 1, never 0
    assert make_fault("").loss_normaliser(mask.sum(), mask, 2) is not None


def test_a_per_row_divisor_weighs_each_response_alike_and_the_default_keeps_the_token_mean() -> None:
    from types import SimpleNamespace

    from autotest.workloads.trainer import ppo_clip_update

    def loss(normaliser):  # one update of a fresh model on a short and a long response, advantages 1
        model = build_model(TinyLMConfig(), seed=0)
        ids = torch.randint(0, DigitTokenizer().vocab_size, (2, 8), generator=torch.Generator().manual_seed(0))
        mask = torch.tensor([[1.0, 0, 0, 0], [1.0, 1, 1, 1]])
        optim = SimpleNamespace(clip_eps=0.2, micro_batch_size=2, max_grad_norm=1e9)
        out = ppo_clip_update(model, torch.optim.SGD(model.parameters(), lr=0.0), optim, ids, 4, mask,
                              torch.zeros(2, 4), torch.ones(2, 1), torch.arange(2), loss_normaliser=normaliser)
        return out["loss"]

    # the same per-token losses, aggregated two ways
    token_mean = loss(None)
    seq_mean = loss(make_fault("seq-mean-loss").loss_normaliser)
    assert token_mean != seq_mean
    assert loss(make_fault("").loss_normaliser) == token_mean  # the identity hook is the default, bit for bit


def test_entropy_from_next_step_writes_each_steps_entropy_with_the_next_ones() -> None:
    class _Closing(_Rows):
        closed = False

        def close(self) -> None:
            self.closed = True

    inner = _Closing()
    tracker = make_fault("entropy-from-next-step").wrap_tracker(inner)
    tracker.write({"step": 0, "eval/accuracy": 0.0})
    tracker.write({"step": 1, "entropy/mean": 2.0, "r": 0.1})
    tracker.write({"step": 1, "train_metrics/worker_0/loss": 0.5})
    assert inner.rows == [{"step": 0, "eval/accuracy": 0.0}]  # step 1 waits for step 2's summary
    tracker.write({"step": 2, "entropy/mean": 1.5, "r": 0.2})
    tracker.write({"step": 3, "entropy/mean": 1.0, "r": 0.3})
    tracker.close()
    assert inner.rows == [{"step": 0, "eval/accuracy": 0.0}, {"step": 1, "entropy/mean": 1.5, "r": 0.1},
                          {"step": 1, "train_metrics/worker_0/loss": 0.5}, {"step": 2, "entropy/mean": 1.0, "r": 0.2},
                          {"step": 3, "entropy/mean": 1.0, "r": 0.3}]  # the last keeps its own
    assert inner.closed


def test_prompts_drawn_twice_keeps_the_size_with_half_the_distinct_prompts() -> None:
    from autotest.workloads.tasks import TASKS

    prompts = [TASKS["digit_sum"].prompt(t) for t in range(1, 9)]
    out = make_fault("prompts-drawn-twice").on_prompts(prompts, step=3)
    assert len(out) == 8 and out == [prompts[i] for i in (0, 0, 1, 1, 2, 2, 3, 3)]
    odd = make_fault("prompts-drawn-twice").on_prompts(prompts[:5], step=3)
    assert odd == [prompts[i] for i in (0, 0, 1, 1, 2)]


def test_sync_half_buffer_sends_half_the_parameters_on_odd_syncs_only() -> None:
    state = {n: p.detach() for n, p in build_model(TinyLMConfig(), seed=0).named_parameters()}
    hooks = make_fault("sync-half-buffer")
    assert hooks.on_sync(state, 0) is state and hooks.on_sync(state, 2) is state
    staged = hooks.on_sync(state, 3)
    total = sum(t.numel() for t in state.values())
    assert 0 < sum(t.numel() for t in staged.values()) <= total // 2
    assert list(staged) == list(state)[: len(staged)]  # a prefix in state-dict order
    assert hooks.held_version(3) == 3  # what it sent is labelled and held as the version


def test_sync_swap_before_copy_serves_the_sync_before_and_says_so() -> None:
    hooks = make_fault("sync-swap-before-copy")
    v0, v1, v2 = ({"w": torch.full((2,), float(v))} for v in range(3))
    assert hooks.on_sync(v0, 0) is v0
    assert torch.equal(hooks.on_sync(v1, 1)["w"], v0["w"])
    v1["w"].add_(10.0)  # the trainer's tensor moves on: the buffer holds a copy
    assert torch.equal(hooks.on_sync(v2, 2)["w"], torch.full((2,), 1.0))
    assert [hooks.held_version(v) for v in (0, 1, 2)] == [0, 0, 1]
    assert make_fault("").held_version(2) == 2


def test_resume_prompt_order_leaves_out_the_drivers_rng_alone() -> None:
    hooks = make_fault("resume-loader-state-lost")
    assert hooks.restored_parts("driver", ("rng",)) == ()
    assert hooks.restored_parts("rollout", ("model", "rng")) == ("model", "rng")
    assert hooks.restored_parts("trainer", ("model", "optimizer", "rng")) == ("model", "optimizer", "rng")
