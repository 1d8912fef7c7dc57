from __future__ import annotations

import json
from pathlib import Path

from autotest.inputs.baseline import load_baseline
from autotest.readers.reading import read_trace
from autotest.judge.verdict import compare
from autotest.report.publish import publish
from tests.helpers import ROOT
from tests.unit.judge.test_checks import mopd_tracker


def test_results_folder_layout_and_contents(tmp_path, monkeypatch):
    summary = tmp_path / "summary.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    monkeypatch.chdir(tmp_path)  # output must not depend on the working directory
    b = load_baseline(ROOT / "baselines" / "mopd-qwen3-vl-2b.yaml")
    tracker = mopd_tracker(tmp_path, nudge={("eval/gsm8k/acc", 10): 0.05})
    comparison = compare(b, read_trace(tracker), context={"commit": {"sha": "abc123", "repo": "/x", "dirty": False}})
    out = tmp_path / "out"
    published = publish(comparison, out)
    data = json.loads((out / "results.json").read_text())
    assert data["schema_version"] == 1 and data["status"] == "FAIL"
    failing = [r for r in data["results"] if r["status"] == "FAIL"]
    assert failing[0]["metric"] == "eval/gsm8k/acc" and failing[0]["first_breach_step"] == 10
    report = published.report_md.read_text()
    assert report.startswith("# mopd-qwen3-vl-2b: ❌ FAIL")
    assert "| eval/gsm8k/acc | 10 | 0.6871 | 0.7371 | 0.05 | absolute < 0.03 |" in report
    assert str(tracker) in report and "`abc123`" in report
    assert "## Suggested next step (inferred from the breach pattern)" in report
    assert sorted(p.name for p in (out / "plots").iterdir()) == sorted(
        Path(v).name for v in published.plots.values())
    assert len(published.plots) == 7
    assert "mopd-qwen3-vl-2b: ❌ FAIL" in summary.read_text()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out", "summary.md", "summary.md.lock", "tracker.jsonl"]


def test_a_plot_with_nothing_to_draw_never_fails_the_run(tmp_path):
    """The seed's MOPD baseline has no golden response length: its plot has no labelled artist, which
    matplotlib warns about; under filterwarnings=error that warning once crashed pytest with no report."""
    import warnings

    b = load_baseline(ROOT / "baselines" / "mopd-qwen3-vl-2b.yaml")
    tracker = mopd_tracker(tmp_path)
    rows = [json.loads(line) for line in tracker.read_text().splitlines()]
    tracker.write_text("".join(json.dumps({k: v for k, v in row.items() if k != "response/response_len/mean"}) + "\n"
                               for row in rows))  # the run did not log it either
    comparison = compare(b, read_trace(tracker))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        published = publish(comparison, tmp_path / "out")
    assert "response/response_len/mean" in published.plots and "plots not drawn" not in published.report_md.read_text()


def _not_recorded(strict: bool):
    from autotest.report.publish import NotRecorded

    def after(_folder):
        raise NotRecorded("cannot open history database postgresql://ci@db/h: connection refused",
                          url="postgresql://ci@db/h", strict=strict)
    return after


def test_a_run_the_history_could_not_record_says_so_in_results_json_and_the_report(tmp_path):
    b = load_baseline(ROOT / "baselines" / "mopd-qwen3-vl-2b.yaml")
    comparison = compare(b, read_trace(mopd_tracker(tmp_path)))
    published = publish(comparison, tmp_path / "out", with_plots=False, after_results=_not_recorded(False),
                        step_summary=False)
    data = json.loads(published.results_json.read_text())
    assert data["status"] == "PASS" and published.verdict.status == "PASS"
    assert data["history"] == {"recorded": False, "error": "cannot open history database postgresql://ci@db/h: "
                               "connection refused", "url": "postgresql://ci@db/h", "strict": False}
    assert "not recorded in the run history: cannot open history database" in published.report_md.read_text()


def test_strict_history_makes_an_unrecorded_pass_an_error_and_keeps_a_fail(tmp_path):
    b = load_baseline(ROOT / "baselines" / "mopd-qwen3-vl-2b.yaml")
    passing = compare(b, read_trace(mopd_tracker(tmp_path / "a")))
    published = publish(passing, tmp_path / "a" / "out", with_plots=False, after_results=_not_recorded(True),
                        step_summary=False)
    data = json.loads(published.results_json.read_text())
    assert data["status"] == "ERROR" and published.verdict.status == "ERROR" and data["history"]["strict"] is True
    [check] = [r for r in data["results"] if r["check_id"] == "history[recorded]"]
    assert check["status"] == "ERROR" and "--strict-history requires it" in check["message"]
    assert published.report_md.read_text().startswith("# mopd-qwen3-vl-2b: ")
    assert "ERROR" in published.report_md.read_text().splitlines()[0]
    failing = compare(b, read_trace(mopd_tracker(tmp_path / "b", nudge={("eval/gsm8k/acc", 10): 0.05})))
    published = publish(failing, tmp_path / "b" / "out", with_plots=False, after_results=_not_recorded(True),
                        step_summary=False)
    assert published.verdict.status == "FAIL"
    assert json.loads(published.results_json.read_text())["status"] == "FAIL"
