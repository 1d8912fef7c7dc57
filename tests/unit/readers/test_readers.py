from __future__ import annotations

import json
import math

import pytest

from autotest.errors import UsageError
from autotest.readers.reading import find_tracker, read_trace
from tests.helpers import DATA as TEST_DATA
from tests.helpers import write_tracker

DATA = TEST_DATA / "bad_logs"


def test_row_kinds_and_alignment_by_real_step(tmp_path):
    path = write_tracker(tmp_path / "tracker.jsonl",
                         {1: {"response/rewards/mean": 0.1}, 2: {"response/rewards/mean": 0.2},
                          4: {"response/rewards/mean": 0.4, "mismatch/mismatch_k3_kl": 1e-9}},
                         evals={0: {"eval/accuracy": 0.3}, 4: {"eval/accuracy": 0.5}})
    trace = read_trace(path)
    assert trace.train_steps == (1, 2, 4)
    assert trace.eval_steps == (0, 4)
    assert dict(trace.series["response/rewards/mean"]) == {1: 0.1, 2: 0.2, 4: 0.4}
    # a metric logged only at step 4 stays at step 4: never shifted by list position
    assert dict(trace.series["mismatch/mismatch_k3_kl"]) == {4: 1e-9}
    assert dict(trace.series["eval/accuracy"]) == {0: 0.3, 4: 0.5}
    # mini-batch rows share the summary row's step and are averaged per step
    assert trace.series["train_metrics/worker_0/loss"][2] == pytest.approx(0.3)
    assert trace.warnings == ()


def test_nan_infinity_literals_and_blank_lines(tmp_path):
    path = tmp_path / "t.jsonl"
    path.write_text('{"a": NaN, "step": 1}\n\n{"a": Infinity, "step": 2}\n{"a": null, "step": 3}\n')
    series = read_trace(path).series["a"]
    assert math.isnan(series[1]) and series[2] == math.inf and math.isnan(series[3])


def test_truncated_final_line_is_dropped_with_warning(tmp_path):
    path = write_tracker(tmp_path / "t.jsonl", {1: {"a": 1.0}, 2: {"a": 2.0}}, tail='{"a": 3.0, "st')
    trace = read_trace(path)
    assert trace.train_steps == (1, 2)
    assert len(trace.warnings) == 1 and "truncated final line dropped" in trace.warnings[0]
    assert f"{path}:" in trace.warnings[0]


def test_resumed_run_same_values_later_row_wins_with_one_warning(tmp_path):
    path = tmp_path / "t.jsonl"
    rows = [{"a": 1.0, "step": 1}, {"a": 2.0, "step": 2}, {"a": 2.0001, "step": 2}, {"a": 3.0, "step": 3}]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    trace = read_trace(path)
    assert trace.series["a"][2] == 2.0001
    assert trace.train_steps == (1, 2, 3)
    assert trace.warnings == (f"{path}: 1 step(s) logged again (resumed run?): step 2 (line 2 and line 3); the "
                              "values agree within 0.1%, the later rows win",)


def test_resumed_run_whose_later_row_differs_is_an_error_naming_both_lines(tmp_path):
    path = tmp_path / "t.jsonl"
    rows = [{"a": 1.0, "step": 1}, {"a": 2.0, "step": 2}, {"a": 0.0, "step": 2}, {"a": 3.0, "step": 3}]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    with pytest.raises(UsageError, match=rf"^{path}:3: step 2 logged again with a different a: 0 there, 2 at "
                                         r"line 2 \(more than 0.1% apart\): a resumed run re-did the step"):
        read_trace(path)


def test_line_numbers_are_recorded(tmp_path):
    path = write_tracker(tmp_path / "t.jsonl", {1: {"a": 1.0}}, evals={0: {"eval/accuracy": 0.5}})
    trace = read_trace(path)
    assert trace.step_lines[0] == 1
    assert trace.step_lines[1] == 4  # after the eval-only row and two mini-batch rows


def test_verl_format_and_aliases(tmp_path):
    path = tmp_path / "verl.jsonl"
    rows = [{"step": 1, "data": {"rollout_corr/k3_kl": 1e-5, "critic/score/mean": 0.2}},
            {"step": 2, "data": {"rollout_corr/k3_kl": 2e-5, "val-core/acc": 0.5}}]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    trace = read_trace(path, aliases={"mismatch/mismatch_k3_kl": "rollout_corr/k3_kl"})
    assert trace.format == "verl"
    assert dict(trace.series["mismatch/mismatch_k3_kl"]) == {1: 1e-5, 2: 2e-5}
    assert trace.eval_steps == (2,)


@pytest.mark.parametrize("line", (DATA / "EXPECTED.txt").read_text(encoding="utf-8").splitlines())
def test_malformed_log_corpus(line):
    name, expected = line.split("\t")
    with pytest.raises(UsageError) as info:
        read_trace(DATA / name, "verl" if name.startswith("verl") else "auto")
    assert str(info.value).endswith(expected)
    assert "\n" not in str(info.value)


