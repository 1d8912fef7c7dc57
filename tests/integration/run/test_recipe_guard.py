"""The MOPD recipe guard loads the config in a real Python process and reads what the run will log."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from autotest.inputs.case import load_case
from autotest.run.recipe_guard import tracker_problem
from tests.integration.run.xtuner_node import MOPD_CONFIG, RL_TRAINER

CONFIG = "recipe/on_policy_distillation/config/rl_qwen3_vl_2b_sampled_token_mopd_rollout_teacher.py"


def _problem(tmp_path: Path, config_text: str) -> str | None:
    """The guard's line for the packaged MOPD case against a checkout holding ``config_text``."""
    root = tmp_path / "xtuner"
    (root / "xtuner" / "v1" / "train").mkdir(parents=True)
    (root / "xtuner" / "v1" / "train" / "rl_trainer.py").write_text(RL_TRAINER)
    (root / CONFIG).parent.mkdir(parents=True)
    (root / CONFIG).write_text(config_text)
    env = {"PATH": "/usr/bin:/bin", "XTUNER_ROOT": str(root), "WORK_DIR": str(tmp_path / "work"),
           "TOTAL_TRAIN_STEPS": "25", "FRAMEWORK_PYTHON": sys.executable}
    return tracker_problem(load_case("mopd-qwen3-vl-2b"), root, env)


def test_the_published_config_logs_tensorboard_by_default(tmp_path):
    # it carries a commented-out exp_tracker="jsonl": the resolved default is what counts
    assert _problem(tmp_path, MOPD_CONFIG) is None


def test_a_commented_out_line_does_not_satisfy_the_guard(tmp_path):
    # a text search for exp_tracker="tensorboard" would pass this config; the run would log JSONL
    text = MOPD_CONFIG.replace('    # exp_tracker="jsonl",\n',
                               '    # exp_tracker="tensorboard",\n    exp_tracker=TRACKER,\n')
    problem = _problem(tmp_path, 'TRACKER = "jsonl"\n' + text)
    assert problem is not None and "\n" not in problem
    assert problem == (f"{tmp_path / 'xtuner' / CONFIG}: trainer.exp_tracker resolves to 'jsonl' but the case "
                       "reads tracker.format 'tensorboard' (exp_tracker 'tensorboard'); set "
                       "exp_tracker='tensorboard' in the config's trainer or change tracker.format in "
                       f"{load_case('mopd-qwen3-vl-2b').source}")


@pytest.mark.parametrize("config_text, expected", [
    ("import xtuner.missing_module\n", "cannot be loaded in"),
    ("work_dir = 'x'\n", "defines no `trainer`, so what the run logs is unknown"),
])
def test_a_config_that_cannot_tell_is_one_line(tmp_path, config_text, expected):
    problem = _problem(tmp_path, config_text)
    assert problem is not None and "\n" not in problem and expected in problem, problem
    assert problem.startswith(str(tmp_path / "xtuner" / CONFIG))
