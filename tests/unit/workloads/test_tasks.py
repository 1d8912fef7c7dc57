"""Prompts and judges of the digit tasks."""

from __future__ import annotations

import pytest

from autotest.errors import UsageError
from autotest.workloads.tasks import TASKS, get_task
from autotest.workloads.tiny_lm import DigitTokenizer

TOK = DigitTokenizer()


def _resp(text: str) -> list[int]:
    return TOK.encode(text)


@pytest.mark.parametrize(
    ("response", "reward"),
    [
        ("7<eos>", 1.0),
        ("25<eos>", 1.0),
        ("1111111<eos>", 1.0),
        ("16<eos><pad>", 1.0),
        ("8<eos>", 0.0),  # wrong sum
        ("7", 0.0),  # no <eos>: truncated
        ("<eos>", 0.0),  # no digit
        ("7=<eos>", 0.0),  # a non-digit before <eos>
        ("7<eos>9", 1.0),  # only what precedes <eos> is the answer
    ],
)
def test_digit_sum_judge(response: str, reward: float) -> None:
    assert TASKS["digit_sum"].judge(7, _resp(response)) == reward


def test_digit_product_judge_and_targets() -> None:
    task = TASKS["digit_product"]
    assert task.judge(12, _resp("34<eos>")) == 1.0
    assert task.judge(12, _resp("262<eos>")) == 0.0
    assert task.judge(12, _resp("1<eos>")) == 0.0
    assert set(task.train_targets) == {10, 12, 14, 15, 16, 18, 20, 21, 24}
    # one digit never multiplies to a two-digit target: the sum task's answers do not carry over
    assert all(t > 9 for t in task.eval_targets)


def test_prompts_encode_marker_and_two_digit_target() -> None:
    prompt = TASKS["digit_product"].prompt(21)
    assert TOK.decode(list(prompt.token_ids)) == "<bos>P21"
    assert prompt.data_source == "digit_product" and prompt.target == 21
    assert {len(p.token_ids) for t in TASKS.values() for p in t.eval_prompts()} == {4}


def test_sampled_prompts_follow_the_generator() -> None:
    torch = pytest.importorskip("torch")
    task = TASKS["digit_sum"]
    a = task.sample_prompts(20, torch.Generator().manual_seed(1))
    b = task.sample_prompts(20, torch.Generator().manual_seed(1))
    c = task.sample_prompts(20, torch.Generator().manual_seed(2))
    assert a == b and a != c
    assert all(p.target in task.train_targets for p in a)


def test_unknown_task_is_a_usage_error() -> None:
    with pytest.raises(UsageError, match="--task: unknown task 'nope'; choose one of digit_product, digit_sum"):
        get_task("nope")
