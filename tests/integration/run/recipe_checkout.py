"""A simulated xtuner checkout with pull request #1977's recipe layout, for the recipe guard and presence tests.

Upstream facts it mirrors (verified against the mirror of InternLM/xtuner): the recipe configs live at
``recipe/on_policy_distillation/config/rl_dapo_math_mopd.py`` (PR #1977 up to c77eddc9), end in
``trainer = RLColocateTrainerConfig(...)`` whose ``opd_config`` lists teachers with ``num_replicas`` and
``launch_config.num_workers``; ``total_train_steps`` comes from ``TOTAL_TRAIN_STEPS``, teacher replicas and
workers from ``MOPD_TEACHER_NUM_REPLICAS`` / ``MOPD_TEACHER_REPLICA_NUM_WORKERS``, ``enable_initial_evaluate``
follows ``EVAL_DATA_PATH``; the published file hard-codes ``train_batch_size = 256`` and ``evaluate_step = 5``
and leaves ``exp_tracker`` at its ``tensorboard`` default. The stand-in classes are dataclasses (the node's
Python has no xtuner), with xtuner's field names and defaults.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

CONFIG = "recipe/on_policy_distillation/config/rl_dapo_math_mopd.py"

# xtuner's trainer config (the fields the guard reads; defaults as upstream: exp_tracker tensorboard, evaluate_step 1)
RL_TRAINER = '''"""Stand-in for xtuner's RLColocateTrainerConfig (the fields the recipes set here)."""
from dataclasses import dataclass
from typing import Any


@dataclass
class RLColocateTrainerConfig:
    work_dir: str
    train_batch_size: int
    total_train_steps: int | None = None
    total_epochs: int | None = None
    opd_config: Any = None
    enable_evaluate: bool = False
    enable_initial_evaluate: bool = False
    evaluate_step: int = 1
    seed: int = 0
    exp_tracker: str = "tensorboard"
'''

OPD = '''"""Stand-in for xtuner.v1.rl.on_policy_distillation (PR #1977 up to c77eddc9)."""
from dataclasses import dataclass, field


@dataclass
class OPDTeacherLaunchConfig:
    model_path: str
    num_workers: int = 1


@dataclass
class OPDTeacherConfig:
    name: str
    launch_config: OPDTeacherLaunchConfig
    num_replicas: int = 1


@dataclass
class OPDConfig:
    teachers: list = field(default_factory=list)
'''

# The published config's shape: TRAIN_BATCH and EVALUATE_STEP are what the tests vary.
MOPD_CONFIG = '''import os

from xtuner.v1.rl.on_policy_distillation import OPDConfig, OPDTeacherConfig, OPDTeacherLaunchConfig
from xtuner.v1.train.rl_trainer import RLColocateTrainerConfig

work_dir = os.environ["WORK_DIR"]
eval_meta_data_path = os.environ.get("EVAL_DATA_PATH", "")
total_train_steps_env = os.environ.get("TOTAL_TRAIN_STEPS")
total_train_steps = int(total_train_steps_env) if total_train_steps_env is not None else None
train_batch_size = TRAIN_BATCH
teacher_num_replicas = int(os.environ.get("MOPD_TEACHER_NUM_REPLICAS", "2"))
teacher_replica_num_workers = int(os.environ.get("MOPD_TEACHER_REPLICA_NUM_WORKERS", "1"))
enable_evaluate = bool(eval_meta_data_path)
evaluate_step = EVALUATE_STEP

opd_config = OPDConfig(
    teachers=[
        OPDTeacherConfig(
            name=name,
            num_replicas=teacher_num_replicas,
            launch_config=OPDTeacherLaunchConfig(model_path=name, num_workers=teacher_replica_num_workers),
        )
        for name in ("gsm8k_teacher", "geo3k_teacher")
    ],
)

trainer = RLColocateTrainerConfig(
    work_dir=work_dir,
    train_batch_size=train_batch_size,
    opd_config=opd_config,
    enable_evaluate=enable_evaluate,
    enable_initial_evaluate=enable_evaluate,
    evaluate_step=evaluate_step,
    total_train_steps=total_train_steps,
    total_epochs=15,
    # exp_tracker="jsonl",
    seed=1234,
)
'''


def mopd_config(train_batch: str = "256", evaluate_step: str = "5") -> str:
    """The config text; the published one hard-codes 256 and 5, a recipe that honours the case reads the env."""
    return MOPD_CONFIG.replace("TRAIN_BATCH", train_batch).replace("EVALUATE_STEP", evaluate_step)


#: a recipe that takes the case's scale from its environment, as the seed's (unpublished) config did
HONOURING = mopd_config('int(os.environ.get("TRAIN_BATCH_SIZE", "256"))',
                        'int(os.environ.get("EVALUATE_STEP", "5"))')


def write_recipe(root: Path, config_text: str = HONOURING) -> Path:
    """xtuner's trainer and distillation stand-ins and the recipe config under ``root``; the config's path."""
    (root / "xtuner" / "v1" / "train").mkdir(parents=True, exist_ok=True)
    (root / "xtuner" / "v1" / "train" / "rl_trainer.py").write_text(RL_TRAINER)
    (root / "xtuner" / "v1" / "rl").mkdir(parents=True, exist_ok=True)
    (root / "xtuner" / "v1" / "rl" / "on_policy_distillation.py").write_text(OPD)
    (root / CONFIG).parent.mkdir(parents=True, exist_ok=True)
    (root / CONFIG).write_text(config_text)
    return root / CONFIG


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), "-c", "user.email=t@example.com", "-c", "user.name=t", *args],
                          check=True, capture_output=True, text=True).stdout.strip()


def add_refs(repo: Path) -> tuple[str, str]:
    """On the simulated node's repository (its ``main`` has the recipe's scripts): a commit with the recipe
    config, and ``refs/heads/trunk`` without ``recipe/on_policy_distillation/`` at all, as xtuner's main is.
    Returns (the recipe commit, the trunk commit); ``main`` is left where it was."""
    start = git(repo, "rev-parse", "HEAD")
    write_recipe(repo)
    # xtuner's main has other recipes (recipe/trace, recipe/verl_agent): only the distillation one is missing
    (repo / "recipe" / "verl_agent").mkdir(parents=True, exist_ok=True)
    (repo / "recipe" / "verl_agent" / "README.md").write_text("another recipe\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "recipe: multi-teacher OPD (PR #1977 layout)")
    recipe = git(repo, "rev-parse", "HEAD")
    git(repo, "rm", "-q", "-r", "recipe/on_policy_distillation")
    git(repo, "commit", "-q", "-m", "main: the recipe is not merged")
    trunk = git(repo, "rev-parse", "HEAD")
    git(repo, "update-ref", "refs/heads/trunk", trunk)
    git(repo, "reset", "-q", "--hard", start)
    return recipe, trunk
