"""The MOPD teacher fixture prepared for real: cold cache, rebuild, parallel preparation, and what the
trained models know.

The session fixtures (the trained teacher fixture, its cache) are in conftest.py."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from autotest.workloads.tasks import get_task  # noqa: E402
from autotest.workloads.teachers import (  # noqa: E402
    FIXTURE_FILE,
    Fixture,
    TeacherRecipe,
    ensure_fixture,
    load_checkpoint,
    neutral_digit,
    teacher_name,
)
from autotest.workloads.tiny_lm import DigitTokenizer  # noqa: E402
from tests.unit.workloads.test_teachers import QUICK
from tests import waits  # noqa: E402

#: each test trains or prepares the teachers for real (13-40 s each on 2 cores);
#: out of the quick tier, `pytest -m "not slow"`
pytestmark = pytest.mark.slow

#: a recipe small enough to prepare in a few seconds (cold-cache tests)
REPO = Path(__file__).resolve().parents[3]


# ---------------------------------------------------------------- recipe key and cache root


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
    # the weights it holds, bit for bit, recorded and recomputable from the files
    assert info["weights_sha256"] == fixture.weights()
    assert list(fixture.weights()) == ["student", "digit_sum_teacher", "digit_product_teacher"]
    assert all(re.fullmatch(r"[0-9a-f]{64}", d) for d in fixture.weights().values())
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


def test_parallel_cold_runs_prepare_once(tmp_path: Path) -> None:
    script = ("import sys; from pathlib import Path; from autotest.workloads.teachers import TeacherRecipe, "
              "ensure_fixture; print(ensure_fixture(TeacherRecipe(student_steps=3, teacher_steps=3, eval_samples=1), "
              "root=Path(sys.argv[1])).root)")
    procs = [subprocess.Popen([sys.executable, "-c", script, str(tmp_path)], cwd=REPO, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for _ in range(2)]
    outputs = [waits.communicate(p, 120) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outputs
    roots = {out.strip().splitlines()[-1] for out, _ in outputs}
    assert roots == {str(tmp_path / "teachers" / QUICK.key())}
    assert sum(out.count("preparing fixture") for out, _ in outputs) == 1
    assert not [p for p in (tmp_path / "teachers").iterdir() if p.name.startswith(".tmp-")]


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


def test_checkpoints_load_without_warnings(mopd_fixture: Fixture) -> None:
    # filterwarnings=error: any transformers warning on load would fail here
    start = time.process_time()  # CPU seconds of this process: what the load cannot stretch
    model = load_checkpoint(mopd_fixture.student)
    assert not model.training and next(model.parameters()).dtype == torch.float32
    assert time.process_time() - start < 10
    assert json.loads((mopd_fixture.student / "config.json").read_text())["model_type"] == "qwen3"


# ---------------------------------------------------------------- the same weights on every CPU

_PREPARE = ("import json, sys; from pathlib import Path; from autotest.workloads.teachers import prepare, "
            "recipe_from_dict; prepare(recipe_from_dict(json.loads(sys.argv[2])), Path(sys.argv[1]), log=lambda s: None)")


def _weights_unpinned(tmp_path: Path, capability: str) -> dict[str, str]:
    """QUICK prepared the way a process that is not pinned would, with ATen held at ``capability``."""
    import dataclasses
    import os

    out = tmp_path / f"unpinned-{capability}"
    env = {**os.environ, "ATEN_CPU_CAPABILITY": capability}
    waits.run([sys.executable, "-c", _PREPARE, str(out), json.dumps(dataclasses.asdict(QUICK))], cwd=REPO,
              env=env, check=True, limit_s=120)
    return Fixture(out, QUICK.domains).weights()


def test_the_fixture_is_the_same_whichever_kernels_the_cpu_offers(tmp_path: Path, monkeypatch) -> None:
    """A runner without AVX-512 (ATen at avx2) trains the same fixture as one with it: the preparation pins
    its numerics. Unpinned, the kernel level alone changes the weights (shown where the host has AVX-512)."""
    weights = {}
    for capability in ("avx2", "default"):
        monkeypatch.setenv("ATEN_CPU_CAPABILITY", capability)
        monkeypatch.setenv("MKL_CBWR", "AVX2")
        weights[capability] = ensure_fixture(QUICK, root=tmp_path / capability, log=lambda line: None).weights()
    assert weights["avx2"] == weights["default"]
    info = ensure_fixture(QUICK, root=tmp_path / "avx2", log=lambda line: None).info()
    assert info["numerics"]["aten_cpu_capability"] == "DEFAULT" and info["numerics"]["MKL_CBWR"] == "COMPATIBLE"
    if torch.backends.cpu.get_cpu_capability() == "AVX512":
        assert _weights_unpinned(tmp_path, "avx2") != _weights_unpinned(tmp_path, "avx512")
