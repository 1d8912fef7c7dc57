"""The history records per-metric summaries from a run's log copy in any format, under the baseline's names."""

from __future__ import annotations

import shutil

from autotest.history.record import read_results_folder
from autotest.inputs.baseline import load_baseline
from autotest.readers.reading import read_trace
from autotest.judge.verdict import compare
from autotest.report.publish import publish
from tests.helpers import write_yaml
from tests.unit.judge.test_unclear_messages import BASELINE, write_events

ALIASED = BASELINE.replace("steps: {expected: 5, exact: true}", "steps: {expected: 5, exact: true}\nmetric_aliases: "
                           "{response/rewards/mean: train/reward, eval/accuracy: eval/accuracy}")


def test_a_tensorboard_results_folder_records_its_metrics_under_the_baseline_names(tmp_path):
    baseline = load_baseline(write_yaml(tmp_path / "b.yaml", ALIASED))
    events = write_events(tmp_path / "run", {"train/reward": {s: 0.1 * s for s in range(1, 6)},
                                             "eval/accuracy": {0: 0.4, 5: 0.6}})
    trace = read_trace(events.parent, "tensorboard", dict(baseline.metric_aliases))
    out = tmp_path / "results" / "tiny" / "run-1"
    publish(compare(baseline, trace), out, with_plots=False, step_summary=False)
    shutil.copytree(events.parent, out / "tensorboard")
    record = read_results_folder(out)
    assert record.warnings == ()
    by_metric = {m.metric: m for m in record.metrics}
    assert set(by_metric) == {"response/rewards/mean", "eval/accuracy"}
    assert by_metric["response/rewards/mean"].num_steps == 5
