"""The detection benchmark's regressions: each changes what it says, by the magnitude it is given."""

from __future__ import annotations

import pytest
import torch

from autotest.errors import UsageError
from autotest.workloads.faults import FAULTS, catalogue, make_fault
from autotest.workloads.grpo import GRPOConfig
from autotest.workloads.regressions import REGRESSIONS


def test_regressions_share_the_switch_but_not_the_catalogue() -> None:
    assert not set(REGRESSIONS) & set(FAULTS)
    assert {f["name"] for f in catalogue()} == set(FAULTS)
    with pytest.raises(UsageError, match="regressions: .*misroute"):
        make_fault("no-such-thing")
    with pytest.raises(UsageError, match="fraction within"):
        make_fault("judge-drops:1.5")


def test_lr_scale_scales_the_learning_rate() -> None:
    assert make_fault("lr-scale:0.7").configure(GRPOConfig()).lr == pytest.approx(GRPOConfig().lr * 0.7)


def test_judge_drops_scores_about_the_fraction_of_correct_answers_zero_and_never_helps() -> None:
    judge = make_fault("judge-drops:0.3", seed=5).wrap_judge(lambda target, response: float(response[0] == target))
    correct = [judge(t, [t, i]) for t in range(10) for i in range(100)]
    assert 0.6 < sum(correct) / len(correct) < 0.8
    assert all(judge(1, [2, i]) == 0.0 for i in range(50))  # a wrong answer stays wrong
    assert judge(3, [3, 7]) == judge(3, [3, 7])  # reproducible


def test_misroute_sends_about_the_fraction_to_the_other_domain() -> None:
    hooks = make_fault("misroute:0.2", seed=1)
    sources = ["digit_sum", "digit_product"] * 500
    routed = hooks.route_sources(sources, step=3)
    moved = sum(a != b for a, b in zip(sources, routed))
    assert 0.15 < moved / len(sources) < 0.25
    assert set(routed) == set(sources)
    assert routed == hooks.route_sources(sources, step=3)


def test_sampling_temperature_and_stale_eval() -> None:
    logits = torch.tensor([[2.0, 0.0]])
    assert torch.equal(make_fault("sampling-temperature:2").sampling_logits(logits), logits / 2)
    stale = make_fault("stale-eval")
    model = torch.nn.Linear(2, 2)
    frozen = stale.eval_model(model)
    with torch.no_grad():
        model.weight.add_(1.0)
    assert stale.eval_model(model) is frozen and not torch.equal(frozen.weight, model.weight)
    assert make_fault("").eval_model(model) is model


def test_the_catalogue_spans_every_part_of_the_training_path() -> None:
    assert len(REGRESSIONS) >= 12
    for name, cls in REGRESSIONS.items():
        # documented, with the verdict measured at the default ARG (PASS: below the MDE; ERROR: the log, not
        # the training, changed)
        assert cls.__doc__ and cls.expected["verdict"].startswith(("PASS", "FAIL", "ERROR")), name
    from autotest.workloads.regressions import MOPD_REGRESSIONS

    assert set(MOPD_REGRESSIONS) <= set(REGRESSIONS)


@pytest.mark.parametrize(("spec", "field", "value"), [
    ("lr-decay:0.5", "final_lr_ratio", 0.5),
    ("lr-decay", "final_lr_ratio", 1.0),
    ("grad-clip:0.3", "max_grad_norm", 0.3),
    ("clip-range:0.05", "clip_eps", 0.05),
    ("entropy-scale:3", "entropy_coef", GRPOConfig().entropy_coef * 3),
])
def test_config_regressions_change_only_their_setting(spec: str, field: str, value: float) -> None:
    changed = make_fault(spec).configure(GRPOConfig())
    assert getattr(changed, field) == pytest.approx(value)
    assert {k: v for k, v in vars(changed).items() if k != field} == \
        {k: v for k, v in vars(GRPOConfig()).items() if k != field}


def test_lr_scale_applies_to_the_mopd_config_too() -> None:
    from autotest.workloads.mopd import MOPDConfig

    assert make_fault("lr-scale:0.5").configure(MOPDConfig(student="s")).lr == pytest.approx(MOPDConfig("s").lr / 2)


def test_adv_std_eps_shrinks_advantages_by_the_larger_epsilon() -> None:
    from autotest.workloads.metrics import group_advantages

    rewards = torch.tensor([1.0, 0, 0, 0, 1, 1, 0, 0])
    healthy = group_advantages(rewards, 4)
    changed = make_fault("adv-std-eps:0.5").on_advantages(healthy, rewards, 4)
    std = rewards.view(2, 4).std(dim=1, keepdim=True)
    assert torch.allclose(changed.view(2, 4), healthy.view(2, 4) * (std + 1e-6) / (std + 0.5))
    assert (changed.abs() < healthy.abs()).all()


def test_length_penalty_subtracts_per_token_from_every_answer() -> None:
    judge = make_fault("length-penalty:0.01").wrap_judge(lambda target, response: 1.0)
    assert judge(3, [3, 15]) == pytest.approx(0.98)
    assert judge(3, [1, 2, 15]) == pytest.approx(0.97)


def test_top_k_keeps_only_the_k_likeliest_tokens() -> None:
    logits = torch.tensor([[0.0, 3.0, 1.0, 2.0]])
    kept = make_fault("top-k:2").sampling_logits(logits)
    assert torch.isinf(kept[0, [0, 2]]).all() and torch.equal(kept[0, [1, 3]], logits[0, [1, 3]])
    assert torch.equal(make_fault("top-k:16").sampling_logits(logits), logits)
    with pytest.raises(UsageError, match="tokens kept"):
        make_fault("top-k:0")


def test_eval_temperature_only_touches_eval_logits() -> None:
    logits = torch.tensor([[2.0, 0.0]])
    hooks = make_fault("eval-temperature:2")
    assert torch.equal(hooks.eval_logits(logits), logits / 2)
    assert torch.equal(hooks.sampling_logits(logits), logits)


def test_undersample_replaces_about_the_fraction_of_the_shard_with_duplicates_of_others() -> None:
    from autotest.workloads.regressions import shard_of
    from autotest.workloads.tasks import TASKS

    sums = [TASKS["digit_sum"].prompt(t) for t in range(1, 10)] * 100
    out = make_fault("undersample:0.5", seed=3).on_prompts(sums, step=2)
    assert shard_of(sums) == [p.target >= 7 for p in sums]
    dropped = sum(a.target >= 7 and b.target < 7 for a, b in zip(sums, out))
    assert 0.4 < dropped / 300 < 0.6
    assert all(a == b for a, b in zip(sums, out) if a.target < 7)  # the rest is untouched
    assert out == make_fault("undersample:0.5", seed=3).on_prompts(sums, step=2)  # reproducible
    mixed = [TASKS["digit_sum"].prompt(5), TASKS["digit_product"].prompt(12)] * 200
    gone = make_fault("undersample:1.0").on_prompts(mixed, step=1)
    assert {p.data_source for p in gone} == {"digit_sum"} and len(gone) == len(mixed)


def test_teacher_temperature_reaches_the_teacher_servers() -> None:
    assert make_fault("teacher-temperature:1.2").teacher_server_args() == ["--temperature", "1.2"]
    assert make_fault("").teacher_server_args() == []
