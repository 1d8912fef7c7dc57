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
