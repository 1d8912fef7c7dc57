"""Project mode end to end: a framework's repository outside the harness holds its cases, baselines and
results; `rl-autotest` and `pytest -m grpo` run from there use them and write nothing into the harness."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from autotest.inputs.project import PROJECT_ENV
from autotest.run.results_dir import RESULTS_ENV
from tests.helpers import DATA, ROOT
from tests import waits

CASE = """name: {name}
description: the scripted stand-in, as a framework's own case
markers: [grpo]
goal: rewards stay at the golden values
minimal_scale: one process writing 10 steps
platform: {{gpus: 0, framework: null}}
launch:
  command: ["{{python}}", scripted_run.py, --work-dir, "{{work_dir}}", --seed, "{{seed}}"]
  fault_args: [--fault, "{{fault}}"]
  timeout_s: 30  # bounds a broken run: this one takes seconds, at load 20 too
tracker: {{format: xtuner, work_dir_env: WORK_DIR}}
expected: {{steps: 10, exact_steps: true}}
seed: {{default: 3, calibration: [0, 1, 2]}}
consistency: {{policy: "off"}}
"""


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A git repository with the project table, one case, its baseline and the 'training' script."""
    root = tmp_path / "myframework"
    (root / "accuracy" / "cases").mkdir(parents=True)
    (root / "accuracy" / "baselines").mkdir()
    (root / "pyproject.toml").write_text('[project]\nname = "myframework"\nversion = "0"\n\n[tool.rl-autotest]\n'
                                         'cases = ["accuracy/cases"]\nbaselines = "accuracy/baselines"\n'
                                         'results = "accuracy/results"\n')
    (root / "accuracy" / "cases" / "mine.yaml").write_text(CASE.format(name="mine"))
    baseline = (DATA / "baselines" / "scripted.yaml").read_text().replace("name: scripted", "name: mine")
    (root / "accuracy" / "baselines" / "mine.yaml").write_text(baseline)
    shutil.copy(DATA / "scripted_run.py", root / "scripted_run.py")
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@t"}
    for args in (["init", "-q"], ["add", "."], ["commit", "-q", "-m", "framework"]):
        subprocess.run(["git", "-C", str(root), *args], check=True, env=env, capture_output=True)
    return root


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in (RESULTS_ENV, PROJECT_ENV, "RL_AUTOTEST_HISTORY")}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
    return env


def _harness_results() -> set[Path]:
    return set((ROOT / "results").rglob("results.json")) if (ROOT / "results").is_dir() else set()


