"""The recipe guard's comparison, on resolved values (no process): what follows, what is one line."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from autotest.inputs.case import load_case
from autotest.run.recipe_guard import compare

CASE = load_case("mopd-qwen3-vl-2b")
CONFIG = Path("/x/rl_dapo_math_mopd.py")
GOOD = {"tracker": {"path": "exp_tracker", "value": None}, "total_steps": {"path": "total_train_steps", "value": 25},
        "train_batch_size": {"path": "train_batch_size", "value": 128},
        "eval_interval": {"path": "evaluate_step", "value": 5},
        "initial_eval": {"path": "enable_initial_evaluate", "value": True},
        "teacher_replicas": {"path": "opd_config.teachers[].num_replicas", "value": [1, 1]},
        "teacher_workers": {"path": "opd_config.teachers[].launch_config.num_workers", "value": [1, 1]},
        "teacher_names": {"path": "opd_config.teachers[].name", "value": ["gsm8k_teacher", "geo3k_teacher"]}}


def test_a_config_resolving_the_case_passes_and_a_missing_tracker_is_the_default():
    assert compare(CASE, CONFIG, GOOD).problems == ()


def test_an_explicit_tracker_path_is_never_followed_to_another_format():
    case = replace(CASE, tracker=replace(CASE.tracker, path="/logs/events.out"))
    result = compare(case, CONFIG, {**GOOD, "tracker": {"path": "exp_tracker", "value": "jsonl"}})
    assert result.tracker_format is None
    assert result.problems == (f"{CONFIG}: trainer.exp_tracker resolves to 'jsonl' but {CASE.source}: tracker.format "
                               "is 'tensorboard'; drop tracker.path or set exp_tracker='tensorboard'",)


def test_a_config_with_no_teachers_and_a_boolean_where_a_number_belongs():
    result = compare(CASE, CONFIG, {**GOOD, "teacher_replicas": {"path": "opd_config.teachers[].num_replicas",
                                                                 "value": []},
                                    "train_batch_size": {"path": "train_batch_size", "value": True}})
    assert [line.split(" but ")[0].split(": ", 1)[1] for line in result.problems] == [
        "trainer.train_batch_size resolves to True", "trainer.opd_config.teachers[].num_replicas lists no teachers"]
