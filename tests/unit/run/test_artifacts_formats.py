"""A run's log is kept with its results whatever its format, under a name every reader of results folders knows."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from autotest.inputs.tracker_layout import COPY_NAMES, copy_name, tracker_copy
from autotest.run.artifacts import collect_artifacts
from tests.unit.judge.test_unclear_messages import write_events


def _hf_output_dir(work: Path) -> Path:
    state = work / "checkpoint-4" / "trainer_state.json"
    state.parent.mkdir(parents=True)
    state.write_text(json.dumps({"log_history": [{"loss": 1.0, "epoch": 1.0, "step": 4}]}))
    return state


def test_a_hugging_face_output_dir_keeps_its_trainer_state(tmp_path):
    state = _hf_output_dir(tmp_path / "out")
    found = collect_artifacts(tmp_path / "out", tmp_path / "res", fmt="hf-trainer")
    assert found.tracker_source == state and found.tracker == tmp_path / "res" / "trainer_state.json"
    assert tracker_copy(tmp_path / "res") == found.tracker


def test_a_callback_jsonl_and_a_verl_log_are_kept_as_tracker_jsonl(tmp_path):
    log = tmp_path / "out" / "logs" / "metrics.jsonl"
    log.parent.mkdir(parents=True)
    log.write_text('{"step": 1, "data": {"critic/score/mean": 0.5}}\n')
    found = collect_artifacts(tmp_path / "out", tmp_path / "res", fmt="verl")
    assert found.tracker == tmp_path / "res" / "tracker.jsonl" and found.tracker.read_text() == log.read_text()


def test_tensorboard_events_without_exp_dirs_are_kept_in_a_folder(tmp_path):
    write_events(tmp_path / "out" / "runs" / "Dec01_host", {"train/reward": {1: 0.5}})
    found = collect_artifacts(tmp_path / "out", tmp_path / "res", fmt="tensorboard")
    assert found.tracker == tmp_path / "res" / "tensorboard"
    assert [p.name for p in found.tracker.rglob("*")] == ["events.out.tfevents.1.host"]
    assert tracker_copy(tmp_path / "res") == found.tracker


def test_an_mlflow_run_is_kept_as_a_folder_and_a_console_log_as_a_file(tmp_path):
    run = tmp_path / "out" / "mlruns" / "0" / "abc"
    (run / "metrics" / "reward").mkdir(parents=True)
    (run / "meta.yaml").write_text("run_id: abc\n")
    (run / "metrics" / "reward" / "mean").write_text("1700000000000 0.5 1\n")
    found = collect_artifacts(tmp_path / "out", tmp_path / "res", fmt="mlflow")
    assert found.tracker_source == run and found.tracker == tmp_path / "res" / "mlflow-run"
    assert (found.tracker / "metrics" / "reward" / "mean").read_text() == "1700000000000 0.5 1\n"
    assert tracker_copy(tmp_path / "res") == found.tracker
    log = tmp_path / "work" / "train.log"
    log.parent.mkdir()
    log.write_text("step:1 - loss:0.5\n")
    assert collect_artifacts(tmp_path / "work", tmp_path / "res2", fmt="console:verl").tracker.read_text() == \
        log.read_text()


def test_a_log_from_before_the_launch_is_not_this_runs(tmp_path):
    _hf_output_dir(tmp_path / "out")
    found = collect_artifacts(tmp_path / "out", tmp_path / "res", fmt="hf-trainer", since=time.time() + 5)
    assert found.tracker is None
    assert found.notes[0] == f"no hf-trainer metric log at {tmp_path / 'out'} (no exp dir)"


@pytest.mark.parametrize("fmt, source, name", [("xtuner", "t.jsonl", "tracker.jsonl"), ("verl", "m.jsonl", "tracker.jsonl"),
                                               ("hf-trainer", "trainer_state.json", "trainer_state.json"),
                                               ("hf-trainer", "cb.jsonl", "tracker.jsonl"),
                                               ("tensorboard", "runs", "tensorboard"), ("mlflow", "abc", "mlflow-run"),
                                               ("wandb", "run-x.wandb", "wandb-run.wandb"),
                                               ("wandb", "h.csv", "history.csv"), ("wandb", "h.jsonl", "tracker.jsonl"),
                                               ("console:verl", "train.log", "console.log")])
def test_copy_names(fmt, source, name):
    assert copy_name(fmt, Path(source)) == name and name in COPY_NAMES


def test_tracker_copy_is_none_without_a_copy(tmp_path):
    assert tracker_copy(tmp_path) is None
