"""The recipe guard loads the MOPD config in a real Python process and holds each field against the case."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from autotest.inputs.case import load_case
from autotest.run.recipe_guard import GuardResult, hold_recipe
from tests.integration.run.recipe_checkout import CONFIG, HONOURING, mopd_config, write_recipe

CASE = load_case("mopd-qwen3-vl-2b")
#: the case's own launch values the config reads (the guard must see them as the run will)
CASE_ENV = {k: CASE.launch.env[k] for k in ("TOTAL_TRAIN_STEPS", "TRAIN_BATCH_SIZE", "EVALUATE_STEP",
                                            "MOPD_TEACHER_NUM_REPLICAS", "MOPD_TEACHER_REPLICA_NUM_WORKERS")}


def _guard(tmp_path: Path, config_text: str = HONOURING, **env: str) -> GuardResult:
    """The guard for the packaged MOPD case against a checkout holding ``config_text``."""
    root = tmp_path / "xtuner"
    write_recipe(root, config_text)
    run_env = {"PATH": "/usr/bin:/bin", "XTUNER_ROOT": str(root), "WORK_DIR": str(tmp_path / "work"),
               "EVAL_DATA_PATH": str(tmp_path / "eval.json"), "FRAMEWORK_PYTHON": sys.executable, **CASE_ENV, **env}
    return hold_recipe(CASE, root, run_env)


def test_a_config_that_follows_the_case_passes(tmp_path):
    result = _guard(tmp_path)
    assert (result.problems, result.tracker_format, result.notes) == ((), None, ())
    # what it resolved is recorded (results.json), each value with the trainer field it came from
    assert result.resolved["teacher_replicas"] == {"path": "opd_config.teachers[].num_replicas", "value": [1, 1]}
    assert result.resolved["train_batch_size"]["value"] == 128


def test_the_published_config_hard_codes_the_batch_size(tmp_path):
    # PR #1977's rl_dapo_math_mopd.py: train_batch_size = 256, whatever TRAIN_BATCH_SIZE the case sets
    (line,) = _guard(tmp_path, mopd_config()).problems
    assert line == (f"{tmp_path / 'xtuner' / CONFIG}: trainer.train_batch_size resolves to 256 but {CASE.source}: "
                    "recipe.train_batch_size is 128; make the config resolve the case's value (the file, or an "
                    "environment variable it reads and the case sets) or change recipe.train_batch_size and "
                    "recalibrate the baseline at the config's")


@pytest.mark.parametrize("env, field, shown", [
    ({"TOTAL_TRAIN_STEPS": "50"}, "trainer.total_train_steps resolves to 50", "expected.steps is 25"),
    ({"TRAIN_BATCH_SIZE": "64"}, "trainer.train_batch_size resolves to 64", "recipe.train_batch_size is 128"),
    ({"EVALUATE_STEP": "10"}, "trainer.evaluate_step resolves to 10", "recipe.eval_interval is 5"),
    ({"EVAL_DATA_PATH": ""}, "trainer.enable_initial_evaluate resolves to False", "recipe.initial_eval is True"),
    ({"MOPD_TEACHER_NUM_REPLICAS": "2"},
     "trainer.opd_config.teachers[].num_replicas resolves to gsm8k_teacher 2, geo3k_teacher 2",
     "recipe.teacher_replicas is 1"),
    ({"MOPD_TEACHER_REPLICA_NUM_WORKERS": "2"},
     "trainer.opd_config.teachers[].launch_config.num_workers resolves to gsm8k_teacher 2, geo3k_teacher 2",
     "recipe.teacher_workers is 1"),
])
def test_each_field_that_differs_is_one_line(tmp_path, env, field, shown):
    (line,) = _guard(tmp_path, **env).problems
    assert f": {field} but {CASE.source}: {shown}; " in line and "\n" not in line, line


def test_every_field_that_differs_gets_its_own_line(tmp_path):
    problems = _guard(tmp_path, mopd_config(evaluate_step="10"), TOTAL_TRAIN_STEPS="50", EVAL_DATA_PATH="",
                      MOPD_TEACHER_NUM_REPLICAS="3", MOPD_TEACHER_REPLICA_NUM_WORKERS="2").problems
    fields = [line.split(": trainer.")[1].split(" resolves")[0] for line in problems]
    assert fields == ["total_train_steps", "train_batch_size", "evaluate_step", "enable_initial_evaluate",
                      "opd_config.teachers[].num_replicas", "opd_config.teachers[].launch_config.num_workers"]


def test_the_distillation_config_of_the_pr_head_is_read_too(tmp_path):
    # at 0eea4a92 the trainer field is distillation_config (opd_config is gone)
    text = HONOURING.replace("    opd_config=opd_config,\n", "") + "trainer.distillation_config = opd_config\n"
    (line,) = _guard(tmp_path, text, MOPD_TEACHER_NUM_REPLICAS="2").problems
    assert "trainer.distillation_config.teachers[].num_replicas resolves to gsm8k_teacher 2" in line


def test_a_commented_out_line_does_not_count_and_a_resolved_jsonl_is_followed(tmp_path):
    # the config carries a commented-out exp_tracker="jsonl": its resolved default (tensorboard) is what counts
    assert _guard(tmp_path).tracker_format is None
    # a variable that resolves to jsonl: the harness reads tracker.jsonl with the xtuner reader, and says so
    text = 'TRACKER = "jsonl"\n' + HONOURING.replace('    # exp_tracker="jsonl",\n', "    exp_tracker=TRACKER,\n")
    result = _guard(tmp_path, text)
    assert (result.problems, result.tracker_format) == ((), "xtuner")
    (note,) = result.notes
    assert note == (f"{tmp_path / 'xtuner' / CONFIG}: trainer.exp_tracker resolves to 'jsonl': the run's log is read "
                    f"with the xtuner reader, not as {CASE.source}: tracker.format 'tensorboard' says")


def test_a_tracker_nobody_reads_is_an_error(tmp_path):
    text = HONOURING.replace('    # exp_tracker="jsonl",\n', '    exp_tracker="swanlab",\n')
    (line,) = _guard(tmp_path, text).problems
    assert "trainer.exp_tracker resolves to 'swanlab' but" in line
    assert line.endswith("set exp_tracker to one of 'jsonl', 'tensorboard' in the config's trainer")


def test_a_trainer_without_a_held_field_says_so(tmp_path):
    # an older trainer config without the distillation teachers: the case's teacher keys cannot be held
    result = _guard(tmp_path, HONOURING.replace("    opd_config=opd_config,\n", ""))
    assert [line.split(" cannot be held")[0].split("the trainer has no ")[1] for line in result.problems] == [
        "trainer.distillation_config.teachers[].num_replicas or trainer.opd_config.teachers[].num_replicas, "
        f"so {CASE.source}: recipe.teacher_replicas (1)",
        "trainer.distillation_config.teachers[].launch_config.num_workers or "
        f"trainer.opd_config.teachers[].launch_config.num_workers, so {CASE.source}: recipe.teacher_workers (1)"]


@pytest.mark.parametrize("config_text, expected", [
    ("import xtuner.missing_module\n", "cannot be loaded in"),
    ("work_dir = 'x'\n", "defines no `trainer`, so what the run will do is unknown"),
])
def test_a_config_that_cannot_tell_is_one_line(tmp_path, config_text, expected):
    (problem,) = _guard(tmp_path, config_text).problems
    assert "\n" not in problem and expected in problem, problem
    assert problem.startswith(str(tmp_path / "xtuner" / CONFIG))


def test_a_missing_config_is_one_line(tmp_path):
    root = tmp_path / "empty"
    root.mkdir()
    result = hold_recipe(CASE, root, {"PATH": "/usr/bin:/bin", "XTUNER_ROOT": str(root),
                                      "FRAMEWORK_PYTHON": sys.executable})
    assert result.problems == (f"{CASE.source}: recipe.config: {root / CONFIG} does not exist; fix the path or the "
                               "framework ref",)
