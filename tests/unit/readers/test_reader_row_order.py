"""xtuner rows are classified by their keys, whatever order a writer emits them in (issue 11)."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest

from autotest.readers.xtuner import read_xtuner

STEPS = (1, 2, 3)


def _rows(step: int) -> dict[str, dict]:
    rows = {
        "summary": {"step": step, "response/rewards/mean": 0.1 * step, "time/step": 1.0},
        "mb1": {"step": step, "train_metrics/worker_0/loss": float(step)},
        "mb2": {"step": step, "train_metrics/worker_0/loss": float(step) + 1.0},
    }
    if step in (1, 3):  # an eval row carrying its own timing, as xtuner writes it
        rows["eval"] = {"step": step, "eval/accuracy": 0.5 + 0.1 * step, "time/eval": 0.2}
    return rows


def _write(path: Path, order: tuple[str, ...]) -> Path:
    with path.open("w") as handle:
        handle.write(json.dumps({"step": 0, "eval/accuracy": 0.4}) + "\n")
        for step in STEPS:
            rows = _rows(step)
            for kind in order:
                if kind in rows:
                    handle.write(json.dumps(rows[kind]) + "\n")
    return path


@pytest.mark.parametrize("order", list(itertools.permutations(("eval", "summary", "mb1", "mb2"))))
def test_every_row_order_gives_the_same_trace(tmp_path: Path, order: tuple[str, ...]) -> None:
    trace = read_xtuner(_write(tmp_path / "tracker.jsonl", order))
    assert trace.warnings == ()
    assert trace.train_steps == STEPS
    assert trace.eval_steps == (0, 1, 3)
    # the mean of each step's own two mini-batch rows: step + 0.5, never a neighbour's
    assert dict(trace.series["train_metrics/worker_0/loss"]) == {1: 1.5, 2: 2.5, 3: 3.5}
    assert dict(trace.series["eval/accuracy"]) == pytest.approx({0: 0.4, 1: 0.6, 3: 0.8})
    assert dict(trace.series["time/eval"]) == {1: 0.2, 3: 0.2}


def test_eval_row_then_summary_then_minibatches_is_not_a_resumed_run(tmp_path: Path) -> None:
    trace = read_xtuner(_write(tmp_path / "t.jsonl", ("eval", "summary", "mb1", "mb2")))
    assert not any("logged again" in w for w in trace.warnings)
    assert trace.series["train_metrics/worker_0/loss"][3] == 3.5  # the last step's rows are kept


def test_orphan_minibatch_rows_and_backward_steps_are_warned_with_lines(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    lines = [{"step": 1, "response/rewards/mean": 0.1}, {"step": 2, "response/rewards/mean": 0.2},
             {"step": 1, "response/rewards/mean": 0.1}, {"step": 3, "train_metrics/worker_0/loss": 1.0}]
    path.write_text("".join(json.dumps(r) + "\n" for r in lines))
    trace = read_xtuner(path)
    assert any("t.jsonl:3: step 1 after step 2 (line 2)" in w for w in trace.warnings)
    assert any("mini-batch rows of steps 3 (line 4) have no step-summary row" in w for w in trace.warnings)
    assert "train_metrics/worker_0/loss" not in trace.series


def _xtuner_rows(rl_steps: int, optimizer_steps: int, first_counter: int = 1, first_step: int = 1) -> list[dict]:
    """Rows as xtuner writes them: each RL step's mini-batch rows numbered by the cumulative counter
    (``_global_train_step + 1 + i``), then its summary row (which carries the step averages too)."""
    rows, counter = [], first_counter
    for step in range(first_step, first_step + rl_steps):
        losses = [10.0 * step + i for i in range(optimizer_steps)]
        for loss in losses:
            rows.append({"train_metrics/worker_0/loss": loss, "step": counter})
            counter += 1
        rows.append({"response/rewards/mean": 0.1 * step, "time/step": 1.0,
                     "train_metrics/worker_0/step_avg_loss": sum(losses) / len(losses), "step": step})
    return rows


def _written(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


@pytest.mark.parametrize("optimizer_steps", [2, 3])
def test_minibatch_rows_numbered_by_the_cumulative_counter_belong_to_the_summary_row_that_follows(
        tmp_path: Path, optimizer_steps: int) -> None:
    trace = read_xtuner(_written(tmp_path / "t.jsonl", _xtuner_rows(4, optimizer_steps)))
    assert trace.warnings == () and trace.train_steps == (1, 2, 3, 4)
    loss = dict(trace.series["train_metrics/worker_0/loss"])
    # RL step s averages its own optimizer steps 10 s + 0 .. 10 s + k - 1, never the rows numbered s
    expected = {s: 10.0 * s + (optimizer_steps - 1) / 2 for s in (1, 2, 3, 4)}
    assert loss == pytest.approx(expected)
    # the summary row's own average agrees: the check is against xtuner's number, not ours
    assert loss == pytest.approx(dict(trace.series["train_metrics/worker_0/step_avg_loss"]))


def test_one_optimizer_step_per_rl_step_reads_as_before(tmp_path: Path) -> None:
    trace = read_xtuner(_written(tmp_path / "t.jsonl", _xtuner_rows(4, 1)))
    assert trace.warnings == ()
    assert dict(trace.series["train_metrics/worker_0/loss"]) == {1: 10.0, 2: 20.0, 3: 30.0, 4: 40.0}


def test_a_resumed_run_s_counter_restarts_at_one_and_still_lands_on_its_rl_steps(tmp_path: Path) -> None:
    trace = read_xtuner(_written(tmp_path / "t.jsonl", _xtuner_rows(3, 1, first_counter=1, first_step=21)))
    assert trace.warnings == ()
    assert dict(trace.series["train_metrics/worker_0/loss"]) == {21: 210.0, 22: 220.0, 23: 230.0}


def test_counter_rows_after_the_last_summary_row_are_orphans_named_by_line(tmp_path: Path) -> None:
    rows = _xtuner_rows(2, 2) + [{"train_metrics/worker_0/loss": 1.0, "step": 5}]
    trace = read_xtuner(_written(tmp_path / "t.jsonl", rows))
    assert any("mini-batch rows of steps 5 (line 7) have no step-summary row" in w for w in trace.warnings)
    assert dict(trace.series["train_metrics/worker_0/loss"]) == {1: 10.5, 2: 20.5}


def test_a_stopped_run_s_trailing_rows_do_not_change_how_the_rest_is_read(tmp_path: Path) -> None:
    # RL-step numbering, summary first: the last step's mini-batch rows come after it, the next step's never
    path = _write(tmp_path / "t.jsonl", ("summary", "mb1", "mb2"))
    with path.open("a") as handle:
        handle.write(json.dumps({"step": 4, "train_metrics/worker_0/loss": 9.0}) + "\n")
    trace = read_xtuner(path)
    assert dict(trace.series["train_metrics/worker_0/loss"]) == {1: 1.5, 2: 2.5, 3: 3.5}
    assert any("mini-batch rows of steps 4 (line 11) have no step-summary row" in w for w in trace.warnings)
