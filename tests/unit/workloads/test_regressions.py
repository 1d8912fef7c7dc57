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
