"""A run's metric log is found in a work dir whatever wrote it; several are named; none names every place looked."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from autotest.cli import build_parser, main
from autotest.errors import UsageError
from autotest.inputs.case import TRACKER_FORMATS
from autotest.inputs.log_search import TENSORBOARD, TRAINER_STATE_KIND, XTUNER_LAYOUT, find_logs, log_for_format
from autotest.readers.reading import locate_log, read_trace
from autotest.readers.registry import BUILTIN
from tests.helpers import write_tracker, write_yaml
from tests.unit.judge.test_unclear_messages import BASELINE, write_events


def _state(path: Path, rewards: dict[int, float]) -> Path:
    history = [{"response/rewards/mean": v, "epoch": s / 10, "step": s} for s, v in rewards.items()]
    history.append({"eval_accuracy": 0.4, "epoch": 0.0, "step": 0})
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"log_history": history}))
    return path


def test_every_format_is_listed_everywhere_formats_are_listed():
    compare = next(a for a in build_parser()._subparsers._group_actions[0].choices["compare"]._actions
                   if a.dest == "format")
    assert TRACKER_FORMATS == tuple(f.name for f in BUILTIN)
    assert all(name in compare.help for name in TRACKER_FORMATS), compare.help


def test_xtuner_layout_newest_exp_dir(tmp_path):
    for stamp in ("20261101120000", "20261102120000"):
        write_tracker(tmp_path / stamp / "logs" / "exp_tracking" / "tracker.jsonl", {1: {"a": 1.0}})
    assert find_logs(tmp_path)[0].path == tmp_path / "20261102120000" / "logs" / "exp_tracking" / "tracker.jsonl"


def test_xtuner_tensorboard_exp_dir(tmp_path):
    write_events(tmp_path / "20261101120000" / "logs", {"a": {1: 5.0}})  # an earlier run's: never mixed in
    write_events(tmp_path / "20261102120000" / "logs" / "tb", {"a": {1: 1.0}})
    assert [(f.path, f.kind) for f in find_logs(tmp_path)] == [(tmp_path / "20261102120000" / "logs" / "tb",
                                                                 TENSORBOARD)]
    for fmt in ("auto", "tensorboard"):
        assert dict(read_trace(tmp_path, fmt).series["a"]) == {1: 1.0}


def test_verl_jsonl_in_a_work_dir(tmp_path):
    path = tmp_path / "logs" / "metrics.jsonl"
    path.parent.mkdir()
    path.write_text(json.dumps({"step": 1, "data": {"critic/score/mean": 0.5}}) + "\n")
    trace = read_trace(tmp_path)
    assert trace.format == "verl" and trace.source == str(path) and trace.warnings == ()


def test_hugging_face_output_dir_takes_the_newest_checkpoint(tmp_path):
    _state(tmp_path / "checkpoint-5" / "trainer_state.json", {5: 0.5})
    newest = _state(tmp_path / "checkpoint-10" / "trainer_state.json", {5: 0.5, 10: 0.6})
    (tmp_path / "checkpoint-9").mkdir()  # a checkpoint being written: no state yet
    assert [(f.path, f.kind) for f in find_logs(tmp_path)] == [(newest, TRAINER_STATE_KIND)]
    assert read_trace(tmp_path).train_steps == (5, 10)


def test_an_output_dir_inside_the_work_dir_is_found_and_the_last_written_run_wins(tmp_path):
    old = _state(tmp_path / "old_out" / "checkpoint-20" / "trainer_state.json", {20: 0.2})
    _state(tmp_path / "out" / "checkpoint-5" / "trainer_state.json", {5: 0.5})
    newest = _state(tmp_path / "out" / "checkpoint-10" / "trainer_state.json", {5: 0.5, 10: 0.6})
    os.utime(old, ns=(1, 1))  # an earlier run's output dir, with a higher checkpoint number
    assert [(f.path, f.kind) for f in find_logs(tmp_path)] == [(newest, TRAINER_STATE_KIND)]
    assert read_trace(tmp_path).train_steps == (5, 10)


def test_a_trainer_state_deeper_than_the_search_is_not_found(tmp_path):
    _state(tmp_path / "a" / "b" / "c" / "checkpoint-1" / "trainer_state.json", {1: 0.1})
    assert find_logs(tmp_path) == []


def test_several_logs_the_choice_is_said_and_format_filters(tmp_path):
    tracker = write_tracker(tmp_path / "tracker.jsonl", {1: {"response/rewards/mean": 0.1}})
    state = _state(tmp_path / "trainer_state.json", {1: 0.1})
    write_events(tmp_path / "runs" / "Dec01_host", {"train/reward": {1: 0.1}})
    assert [f.kind for f in find_logs(tmp_path)] == [XTUNER_LAYOUT, TRAINER_STATE_KIND, TENSORBOARD]
    path, fmt, notes = locate_log(tmp_path)
    assert (path, fmt) == (tracker, "xtuner")
    assert notes == (f"{tmp_path}: found 3 metric logs: tracker.jsonl (xtuner tracker), trainer_state.json "
                     "(trainer_state.json), runs/Dec01_host (TensorBoard events); took tracker.jsonl (xtuner tracker) "
                     "as xtuner; pass the file (and --format) to judge another",)
    assert locate_log(tmp_path, "hf-trainer")[:2] == (state, "hf-trainer")
    assert locate_log(tmp_path, "tensorboard")[:2] == (tmp_path, "tensorboard")
    assert read_trace(tmp_path).warnings == notes


def test_nothing_found_names_every_format_and_place(tmp_path):
    (tmp_path / "notes.txt").write_text("x")
    with pytest.raises(UsageError) as info:
        read_trace(tmp_path)
    message = str(info.value)
    assert message.startswith(f"{tmp_path}: no metric log found; looked for: xtuner tracker (")
    for place in ("JSONL logs of verl, a Hugging Face TrainerCallback", "Hugging Face trainer_state.json (at the top, "
                  "else the newest up to 3 levels down, e.g. <output_dir>/checkpoint-<N>/)", "TensorBoard event files (events.out.tfevents.* below it)",
                  "entries: notes.txt;"):
        assert place in message


def test_a_format_with_no_log_of_it_says_what_else_is_there(tmp_path):
    _state(tmp_path / "trainer_state.json", {1: 0.1})
    with pytest.raises(UsageError, match=r"no verl metric log found; looked for: .* \(found only: trainer_state.json "
                                         r"\(trainer_state.json\); pass --format auto or that format\)"):
        read_trace(tmp_path, "verl")


def test_an_unknown_format_lists_every_format(tmp_path):
    with pytest.raises(UsageError, match=r"unknown metric-log format 'comet'; choose one of xtuner, verl, hf-trainer, "
                                         r"tensorboard, mlflow, wandb, console \(or auto\)"):
        read_trace(tmp_path, "comet")


def test_log_for_format_ignores_a_log_older_than_the_launch(tmp_path):
    state = _state(tmp_path / "trainer_state.json", {1: 0.1})
    assert log_for_format(tmp_path, "hf-trainer") == state
    assert log_for_format(tmp_path, "hf-trainer", since=state.stat().st_mtime + 10) is None
    assert log_for_format(tmp_path, "tensorboard") is None


def test_compare_current_work_dir_says_which_log_it_took(tmp_path, capsys):
    baseline = write_yaml(tmp_path / "b.yaml", BASELINE)
    work = tmp_path / "work"
    write_events(work / "runs" / "a", {"response/rewards/mean": {s: 0.1 * s for s in range(1, 6)},
                                       "eval/accuracy": {0: 0.4, 5: 0.6}})
    (work / "notes.jsonl").write_text("")
    code = main(["compare", "--baseline", str(baseline), "--current", str(work), "--no-plots"])
    captured = capsys.readouterr()
    assert code == 2, captured  # the JSONL is preferred; it has no rows, and the others are named
    assert f"{work}/notes.jsonl: metric log has no rows; did the run start? (found 2 metric logs: notes.jsonl " \
           "(JSONL log), runs/a (TensorBoard events); took notes.jsonl (JSONL log) as xtuner; pass the file" \
        in captured.err
    (work / "notes.jsonl").unlink()
    code = main(["compare", "--baseline", str(baseline), "--current", str(work), "--no-plots"])
    captured = capsys.readouterr()
    assert code == 0, captured
    assert "took" not in captured.err  # one log: nothing to choose
