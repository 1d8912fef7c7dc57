"""The data composition metrics of a step's prompts (autotest.workloads.data_metrics)."""

from __future__ import annotations

from autotest.workloads.data_metrics import DIGEST, DISTINCT, PROMPTS, REPEATED, composition_metrics, prompt_digest
from autotest.workloads.tasks import get_task

SUM, PRODUCT = get_task("digit_sum"), get_task("digit_product")


def test_each_draw_is_a_prompt_of_its_own_even_with_the_same_text():
    """Two draws of the same target are two dataset rows: the 9 texts of a task cannot be the count."""
    drawn = [SUM.prompt(3), SUM.prompt(3), SUM.prompt(5)]
    metrics = composition_metrics(drawn)
    assert metrics[PROMPTS] == 3 and metrics[DISTINCT] == 3 and metrics[REPEATED] == 0
    assert metrics["data/source/digit_sum"] == 3 and "data/source/digit_product" not in metrics


def test_a_prompt_handed_over_again_is_a_repeat_and_sources_are_counted():
    first, second = SUM.prompt(3), PRODUCT.prompt(12)
    metrics = composition_metrics([first, first, second, first])
    assert (metrics[DISTINCT], metrics[REPEATED]) == (2, 2)
    assert metrics["data/source/digit_sum"] == 3 and metrics["data/source/digit_product"] == 1


def test_the_digest_reads_the_texts_in_order():
    a, b = SUM.prompt(3), SUM.prompt(4)
    assert prompt_digest([a, b]) == prompt_digest([SUM.prompt(3), SUM.prompt(4)])  # other draws, same texts
    assert prompt_digest([a, b]) != prompt_digest([b, a])
    assert prompt_digest([a]) != prompt_digest([a, a]) != prompt_digest([])
    value = composition_metrics([a, b])[DIGEST]
    assert value == int(value) and 0 <= value < 2**32  # exact in the float a JSON log carries