def test_run_in_a_project_uses_its_case_baseline_results_and_commit(project: Path) -> None:
    before = _harness_results()
    done = waits.run([sys.executable, "-m", "autotest.cli", "run", "mine", "--yes"], cwd=project / "accuracy",
                     env=_env(), capture_output=True, text=True, limit_s=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "mine: PASS" in done.stdout
    folders = list((project / "accuracy" / "results" / "mine").iterdir())
    assert len(folders) == 1
    card = (folders[0] / "card.md").read_text()
    head = subprocess.run(["git", "-C", str(project), "rev-parse", "HEAD"], capture_output=True, text=True).stdout
    assert f"commit under test: `{project}` {head.strip()[:12]}" in card  # the framework's, not the harness's
    assert "- harness: rl-autotest " in card
    assert (project / "accuracy" / "results" / "history.sqlite").is_file()  # the history beside its results
    assert _harness_results() == before  # nothing written into the harness checkout

    listed = waits.run([sys.executable, "-m", "autotest.cli", "cases"], cwd=project, env=_env(),
                       capture_output=True, text=True, limit_s=60)
    assert listed.returncode == 0 and [line.split()[0] for line in listed.stdout.splitlines()] == ["mine"]


def test_pytest_m_grpo_in_a_project_collects_exactly_its_cases(project: Path) -> None:
    args = [sys.executable, "-m", "pytest", "-m", "grpo", "-p", "no:cacheprovider", "--collect-only", "-q"]
    done = waits.run(args, cwd=project, env=_env(), capture_output=True, text=True, limit_s=120)
    assert done.returncode == 0, done.stdout + done.stderr
    collected = [line for line in done.stdout.splitlines() if "::" in line]
    assert len(collected) == 1 and collected[0].endswith("test_case_accuracy[mine]")
    demo = waits.run([*args, "--packaged-cases"], cwd=project, env=_env(), capture_output=True, text=True,
                     limit_s=120)
    assert "test_case_accuracy[tiny-grpo]" in demo.stdout and "test_case_accuracy[mine]" in demo.stdout


def test_pytest_m_grpo_in_a_project_runs_and_judges_its_case(project: Path) -> None:
    done = waits.run([sys.executable, "-m", "pytest", "-m", "grpo", "-p", "no:cacheprovider", "-q"],
                     cwd=project, env=_env(), capture_output=True, text=True, limit_s=180)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "mine: PASS" in done.stdout and "1 passed" in done.stdout
    assert list((project / "accuracy" / "results" / "mine").iterdir())


def test_a_bad_project_table_is_one_line_from_every_entry_point(project: Path) -> None:
    (project / "pyproject.toml").write_text('[tool.rl-autotest]\ncases = ["accuracy/cases"]\nresults = "r"\n')
    cli = waits.run([sys.executable, "-m", "autotest.cli", "cases"], cwd=project, env=_env(),
                    capture_output=True, text=True, limit_s=60)
    assert cli.returncode == 2
    assert cli.stderr.strip().splitlines() == [
        f"rl-autotest: error: {project / 'pyproject.toml'}: tool.rl-autotest.baselines: required key is missing; "
        "add it (see the project table's keys (docs/project.md))"]
    plugin = waits.run([sys.executable, "-m", "pytest", "-m", "grpo", "-p", "no:cacheprovider", "-q"],
                       cwd=project, env=_env(), capture_output=True, text=True, limit_s=60)
    assert plugin.returncode != 0 and "Traceback" not in plugin.stdout + plugin.stderr
    assert "tool.rl-autotest.baselines: required key is missing" in plugin.stdout + plugin.stderr


@pytest.mark.slow  # eight runs of the stand-in (16 s on a quiet machine)
def test_a_b_in_a_project_paired_noise_ab_and_the_pytest_ab_base(project: Path) -> None:
    """A project's case A/B: its paired noise measured (the stand-in reads no perturbation: pairs agree bitwise,
    each threshold its floor), a reward offset fails the paired gate, and ``pytest --ab-base`` judges the case
    paired; everything under the project's own results."""
    def cli(*args: str) -> subprocess.CompletedProcess:
        return waits.run([sys.executable, "-m", "autotest.cli", *args], cwd=project, env=_env(),
                         capture_output=True, text=True, limit_s=180)

    calibrated = cli("calibrate", "mine", "--paired", "--runs", "2")
    assert calibrated.returncode == 0, calibrated.stdout + calibrated.stderr
    # the project's golden was written by hand (tests/data), so its candidate is promoted with a reason
    promoted = cli("baseline", "promote", "mine", "--force", "hand-made golden of the scripted stand-in")
    assert promoted.returncode == 0, promoted.stdout + promoted.stderr
    assert "paired:" in (project / "accuracy" / "baselines" / "mine.yaml").read_text()
    moved = cli("ab", "mine", "--base", "clean", "--head", "fault:reward-offset:0.05", "--seeds", "11", "--no-plots")
    assert moved.returncode == 1, moved.stdout + moved.stderr
    assert "FAIL: response/rewards/mean[paired" in moved.stdout and "A/B mine: FAIL" in moved.stdout
    assert list((project / "accuracy" / "results" / "mine").glob("ab-*/ab.json"))
    same = waits.run([sys.executable, "-m", "pytest", "-m", "grpo", "-p", "no:cacheprovider", "-q",
                      "--ab-base", "clean", "--replicates", "1"], cwd=project, env=_env(), capture_output=True,
                     text=True, limit_s=180)
    assert same.returncode == 0 and "1 passed" in same.stdout, same.stdout + same.stderr
    assert len(list((project / "accuracy" / "results" / "mine").glob("ab-*/ab.json"))) == 2
