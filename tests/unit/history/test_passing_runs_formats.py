"""calibrate --from-history takes a passing run whatever its log copy (tracker.jsonl, trainer_state.json, tensorboard/)."""

from __future__ import annotations

import pytest

from autotest.history.store import ingest, passing_runs
from tests.unit.history.builders import REWARDS, STEP_TIME, write_results_folder
from tests.unit.judge.test_unclear_messages import write_events


def test_passing_runs_with_a_tensorboard_or_trainer_state_copy(tmp_path) -> None:
    pytest.importorskip("tensorboard")
    url = f"sqlite:///{tmp_path / 'history.sqlite'}"
    tb = write_results_folder(tmp_path, "c", 1, {REWARDS: 0.05, STEP_TIME: 0.2}, tracker=False)
    write_events(tb / "tensorboard", {REWARDS: {1: 0.1}})
    hf = write_results_folder(tmp_path, "c", 2, {REWARDS: 0.05, STEP_TIME: 0.2}, tracker=False)
    (hf / "trainer_state.json").write_text('{"log_history": [{"loss": 1.0, "step": 1}]}')
    write_results_folder(tmp_path, "c", 3, {REWARDS: 0.05, STEP_TIME: 0.2}, tracker=False)  # no copy: skipped
    ingest([tmp_path], url)
    runs = passing_runs("c", 3, url)
    assert [(r.results_dir, r.tracker) for r in runs] == [(tb, tb / "tensorboard"), (hf, hf / "trainer_state.json")]
