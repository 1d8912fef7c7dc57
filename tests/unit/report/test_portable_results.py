"""A results folder moved to another machine still resolves its links (results.json, report.md, history)."""

from __future__ import annotations

import json
import re
import shutil

from autotest.files import recorded_path
from autotest.history.record import read_results_folder
from autotest.inputs.baseline import load_baseline
from autotest.readers.reading import read_trace
from autotest.judge.verdict import compare
from autotest.report.publish import publish
from tests.helpers import ROOT
from tests.unit.judge.test_checks import mopd_tracker


def _strings(value):
    if isinstance(value, dict):
        for v in value.values():
            yield from _strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from _strings(v)
    elif isinstance(value, str):
        yield value


def test_a_moved_results_folder_resolves_every_link(tmp_path):
    runner = tmp_path / "gpu-runner" / "results"
    exp = runner / "work" / "20261201120000" / "logs" / "exp_tracking"
    tracker = mopd_tracker(exp, nudge={("eval/gsm8k/acc", 10): 0.05})
    (runner / "logs").mkdir()
    (runner / "logs" / "stdout.log").write_text("training finished\n")
    context = {"results_dir": str(runner), "work_dir": str(runner / "work"),
               "stdout_log": str(runner / "logs" / "stdout.log"), "framework": {"path": "/srv/xtuner"}}
    publish(compare(load_baseline(ROOT / "baselines" / "mopd-qwen3-vl-2b.yaml"), read_trace(tracker),
                    context=context), runner)

    moved = tmp_path / "download" / "results"
    moved.parent.mkdir()
    shutil.move(runner, moved)
    data = json.loads((moved / "results.json").read_text())
    assert not [s for s in _strings(data) if str(runner) in s]  # nothing points at the old place
    assert data["context"]["framework"]["path"] == "/srv/xtuner"  # outside the folder: kept absolute
    assert recorded_path(moved, data["current_source"]) == moved / tracker.relative_to(runner)
    assert recorded_path(moved, data["context"]["stdout_log"]).read_text() == "training finished\n"
    assert data["plots"] and all((moved / p).is_file() for p in data["plots"].values())

    report = (moved / "report.md").read_text()
    links = re.findall(r"\]\(([^)]+)\)", report)
    assert "logs/stdout.log" in links and "work/20261201120000/logs/exp_tracking/tracker.jsonl" in links
    assert all((moved / link).exists() for link in links), links
    assert str(runner) not in report

    # the history reads the moved folder's metric log through the relative current_source
    record = read_results_folder(moved)
    assert record.status == "FAIL" and not record.warnings
    assert "eval/gsm8k/acc" in {m.metric for m in record.metrics}


def test_an_older_results_json_with_absolute_paths_is_still_read(tmp_path):
    assert recorded_path(tmp_path, "/old/runner/results/tracker.jsonl") == \
        recorded_path(tmp_path / "elsewhere", "/old/runner/results/tracker.jsonl")
    tracker = mopd_tracker(tmp_path / "old")
    folder = tmp_path / "results"
    folder.mkdir()
    (folder / "results.json").write_text(json.dumps({"schema_version": 1, "case": "mopd-qwen3-vl-2b", "status": "PASS",
                                                      "current_source": str(tracker), "results": [
        {"check_id": "eval/gsm8k/acc[points]", "metric": "eval/gsm8k/acc", "status": "PASS"}]}))
    record = read_results_folder(folder)
    assert [m.metric for m in record.metrics] == ["eval/gsm8k/acc"] and not record.warnings