def test_find_tracker_picks_newest_exp_dir(tmp_path):
    for stamp in ("20261101120000", "20261102120000"):
        write_tracker(tmp_path / stamp / "logs" / "exp_tracking" / "tracker.jsonl", {1: {"a": float(stamp[7])}})
    (tmp_path / "not-a-run").mkdir()
    assert find_tracker(tmp_path) == tmp_path / "20261102120000" / "logs" / "exp_tracking" / "tracker.jsonl"


def test_find_tracker_errors_list_what_was_found(tmp_path):
    (tmp_path / "20261101120000" / "logs").mkdir(parents=True)
    (tmp_path / "20261101120000" / "logs" / "tb.jsonl").write_text("{}\n")
    with pytest.raises(UsageError, match=r"no metric log in the newest exp dir 20261101120000 .*found: "
                                         r"20261101120000/logs/tb.jsonl\); is exp_tracker set to jsonl or tensorboard"):
        find_tracker(tmp_path)
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(UsageError, match=r"no metric log found; looked for: xtuner tracker .*TensorBoard event files "
                                         r".*; entries: empty; pass the log itself"):
        find_tracker(empty)
    with pytest.raises(UsageError, match="no such file or directory"):
        find_tracker(tmp_path / "missing")


def test_only_requested_metrics_are_kept_but_steps_still_classified(tmp_path):
    path = write_tracker(tmp_path / "t.jsonl", {1: {"a": 1.0, "b": 2.0}, 2: {"a": 1.5, "b": 2.5}},
                         evals={0: {"eval/accuracy": 0.5}, 2: {"eval/accuracy": 0.7}})
    trace = read_trace(path, metrics={"a", "k3"}, aliases={"k3": "b"})
    assert set(trace.series) == {"a", "b", "k3"}
    assert dict(trace.series["k3"]) == {1: 2.0, 2: 2.5}
    assert trace.train_steps == (1, 2) and trace.eval_steps == (0, 2)


def test_metrics_matching_also_are_kept_beside_the_requested_ones(tmp_path):
    """The data composition a reading reads, whatever its source's name, is kept; nothing else unrequested is."""
    from autotest.inputs.roles import group_globs

    rows = {s: {"a": 1.0, "b": 2.0, "data/repeated_prompts": 0.0, "data/source/gsm8k": 60.0 + s} for s in (1, 2)}
    path = write_tracker(tmp_path / "t.jsonl", rows)
    trace = read_trace(path, metrics={"a"}, also=group_globs("data"))
    assert set(trace.series) == {"a", "data/repeated_prompts", "data/source/gsm8k"}
    assert dict(trace.series["data/source/gsm8k"]) == {1: 61.0, 2: 62.0}
    assert set(read_trace(path, metrics={"a"}).series) == {"a"}


# The reader streams the log line by line; these pin that it reads as the whole-file text read did.

def test_line_endings_number_lines_as_text_mode_does(tmp_path):
    path = tmp_path / "t.jsonl"
    path.write_bytes(b'{"a": 1.0, "step": 1}\r\n{"a": 2.0, "step": 2}\r{"a": 3.0, "step": 3}\n')
    trace = read_trace(path)
    assert dict(trace.series["a"]) == {1: 1.0, 2: 2.0, 3: 3.0}
    assert dict(trace.step_lines) == {1: 1, 2: 2, 3: 3}


def test_truncated_line_followed_only_by_blank_lines_is_the_tail(tmp_path):
    path = tmp_path / "t.jsonl"
    path.write_text('{"a": 1.0, "step": 1}\n{"a": 2.0, "st\n\n  \n', encoding="utf-8")
    trace = read_trace(path)
    assert trace.train_steps == (1,)
    assert trace.warnings == (f"{path}:2: truncated final line dropped (the run was probably killed)",)


def test_file_errors_come_before_row_errors(tmp_path):
    path = tmp_path / "t.jsonl"
    path.write_text('{"a": 1.0}\n{"a": 2.0, "step": 2}\n{"a": \n{"a": 3.0, "step": 3}\n', encoding="utf-8")
    with pytest.raises(UsageError, match=r":3: malformed JSON"):
        read_trace(path)
    path.write_bytes(b'{"a": 1.0, "step": 1}\n{"a": \n{"a": 3.0, "step": 3}\n\xff\n')
    with pytest.raises(UsageError, match="not a UTF-8 text file"):
        read_trace(path, "xtuner")


def test_non_finite_step_is_a_usage_error(tmp_path):
    path = tmp_path / "t.jsonl"
    path.write_text('{"a": 1.0, "step": NaN}\n', encoding="utf-8")
    with pytest.raises(UsageError, match=r":1: key 'step' is not a whole number \(a number: nan\)"):
        read_trace(path)


def test_escaped_eval_key_still_marks_an_eval_step(tmp_path):
    path = tmp_path / "t.jsonl"
    path.write_text('{"a": 1.0, "\\u0065val/accuracy": 0.5, "step": 1}\n', encoding="utf-8")
    trace = read_trace(path, metrics={"a"})
    assert trace.eval_steps == (1,) and set(trace.series) == {"a"}
