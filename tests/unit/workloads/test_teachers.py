"""The MOPD teacher fixture without training: recipe key, cache root, a failed preparation, and what
is not a fixture. Preparing one for real is in tests/integration/workloads/test_teachers.py."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from autotest.errors import UsageError  # noqa: E402
from autotest.workloads import teachers  # noqa: E402
from autotest.workloads.tasks import get_task  # noqa: E402
from autotest.workloads.teachers import (  # noqa: E402
    CACHE_ENV,
    TeacherRecipe,
    cache_root,
    ensure_fixture,
    neutral_digit,
    open_fixture,
)

#: a recipe small enough to prepare in a few seconds (cold-cache tests)
QUICK = TeacherRecipe(student_steps=3, teacher_steps=3, eval_samples=1)


# ---------------------------------------------------------------- recipe key and cache root


def test_key_is_stable_and_changes_with_every_recipe_field() -> None:
    base = TeacherRecipe()
    assert base.key() == TeacherRecipe().key() and len(base.key()) == 16
    changes = {"domains": ("digit_product", "digit_sum"), "seed": 7, "batch_size": 64, "student_steps": 81,
               "student_lr": 2e-2, "teacher_steps": 401, "teacher_lr": 2e-2, "foreign_suffix_prob": 0.8,
               "eval_samples": 8, "model": dataclasses.replace(base.model, hidden_size=32)}
    assert set(changes) == {f.name for f in dataclasses.fields(TeacherRecipe)}
    keys = {name: dataclasses.replace(base, **{name: value}).key() for name, value in changes.items()}
    assert base.key() not in keys.values() and len(set(keys.values())) == len(keys)


def test_key_changes_with_the_tasks_the_code_version_and_the_libraries(monkeypatch: pytest.MonkeyPatch) -> None:
    key = TeacherRecipe().key()
    monkeypatch.setattr(teachers, "RECIPE_VERSION", teachers.RECIPE_VERSION + 1)
    assert TeacherRecipe().key() != key
    monkeypatch.undo()
    monkeypatch.setattr(teachers, "library_versions", lambda: {"torch": "0.0", "transformers": "0.0"})
    assert TeacherRecipe().key() != key
    monkeypatch.undo()
    task = get_task("digit_sum")
    fewer = dataclasses.replace(task, train_targets=task.train_targets[:-1])
    monkeypatch.setattr(teachers, "get_task", lambda name: fewer if name == "digit_sum" else get_task(name))
    assert TeacherRecipe().key() != key
    monkeypatch.undo()
    # the preparation code itself: a locally edited recipe never shares a cache dir with the committed one
    monkeypatch.setattr(teachers, "preparation_source_digest", lambda: "0" * 16)
    assert TeacherRecipe().key() != key


def test_the_source_digest_covers_each_preparation_module(monkeypatch: pytest.MonkeyPatch) -> None:
    digest = teachers.preparation_source_digest()
    assert len(digest) == 16 and digest == teachers.preparation_source_digest()
    assert set(teachers.PREPARATION_MODULES) >= {"autotest.workloads.teachers", "autotest.workloads.tiny_lm",
                                                 "autotest.workloads.tasks"}
    for dropped in teachers.PREPARATION_MODULES:
        monkeypatch.setattr(teachers, "PREPARATION_MODULES",
                            tuple(m for m in teachers.PREPARATION_MODULES if m != dropped))
        assert teachers.preparation_source_digest() != digest, dropped
        monkeypatch.undo()


def test_cache_root_from_env_or_home(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    assert cache_root({CACHE_ENV: str(tmp_path)}) == tmp_path
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert cache_root({}) == tmp_path / "home" / ".cache" / "rl-autotest"


# ---------------------------------------------------------------- preparing and reusing


def test_a_failed_preparation_leaves_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(recipe: TeacherRecipe, out_dir: Path, log: object) -> None:
        (out_dir / "student").mkdir()
        raise RuntimeError("interrupted")

    monkeypatch.setattr(teachers, "prepare_in_child", broken)
    with pytest.raises(RuntimeError, match="interrupted"):
        ensure_fixture(QUICK, root=tmp_path, log=lambda line: None)
    assert [p.name for p in (tmp_path / "teachers").iterdir()] == [QUICK.key() + ".lock"]


def test_open_fixture_rejects_a_dir_that_is_not_one(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match=r"^--fixture .*: not a prepared teacher fixture \(no readable fixture.json\); "
                                         r"omit --fixture to use the cache$"):
        open_fixture(tmp_path)


# ---------------------------------------------------------------- the committed fixture


def test_the_default_recipe_uses_the_committed_fixture_whole(tmp_path: Path) -> None:
    """The same weights on every machine: the committed files, as fixture.json recorded them, never a local build."""
    fixture = ensure_fixture(root=tmp_path, log=lambda line: None)
    assert fixture.root == teachers.COMMITTED_DIR and not (tmp_path / "teachers").exists()
    info = fixture.info()
    assert info["recipe_version"] == teachers.RECIPE_VERSION
    assert teachers.recipe_from_dict(info["recipe"]) == TeacherRecipe()
    assert fixture.weights() == info["weights_sha256"]  # no checkpoint swapped or half-committed
    assert info["numerics"]["aten_cpu_capability"] == "DEFAULT"  # prepared under the pinned numerics


def test_another_recipe_or_version_never_gets_the_committed_fixture(monkeypatch: pytest.MonkeyPatch) -> None:
    assert teachers.committed_fixture(QUICK) is None
    assert teachers.committed_fixture(TeacherRecipe()) is not None
    monkeypatch.setattr(teachers, "RECIPE_VERSION", teachers.RECIPE_VERSION + 1)
    assert teachers.committed_fixture(TeacherRecipe()) is None


# ---------------------------------------------------------------- what the checkpoints know


def test_neutral_digits() -> None:
    assert neutral_digit(get_task("digit_sum")) == 0
    assert neutral_digit(get_task("digit_product")) == 1
