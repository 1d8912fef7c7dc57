"""The Hugging Face Trainer reader (trainer_state.json and TrainerCallback JSONL), and how rows at one step merge."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from autotest.errors import UsageError
from autotest.inputs.baseline import CheckSpec
from autotest.judge.model import ERROR
from autotest.judge.verdict import compare
from autotest.readers.reading import read_trace, sniff_format
from tests.unit.judge.test_silent_passes import baseline

# What Trainer.log appends to log_history for a TRL GRPO run with eval every 2 steps (keys from TRL's
# GRPOTrainer and transformers' Trainer): train row, eval row and, at the end, the summary, all at one step.
HISTORY = [
    {"loss": 0.01, "grad_norm": 0.5, "learning_rate": 1e-5, "reward": 0.20, "reward_std": 0.1,
     "rewards/accuracy_reward/mean": 0.20, "completions/mean_length": 30.0, "entropy": 1.2, "epoch": 0.5, "step": 1},
    {"loss": 0.02, "grad_norm": 0.4, "learning_rate": 9e-6, "reward": 0.30, "reward_std": 0.1,
     "rewards/accuracy_reward/mean": 0.30, "completions/mean_length": 28.0, "entropy": 1.1, "epoch": 1.0, "step": 2},
    {"eval_loss": 0.03, "eval_reward": 0.35, "eval_runtime": 0.5, "eval_samples_per_second": 10.0,
     "eval_steps_per_second": 2.0, "epoch": 1.0, "step": 2},
    {"train_runtime": 4.2, "train_samples_per_second": 3.0, "train_steps_per_second": 0.5, "total_flos": 0.0,
     "train_loss": 0.015, "epoch": 1.0, "step": 2},
]


def _state(path: Path, history: list = HISTORY) -> Path:
    path.write_text(json.dumps({"global_step": 2, "max_steps": 2, "log_history": history}, indent=2))
    return path


def _callback_jsonl(path: Path, rows: list = HISTORY) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


@pytest.mark.parametrize("make", [lambda p: _state(p / "trainer_state.json"),
                                  lambda p: _callback_jsonl(p / "metrics.jsonl")])
def test_train_eval_and_summary_rows_at_one_step_merge_without_a_warning(tmp_path, make):
    path = make(tmp_path)
    assert sniff_format(path) == "hf-trainer"
    trace = read_trace(path)
    assert trace.format == "hf-trainer"
    assert trace.warnings == ()
    assert trace.train_steps == (1, 2) and trace.eval_steps == (2,)
    assert dict(trace.series["reward"]) == {1: 0.20, 2: 0.30}
    assert dict(trace.series["eval_reward"]) == {2: 0.35}
    assert dict(trace.series["train_loss"]) == {2: 0.015}
    assert trace.series["completions/mean_length"][2] == 28.0


def test_a_true_resume_still_warns_and_a_broken_one_is_an_error(tmp_path):
    again = dict(HISTORY[1], reward=0.30001)
    trace = read_trace(_state(tmp_path / "trainer_state.json", HISTORY + [again]))
    assert len(trace.warnings) == 1
    assert "1 step(s) logged again (resumed run?): step 2 (log_history[1] and log_history[4])" in trace.warnings[0]
    broken = dict(HISTORY[1], reward=0.0)
    path = _state(tmp_path / "trainer_state.json", HISTORY + [broken])
    with pytest.raises(UsageError, match=rf"^{path}: log_history\[4\]: step 2 logged again with a different reward: "
                                         r"0 there, 0.3 at log_history\[1\]"):
        read_trace(path)


def test_rows_written_twice_are_one_warning_with_a_count(tmp_path):
    doubled = [row for row in HISTORY for _ in (0, 1)]
    path = _callback_jsonl(tmp_path / "metrics.jsonl", doubled)
    trace = read_trace(path)
    assert trace.warnings == (f"{path}: 4 row(s) repeat an earlier row of the same step exactly (first: line 2 "
                              "repeats line 1); each counted once (does the tracker write every row twice?)",)
    assert dict(trace.series["reward"]) == {1: 0.20, 2: 0.30}


def test_an_xtuner_tracker_written_twice_is_one_warning_not_one_per_step(tmp_path):
    path = tmp_path / "tracker.jsonl"
    rows = [{"step": 0, "eval/accuracy": 0.4}] + [{"step": s, "response/rewards/mean": 0.1 * s} for s in range(1, 46)]
    path.write_text("".join(json.dumps(r) + "\n" + json.dumps(r) + "\n" for r in rows))
    trace = read_trace(path)
    assert len(trace.warnings) == 1 and trace.warnings[0].startswith(f"{path}: 46 row(s) repeat an earlier row")
    assert trace.train_steps == tuple(range(1, 46))


def test_verl_rows_written_twice_are_one_warning(tmp_path):
    path = tmp_path / "verl.jsonl"
    rows = [{"step": s, "data": {"critic/score/mean": 0.1 * s}} for s in range(1, 4)]
    path.write_text("".join(json.dumps(r) + "\n" + json.dumps(r) + "\n" for r in rows))
    trace = read_trace(path)
    assert trace.format == "verl" and len(trace.warnings) == 1 and "3 row(s) repeat" in trace.warnings[0]


@pytest.mark.parametrize("text, message", [
    ('{"log_history": [', r"not valid JSON \(Expecting value at line 1 column 18\); is the trainer_state.json "
                          "complete"),
    ('{"global_step": 3}', r"key 'log_history' is missing; pass a Hugging Face trainer_state.json"),
    ('[1, 2]', r"key 'log_history' is absent \(not an object\)"),
    ('{"log_history": [{"loss": 1.0, "step": 1}, 7]}', r"log_history\[1\] is not an object \(int\)"),
    ('{"log_history": [{"loss": 1.0}]}', r"log_history\[0\]: key 'step' is missing; every row needs"),
    ('{"log_history": [{"loss": 1.0, "step": -1}]}', r"log_history\[0\]: step -1 is negative"),
    ('{"log_history": []}', r"metric log has no rows; did the run start\?"),
])
def test_a_bad_trainer_state_is_one_line(tmp_path, text, message):
    path = tmp_path / "trainer_state.json"
    path.write_text(text)
    with pytest.raises(UsageError, match=rf"^{path}: {message}") as info:
        read_trace(path)
    assert "\n" not in str(info.value)


def test_a_callback_row_with_a_bad_step_names_its_line(tmp_path):
    path = tmp_path / "metrics.jsonl"
    path.write_text('{"loss": 1.0, "epoch": 0.1, "step": 1}\n{"loss": 1.0, "epoch": 0.2, "step": "2"}\n')
    with pytest.raises(UsageError, match=rf"^{path}:2: key 'step' is not a whole number \(a string: 2\)"):
        read_trace(path, "hf-trainer")


@pytest.mark.parametrize("row, fmt", [
    ({"loss": 1.0, "epoch": 0.1, "step": 1}, "hf-trainer"),
    ({"eval_loss": 1.0, "step": 1}, "hf-trainer"),
    ({"train_runtime": 1.0, "step": 1}, "hf-trainer"),
    ({"response/rewards/mean": 0.1, "epoch": 1, "eval/accuracy": 0.5, "step": 1}, "xtuner"),
    ({"train_metrics/worker_0/loss": 0.1, "epoch": 1, "step": 1}, "xtuner"),
    ({"step": 1, "data": {"critic/score/mean": 0.1}}, "verl"),
    ({"response/rewards/mean": 0.1, "step": 1}, "xtuner"),
])
def test_the_format_is_told_from_the_first_row(tmp_path, row, fmt):
    path = tmp_path / "log.jsonl"
    path.write_text(json.dumps(row) + "\n")
    assert sniff_format(path) == fmt


@pytest.mark.parametrize("step", [10**30, 1e30, 2**53 + 1])
def test_an_absurd_step_in_log_history_is_one_line_naming_its_row(tmp_path, step):
    path = _state(tmp_path / "trainer_state.json", HISTORY + [{"loss": 0.01, "epoch": 1.5, "step": step}])
    with pytest.raises(UsageError) as info:
        read_trace(path)
    assert str(info.value).startswith(f"{path}: log_history[4]: step {step:.6g} is beyond 9007199254740992 (2**53), "
                                      "not a step count a run reaches")


def test_a_metric_logged_as_a_list_names_its_log_history_row(tmp_path):
    path = _state(tmp_path / "trainer_state.json", HISTORY[:1] + [dict(HISTORY[1], reward=[0.3, 0.4])])
    verdict = compare(baseline({"reward": {1: 0.2, 2: 0.3}}, CheckSpec("reward", "absolute", "<", 0.1)),
                      read_trace(path, metrics={"reward"})).verdict
    assert verdict.status == ERROR
    assert verdict.results[0].message == (f"reward is logged as a list, not a number ({path}, log_history[1]); "
                                          "log it as a number")
