"""The data faults (autotest.workloads.data_faults): what they hand the trainer, and their bad arguments."""

from __future__ import annotations

import pytest

from autotest.errors import UsageError
from autotest.workloads.data_metrics import DISTINCT, REPEATED, composition_metrics
from autotest.workloads.faults import make_fault
from autotest.workloads.tasks import get_task

SUM = get_task("digit_sum")


def _drawn(count: int = 64) -> list:
    return [SUM.prompt(SUM.train_targets[i % 9]) for i in range(count)]


def test_prompts_repeated_hands_each_kept_prompt_n_times():
    drawn = _drawn()
    handed = make_fault("prompts-repeated:2").on_prompts(drawn, 1)
    assert len(handed) == 64 and handed[0] is handed[1] is drawn[0] and handed[62] is drawn[31]
    metrics = composition_metrics(handed)
    assert (metrics[DISTINCT], metrics[REPEATED]) == (32, 32)
    default = composition_metrics(make_fault("prompts-repeated").on_prompts(_drawn(), 1))
    assert (default[DISTINCT], default[REPEATED]) == (8, 56)
    # an N that does not divide the step still hands over as many prompts as were drawn
    assert len(make_fault("prompts-repeated:3").on_prompts(_drawn(64), 1)) == 64


def test_source_mix_replaces_every_fourth_prompt_from_step_k():
    fault = make_fault("source-mix:5")
    drawn = _drawn()
    assert fault.on_prompts(drawn, 4) == drawn
    mixed = fault.on_prompts(drawn, 5)
    assert len(mixed) == 64 and [p.data_source for p in mixed[:4]] == ["digit_sum"] * 3 + ["digit_product"]
    metrics = composition_metrics(mixed)
    assert metrics["data/source/digit_product"] == 16 and metrics["data/source/digit_sum"] == 48
    assert all(p.target in get_task("digit_product").train_targets for p in mixed[3::4])


@pytest.mark.parametrize(("spec", "message"), [
    ("source-mix:0", "--fault source-mix: needs a positive step"),
    ("source-mix:x", "--fault source-mix: needs a positive step"),
    ("prompts-repeated:0", "--fault prompts-repeated: N must be a positive integer"),
    ("prompts-repeated:-2", "--fault prompts-repeated: N must be a positive integer"),
])
def test_bad_arguments_are_one_line(spec: str, message: str) -> None:
    with pytest.raises(UsageError) as info:
        make_fault(spec)
    assert str(info.value).startswith(message) and "\n" not in str(info.value)
