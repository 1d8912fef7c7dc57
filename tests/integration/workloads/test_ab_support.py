"""Tiny GRPO's A/B support, real short runs: the A/A perturbation (same N bitwise, N=1 against N=2 apart),
frozen-rollout replay (a run's own saved rollouts reproduce its training; a rollout-side regression changes
nothing under replay, a trainer-side one does) and a replay folder that cannot be used (one line, exit 2)."""

from __future__ import annotations

import json
import os
import sys

import pytest
from tests import waits

pytestmark = pytest.mark.slow

STEPS = "6"
TRAINER_METRICS = ("train_metrics/", "entropy/", "mismatch/")


def run(work, *args, env=None):
    done = waits.run([sys.executable, "-m", "autotest.workloads.grpo", "--work-dir", str(work), "--seed", "3",
                      "--steps", STEPS, "--eval-every", "3", *args],
                     env={**os.environ, **(env or {})}, capture_output=True, text=True, limit_s=600)
    return done


def rows(work):
    tracker = next(work.glob("**/tracker.jsonl"))
    return [{k: v for k, v in json.loads(line).items() if not k.startswith(("time/", "memory/"))}
            for line in tracker.read_text().splitlines()]


def trainer_values(work):
    return [{k: v for k, v in r.items() if k.startswith(TRAINER_METRICS)} for r in rows(work)]


def test_perturbation_is_repeatable_and_moves_the_run(tmp_path):
    for name, value in (("a", "1"), ("b", "1"), ("c", "2")):
        assert run(tmp_path / name, env={"RL_AUTOTEST_AA_PERTURB": value}).returncode == 0
    assert rows(tmp_path / "a") == rows(tmp_path / "b")
    assert rows(tmp_path / "a") != rows(tmp_path / "c")
    bad = run(tmp_path / "d", env={"RL_AUTOTEST_AA_PERTURB": "lots"})
    assert bad.returncode == 2 and "RL_AUTOTEST_AA_PERTURB" in bad.stderr + bad.stdout


def test_replay_holds_the_rollout_and_shows_the_trainer(tmp_path):
    saved = tmp_path / "saved"
    assert run(tmp_path / "original", "--save-rollouts", str(saved)).returncode == 0
    for name, fault in (("replay", None), ("rollout-side", "sampling-temperature:1.5"), ("trainer-side", "lr-scale:0.25")):
        extra = ["--fault", fault] if fault else []
        done = run(tmp_path / name, "--replay-rollouts", str(saved), *extra)
        assert done.returncode == 0, done.stderr[-2000:]
    rewards = [r.get("response/rewards/mean") for r in rows(tmp_path / "original")]
    assert [r.get("response/rewards/mean") for r in rows(tmp_path / "trainer-side")] == rewards  # rollout held
    assert trainer_values(tmp_path / "replay") == trainer_values(tmp_path / "original")
    assert trainer_values(tmp_path / "rollout-side") == trainer_values(tmp_path / "replay")
    assert trainer_values(tmp_path / "trainer-side") != trainer_values(tmp_path / "replay")


def test_a_missing_replay_folder_is_one_line(tmp_path):
    done = run(tmp_path / "w", "--replay-rollouts", str(tmp_path / "nowhere"))
    assert done.returncode == 2
    assert "nowhere" in done.stderr and "Traceback" not in done.stderr
