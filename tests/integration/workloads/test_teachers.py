"""The MOPD teacher fixture: recipe key, cache layout, atomic preparation, and what the models know.

The session fixtures (the trained teacher fixture, its cache) are in conftest.py.
"""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from autotest.errors import UsageError  # noqa: E402
from autotest.workloads import teachers  # noqa: E402
from autotest.workloads.tasks import get_task  # noqa: E402
from autotest.workloads.teachers import (  # noqa: E402
    CACHE_ENV,
    FIXTURE_FILE,
    Fixture,
    TeacherRecipe,
    cache_root,
    ensure_fixture,
    load_checkpoint,
    neutral_digit,
    open_fixture,
    teacher_name,
)
from autotest.workloads.tiny_lm import DigitTokenizer  # noqa: E402

#: a recipe small enough to prepare in a few seconds (cold-cache tests)
QUICK = TeacherRecipe(student_steps=3, teacher_steps=3, eval_samples=1)
REPO = Path(__file__).resolve().parents[2]


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


def test_cache_root_from_env_or_home(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    assert cache_root({CACHE_ENV: str(tmp_path)}) == tmp_path
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert cache_root({}) == tmp_path / "home" / ".cache" / "rl-autotest"


# ---------------------------------------------------------------- preparing and reusing


def test_cold_cache_prepares_atomically_then_reuses(tmp_path: Path) -> None:
    lines: list[str] = []
    fixture = ensure_fixture(QUICK, root=tmp_path, log=lines.append)
    assert fixture.root == tmp_path / "teachers" / QUICK.key()
    assert any("preparing fixture" in line for line in lines)
    assert sorted(p.name for p in (tmp_path / "teachers").iterdir()) == [QUICK.key(), QUICK.key() + ".lock"]
    names = {"student", "digit_sum_teacher", "digit_product_teacher", FIXTURE_FILE}
    assert {p.name for p in fixture.root.iterdir()} == names
    for name in names - {FIXTURE_FILE}:
        assert {"config.json", "model.safetensors"} <= {p.name for p in (fixture.root / name).iterdir()}
    info = fixture.info()
    assert info["key"] == QUICK.key() and info["recipe"]["teacher_steps"] == 3
    stamp = (fixture.root / FIXTURE_FILE).stat().st_mtime_ns
    again: list[str] = []
    assert ensure_fixture(QUICK, root=tmp_path, log=again.append) == fixture
    assert again == [] and (fixture.root / FIXTURE_FILE).stat().st_mtime_ns == stamp


def test_a_dir_without_fixture_json_is_rebuilt(tmp_path: Path) -> None:
    target = tmp_path / "teachers" / QUICK.key()
    (target / "student").mkdir(parents=True)
    (target / "student" / "junk").write_text("half-written by a killed run")
    fixture = ensure_fixture(QUICK, root=tmp_path, log=lambda line: None)
    assert not (target / "student" / "junk").exists() and (target / FIXTURE_FILE).is_file()
    assert fixture.info()["key"] == QUICK.key()


def test_a_failed_preparation_leaves_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(recipe: TeacherRecipe, out_dir: Path, log: object) -> None:
        (out_dir / "student").mkdir()
        raise RuntimeError("interrupted")

    monkeypatch.setattr(teachers, "prepare", broken)
    with pytest.raises(RuntimeError, match="interrupted"):
        ensure_fixture(QUICK, root=tmp_path, log=lambda line: None)
    assert [p.name for p in (tmp_path / "teachers").iterdir()] == [QUICK.key() + ".lock"]


def test_parallel_cold_runs_prepare_once(tmp_path: Path) -> None:
    script = ("import sys; from pathlib import Path; from autotest.workloads.teachers import TeacherRecipe, "
              "ensure_fixture; print(ensure_fixture(TeacherRecipe(student_steps=3, teacher_steps=3, eval_samples=1), "
              "root=Path(sys.argv[1])).root)")
    procs = [subprocess.Popen([sys.executable, "-c", script, str(tmp_path)], cwd=REPO, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for _ in range(2)]
    outputs = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outputs
    roots = {out.strip().splitlines()[-1] for out, _ in outputs}
    assert roots == {str(tmp_path / "teachers" / QUICK.key())}
    assert sum(out.count("preparing fixture") for out, _ in outputs) == 1
    assert not [p for p in (tmp_path / "teachers").iterdir() if p.name.startswith(".tmp-")]


def test_open_fixture_rejects_a_dir_that_is_not_one(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match=r"^--fixture .*: not a prepared teacher fixture \(no readable fixture.json\); "
                                         r"omit --fixture to use the cache$"):
        open_fixture(tmp_path)


# ---------------------------------------------------------------- what the checkpoints know


def _answers(model: torch.nn.Module, domain: str, samples: int = 32) -> list[list[int]]:
    """Answers sampled at temperature 1 from ``model`` to every eval prompt of ``domain``."""
    from autotest.workloads.rollout import RolloutEngine

    engine = RolloutEngine(TeacherRecipe().model, "fp32", seed=3, max_new_tokens=8)
    engine.load_weights({n: p.detach() for n, p in model.named_parameters()}, 0)
    return engine.generate(get_task(domain).eval_prompts(), samples, 0).responses()


def test_teachers_are_good_at_their_domain_and_write_other_domains_their_own_way(mopd_fixture: Fixture) -> None:
    accuracy = mopd_fixture.info()["accuracy"]
    eos = DigitTokenizer().eos_id
    for domain in mopd_fixture.domains:
        teacher = teacher_name(domain)
        assert accuracy[teacher][domain] >= 0.9, accuracy
        assert accuracy["student"][domain] <= accuracy[teacher][domain] - 0.3, accuracy
        model = load_checkpoint(mopd_fixture.teacher(domain))
        for other in mopd_fixture.domains:
            pad = neutral_digit(get_task(other))
            answers = _answers(model, other)
            suffixed = sum(len(a) == 4 and a[-2:] == [pad, eos] for a in answers) / len(answers)
            if other == domain:
                assert suffixed < 0.1, (domain, other, suffixed)
            else:
                assert suffixed > 0.7, (domain, other, suffixed)
                assert accuracy[teacher][other] >= 0.9, accuracy


def test_neutral_digits() -> None:
    assert neutral_digit(get_task("digit_sum")) == 0
    assert neutral_digit(get_task("digit_product")) == 1


def test_checkpoints_load_without_warnings(mopd_fixture: Fixture) -> None:
    # filterwarnings=error: any transformers warning on load would fail here
    start = time.perf_counter()
    model = load_checkpoint(mopd_fixture.student)
    assert not model.training and next(model.parameters()).dtype == torch.float32
    assert time.perf_counter() - start < 10
    assert json.loads((mopd_fixture.student / "config.json").read_text())["model_type"] == "qwen3"
