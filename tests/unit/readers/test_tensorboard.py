"""TensorBoard event files read into the same Trace, verdict and report numbers as a tracker.jsonl."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from autotest.errors import UsageError
from autotest.inputs.baseline import load_baseline
from autotest.readers.reading import read_trace
from autotest.readers.tensorboard import read_tensorboard
from autotest.judge.verdict import compare
from autotest.report.publish import publish
from tests.helpers import write_tracker, write_yaml

SummaryWriter = pytest.importorskip("torch.utils.tensorboard").SummaryWriter

SUMMARY = {s: {"response/rewards/mean": 0.5 + 0.01 * s, "distillation/reduced_distillation_kl": 0.33 - 0.001 * s}
           for s in range(1, 11)}
EVALS = {0: {"eval/gsm8k/score": 0.41}, 5: {"eval/gsm8k/score": 0.59}, 10: {"eval/gsm8k/score": 0.68}}


def _write_events(folder: Path, summary=SUMMARY, evals=EVALS, minibatch=True) -> Path:
    writer = SummaryWriter(log_dir=str(folder))
    for step, values in sorted(evals.items()):
        for tag, value in values.items():
            writer.add_scalar(tag, value, step)
    for step, values in sorted(summary.items()):
        if minibatch:  # two mini-batch values per step, as xtuner logs them
            writer.add_scalar("train_metrics/worker_0/loss", 0.1 * step, step)
            writer.add_scalar("train_metrics/worker_0/loss", 0.1 * step + 0.2, step)
        for tag, value in values.items():
            writer.add_scalar(tag, value, step)
    writer.close()
    return folder


def test_same_series_and_steps_as_the_jsonl(tmp_path):
    jsonl = read_trace(write_tracker(tmp_path / "tracker.jsonl", SUMMARY, EVALS))
    tb = read_trace(_write_events(tmp_path / "tb"), "tensorboard")
    assert tb.format == "tensorboard"
    assert (tb.train_steps, tb.eval_steps) == (jsonl.train_steps, jsonl.eval_steps)
    assert set(tb.metrics) == set(jsonl.metrics)
    for metric in jsonl.metrics:  # float32 in the event file: equal to 1e-6
        assert tb.get(metric).keys() == jsonl.get(metric).keys()
        assert all(math.isclose(tb.get(metric)[s], v, rel_tol=1e-6) for s, v in jsonl.get(metric).items())


def test_same_verdict_and_report_numbers(tmp_path):
    baseline_path = write_yaml(tmp_path / "b.yaml", """
golden:
  table:
    response/rewards/mean: {5: 0.55, 10: 0.60}
    eval/gsm8k/acc: {0: 0.41, 5: 0.59, 10: 0.70}
metric_aliases: {eval/gsm8k/acc: eval/gsm8k/score}
checks:
  - {metric: response/rewards/mean, method: absolute, operator: "<", threshold: 0.05, scope: points, points: [5, 10]}
  - {metric: eval/gsm8k/acc, method: absolute, operator: "<", threshold: 0.01, scope: points, points: [0, 5, 10]}
""")
    baseline = load_baseline(baseline_path)
    aliases = dict(baseline.metric_aliases)
    jsonl = compare(baseline, read_trace(write_tracker(tmp_path / "tracker.jsonl", SUMMARY, EVALS), "xtuner", aliases))
    tb = compare(baseline, read_trace(_write_events(tmp_path / "tb"), "tensorboard", aliases,
                                      metrics={c.metric for c in baseline.checks}))
    assert jsonl.verdict.status == tb.verdict.status == "FAIL"  # gsm8k 0.68 vs 0.70 at step 10
    for a, b in zip(jsonl.verdict.results, tb.verdict.results):
        assert (a.check_id, a.status, a.first_breach_step) == (b.check_id, b.status, b.first_breach_step)
        assert (a.observed is None) == (b.observed is None)
        if a.observed is not None:
            assert math.isclose(a.observed, b.observed, rel_tol=1e-5, abs_tol=1e-7)
    out_j, out_t = publish(jsonl, tmp_path / "rj", with_plots=False), publish(tb, tmp_path / "rt", with_plots=False)
    rows = [json.loads((tmp_path / d / "results.json").read_text())["results"] for d in ("rj", "rt")]
    assert [r["status"] for r in rows[0]] == [r["status"] for r in rows[1]]
    assert out_j is not None and out_t is not None


def test_resumed_run_later_event_wins_and_is_said(tmp_path):
    _write_events(tmp_path / "tb" / "a", {s: SUMMARY[s] for s in range(1, 6)}, {})
    _write_events(tmp_path / "tb" / "b", {5: {"response/rewards/mean": 0.55001}, 6: SUMMARY[6]}, {})
    trace = read_tensorboard(tmp_path / "tb")
    assert trace.get("response/rewards/mean")[5] == pytest.approx(0.55001)
    assert trace.train_steps == (1, 2, 3, 4, 5, 6)
    assert any("1 event(s) logged again (resumed run?): response/rewards/mean at step 5" in w for w in trace.warnings)


def test_resumed_run_whose_later_event_differs_is_an_error_naming_both_files(tmp_path):
    first = _write_events(tmp_path / "tb" / "a", {s: SUMMARY[s] for s in range(1, 6)}, {})
    _write_events(tmp_path / "tb" / "b", {5: {"response/rewards/mean": 0.0}, 6: SUMMARY[6]}, {})
    with pytest.raises(UsageError, match=r"/tb/b/events[^ ]*: response/rewards/mean at step 5 logged again with a "
                                         rf"different value: 0 there, 0.55 earlier in {first}/events"):
        read_tensorboard(tmp_path / "tb")


@pytest.mark.parametrize("make, message", [
    (lambda p: p, "no such file or directory"),
    (lambda p: (p.mkdir(), p)[1], "no TensorBoard event files"),
    (lambda p: (p.write_text("x"), p)[1], "not a TensorBoard event file"),
])
def test_bad_paths_are_one_line(tmp_path, make, message):
    with pytest.raises(UsageError, match=message) as info:
        read_tensorboard(make(tmp_path / "tb"))
    assert "\n" not in str(info.value)
