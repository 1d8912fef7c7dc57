"""A case's ``recipe:`` section: the framework config the run resolves, and what it must resolve to.

    recipe:
      config: ${XTUNER_ROOT}/recipe/on_policy_distillation/config/rl_dapo_math_mopd.py
      train_batch_size: 128     # each key optional: a key left out is not held
      eval_interval: 5
      initial_eval: true
      teacher_replicas: 1
      teacher_workers: 1

Before launch the harness loads ``config`` in the framework's Python, as the run will (defaults, variables
and commented-out lines resolve as they will there), and holds each declared value against it, and
``expected.steps`` and ``tracker.format`` besides (:mod:`autotest.run.recipe_guard`). A config that
hard-codes another batch size than the case (and its baseline) was calibrated at is an ERROR before any GPU
time is spent, one line per field.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from autotest.inputs.placeholders import check_template
from autotest.inputs.schema import Section

_CONFIG_PLACEHOLDERS = ("repo",)


@dataclass(frozen=True)
class HeldKey:
    """One value a case may hold its framework config to."""

    key: str
    kind: type
    help: str


#: the keys of ``recipe:`` besides ``config``, declared once: parsing, the guard and docs/cases.md follow
HELD_KEYS = (
    HeldKey("train_batch_size", int, "rollout samples per training step"),
    HeldKey("eval_interval", int, "evaluate every N training steps"),
    HeldKey("initial_eval", bool, "evaluate once before training (the step-0 eval row)"),
    HeldKey("teacher_replicas", int, "replicas of each teacher (distillation)"),
    HeldKey("teacher_workers", int, "workers (GPUs) per teacher replica (distillation)"),
)
#: held from other sections of the case: the step count and the metric log's format
HELD_ELSEWHERE = {"total_steps": "expected.steps", "tracker": "tracker.format"}


@dataclass(frozen=True)
class Recipe:
    """The ``recipe:`` section of a case."""

    config: str
    """The framework config file (``${ENV}`` and ``{repo}`` allowed), loaded before launch."""
    held: dict[str, int | bool] = field(default_factory=dict)
    """``HELD_KEYS`` name -> the value the resolved config must have (only the keys the case wrote)."""


def parse_recipe(sec: Section | None) -> Recipe | None:
    """The validated ``recipe:`` section (None when the case has none); each mistake one line naming the key."""
    if sec is None:
        return None
    sec.check_keys(required=("config",), optional=tuple(k.key for k in HELD_KEYS))
    config = sec.text("config")
    check_template(sec, "config", config, _CONFIG_PLACEHOLDERS, shell=False)
    held: dict[str, int | bool] = {}
    for key in HELD_KEYS:
        if key.key not in sec.data:
            continue
        if key.kind is bool:
            held[key.key] = sec.boolean(key.key)
        else:
            held[key.key] = sec.integer(key.key, minimum=1, fix=f"write {key.help}, a whole number >= 1")
    return Recipe(config=config, held=held)
