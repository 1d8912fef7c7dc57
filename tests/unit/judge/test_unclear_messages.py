"""Every unclear reader message names its cause (issue 19.6): corrupt events, negative steps, the format
to pass, another run's log, renamed metrics, and a resumed run whose later row differs."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from autotest.errors import UsageError
from autotest.inputs.baseline import load_baseline
from autotest.judge.model import ERROR
from autotest.readers.reading import read_trace
from autotest.judge.verdict import compare
from tests.helpers import write_yaml

pytest.importorskip("tensorboard")


def write_events(folder: Path, series: dict[str, dict[int, float]], name: str = "events.out.tfevents.1.host") -> Path:
    """An event file written by the tensorboard package's own writer (what SummaryWriter writes)."""
    from tensorboard.compat.proto.event_pb2 import Event
    from tensorboard.compat.proto.summary_pb2 import Summary
    from tensorboard.summary.writer.record_writer import RecordWriter

    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    with path.open("wb") as handle:
        writer = RecordWriter(handle)
        writer.write(Event(wall_time=time.time(), file_version="brain.Event:2").SerializeToString())
        for tag, values in series.items():
            for step, value in values.items():
                event = Event(step=step, wall_time=time.time(),
                              summary=Summary(value=[Summary.Value(tag=tag, simple_value=value)]))
                writer.write(event.SerializeToString())
    return path


REWARDS = {"response/rewards/mean": {s: 0.1 * s for s in range(1, 6)}, "eval/accuracy": {0: 0.4, 5: 0.6}}

BASELINE = """schema_version: 1
name: tiny
golden:
  table:
    response/rewards/mean: {1: 0.1, 2: 0.2, 3: 0.3, 4: 0.4, 5: 0.5}
    eval/accuracy: {0: 0.4, 5: 0.6}
steps: {expected: 5, exact: true}
checks:
  - {metric: response/rewards/mean, method: absolute, operator: "<", threshold: 0.05}
  - {metric: eval/accuracy, method: absolute, operator: "<", threshold: 0.05, scope: points, points: [0, 5]}
"""


def test_an_event_file_of_random_bytes_is_named_unreadable(tmp_path):
    path = tmp_path / "events.out.tfevents.1.host"
    path.write_bytes(os.urandom(4096))
    with pytest.raises(UsageError, match=rf"^{path}: not a readable TensorBoard event file \(its first record fails "
                                         "the checksum: corrupt, or not written by a SummaryWriter\\)"):
        read_trace(path)
    with pytest.raises(UsageError, match=rf"^{path}: not a readable TensorBoard event file"):
        read_trace(tmp_path, "tensorboard")


def test_an_event_file_corrupt_part_way_names_the_byte(tmp_path):
    path = write_events(tmp_path, REWARDS)
    data = bytearray(path.read_bytes())
    data[200:216] = os.urandom(16)  # inside the records, after the first: a header or a record's data
    path.write_bytes(bytes(data))
    with pytest.raises(UsageError, match=rf"^{path}: TensorBoard event file is corrupt"):
        read_trace(path)
    data = bytearray(path.read_bytes())
    data[-10] ^= 0xFF  # inside the last record's data: only its own checksum can tell
    path.write_bytes(bytes(data))
    with pytest.raises(UsageError, match=rf"^{path}: TensorBoard event file is corrupt: a record's data fails its "
                                         r"checksum, so the events after it cannot be read"):
        read_trace(path)


def test_a_cut_short_final_event_record_is_dropped_with_a_warning(tmp_path):
    path = write_events(tmp_path, REWARDS)
    path.write_bytes(path.read_bytes()[:-7])
    trace = read_trace(path)
    assert any(w.startswith(f"{path}: truncated final event record dropped at byte") for w in trace.warnings)
    assert trace.eval_steps == (0,)  # step 5's eval event was the one cut


def test_negative_tensorboard_steps_are_named(tmp_path):
    path = write_events(tmp_path, {"response/rewards/mean": {-3: 0.1, -2: 0.2}})
    with pytest.raises(UsageError, match=rf"^{path}: tag response/rewards/mean has step -3, a negative step; steps "
                                         "count from 0"):
        read_trace(path)


def test_format_auto_on_a_folder_of_event_files_reads_them(tmp_path):
    write_events(tmp_path / "logs", REWARDS)
    trace = read_trace(tmp_path, "auto")
    assert trace.format == "tensorboard" and trace.train_steps == (1, 2, 3, 4, 5)


