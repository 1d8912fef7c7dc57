from __future__ import annotations

import json
import multiprocessing
from pathlib import Path

from autotest.inputs.baseline import load_baseline
from autotest.judge.readers import read_trace
from autotest.judge.verdict import compare
from autotest.report.markdown import append_step_summary
from autotest.report.publish import publish
from tests.test_checks import mopd_tracker

ROOT = Path(__file__).resolve().parents[1]


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


def _append(path: str, index: int) -> None:
    for j in range(20):
        append_step_summary(f"worker {index} line {j}\n" * 3, path)


def test_step_summary_appends_are_safe_across_processes(tmp_path):
    path = str(tmp_path / "summary.md")
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_append, args=(path, i)) for i in range(3)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
    lines = Path(path).read_text().splitlines()
    assert len(lines) == 3 * 20 * 3
    # each append of three lines stays contiguous
    for k in range(0, len(lines), 3):
        assert lines[k] == lines[k + 1] == lines[k + 2]


def test_reduced_checks_show_their_statistic_beside_the_worst_step():
    from autotest.judge.model import Verdict
    from autotest.report.markdown import render_markdown
    from tests.test_checks import check

    golden = {s: 0.0 for s in range(1, 11)}
    r = check(golden, {s: (0.5 if s == 10 else 0.01) for s in range(1, 11)}, scope="percentile", percentile=80)
    text = render_markdown(Verdict(r.status, "c", (r,)))
    assert "| m[percentile] | ✅ PASS | worst 10 | 0 | 0.5 | p80 = 0.01 | absolute < 0.1 | gate |" in text