def test_an_event_file_under_another_name_suggests_the_tensorboard_format(tmp_path):
    path = write_events(tmp_path, REWARDS, name="tracker.jsonl")
    with pytest.raises(UsageError, match=rf"^{path}: metric log is a TensorBoard event file \(binary records\); read "
                                         "it with --format tensorboard"):
        read_trace(path)


def test_every_tag_renamed_is_one_error_naming_the_metrics_and_metric_aliases(tmp_path):
    baseline = load_baseline(write_yaml(tmp_path / "b.yaml", BASELINE))
    renamed = {f"train/{k}": v for k, v in REWARDS.items()}
    verdict = compare(baseline, read_trace(write_events(tmp_path / "tb", renamed), "tensorboard")).verdict
    assert verdict.status == ERROR
    assert [r.check_id for r in verdict.results] == ["metrics[names]"]
    message = verdict.results[0].message
    assert message.startswith("2 of 2 checked metrics are not in the log (")
    assert ": eval/accuracy, response/rewards/mean; it logs 2 metric(s) the baseline does not name: " \
           "train/eval/accuracy, train/response/rewards/mean" in message
    assert "e.g. metric_aliases: {eval/accuracy: train/eval/accuracy}" in message
    assert verdict.triage[0].rule == "metric-names"


def test_another_cases_events_name_the_tags_not_in_the_baseline(tmp_path):
    baseline = load_baseline(write_yaml(tmp_path / "b.yaml", BASELINE))
    other = {"response/rewards/mean": {1: 0.1, 2: 0.2}, "distillation/kl": {1: 0.3, 2: 0.2}}
    verdict = compare(baseline, read_trace(write_events(tmp_path / "tb", other), "tensorboard")).verdict
    assert verdict.status == ERROR
    first = verdict.results[0]
    assert first.check_id == "metrics[names]" and first.status == ERROR
    assert "1 of 2 checked metrics are not in the log" in first.message
    assert "it logs 1 metric(s) the baseline does not name: distillation/kl" in first.message
    assert "metric_aliases" in first.message and "another case's log" in first.message
    assert verdict.triage[0].rule == "metric-names"


def test_a_resumed_run_whose_later_step_row_is_broken_is_an_error_not_a_pass(tmp_path):
    path = tmp_path / "tracker.jsonl"
    rows = [{"step": s, "response/rewards/mean": 0.1 * s} for s in range(1, 6)]
    rows.append({"step": 5, "response/rewards/mean": 0.0})  # the resumed run's step 5, broken
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    with pytest.raises(UsageError, match=rf"^{path}:6: step 5 logged again with a different response/rewards/mean: "
                                         r"0 there, 0.5 at line 5 \(more than 0.1% apart\)"):
        read_trace(path)


def test_a_run_that_stopped_before_a_metrics_first_point_is_not_told_to_rename_it(tmp_path):
    baseline = load_baseline(write_yaml(tmp_path / "b.yaml", BASELINE.replace("eval/accuracy: {0: 0.4, 5: 0.6}",
                                                                              "eval/accuracy: {5: 0.6}")))
    early = {"response/rewards/mean": {1: 0.1, 2: 0.2}, "time/step": {1: 1.0, 2: 1.0}}  # stopped at step 2
    verdict = compare(baseline, read_trace(write_events(tmp_path / "tb", early), "tensorboard")).verdict
    assert verdict.status == ERROR
    assert "metrics[names]" not in [r.check_id for r in verdict.results]
    assert any("run is incomplete" in r.message for r in verdict.results)


def test_the_trainers_epoch_on_every_row_is_not_a_repeat(tmp_path):
    folder = tmp_path / "tb"
    path = write_events(folder, {"train/reward": {1: 0.1, 2: 0.2}, "eval/reward": {2: 0.3},
                                 "train/train_runtime": {2: 1.0}})
    from tensorboard.compat.proto.event_pb2 import Event
    from tensorboard.compat.proto.summary_pb2 import Summary
    from tensorboard.summary.writer.record_writer import RecordWriter

    with path.open("ab") as handle:  # the callback logs train/epoch with the train, eval and summary rows
        writer = RecordWriter(handle)
        for step in (1, 2, 2, 2):
            event = Event(step=step, wall_time=time.time(),
                          summary=Summary(value=[Summary.Value(tag="train/epoch", simple_value=step / 2)]))
            writer.write(event.SerializeToString())
    trace = read_trace(folder, "tensorboard")
    assert trace.warnings == ()
    assert dict(trace.series["train/epoch"]) == {1: 0.5, 2: 1.0}
