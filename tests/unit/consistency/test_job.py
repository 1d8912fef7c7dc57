"""The consistency dump job without re-runs: the wrapper a framework case gets, and bad requests."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from autotest.consistency.job import REQUEST_FILE, _summary, load_request, run_consistency_job
from autotest.consistency.logprob_compare import compare_logprobs
from autotest.consistency.logprob_records import LogprobRecord
from autotest.consistency.logprob_verdict import with_logprob_finding
from autotest.consistency.verdict import RootCauseReport, Step
from autotest.errors import UsageError

ROOT = Path(__file__).resolve().parents[3]


def test_framework_case_generates_the_wrapper_and_claims_nothing(tmp_path, monkeypatch):
    """A GPU case here: wrapper and configs are written, collection is reported as not run."""
    results = tmp_path / "results"
    results.mkdir()
    (results / "tracker.jsonl").write_text(json.dumps({"mismatch/mismatch_k3_kl": 3e-3, "response/rewards/mean": 0.5,
                                                      "step": 1}) + "\n")
    (results / REQUEST_FILE).write_text(json.dumps({
        "case": "grpo-gsm8k-qwen3-8b-lmdeploy",
        "case_file": str(ROOT / "autotest/cases/grpo-gsm8k-qwen3-8b-lmdeploy.yaml"),
        "breaches": [{"metric": "mismatch/mismatch_k3_kl", "first_breach_step": 1}],
        "tracker": str(results / "tracker.jsonl"), "results_dir": str(results)}))
    for name in ("CI_SHARE_MODEL", "CI_SHARE_DATA"):
        monkeypatch.setenv(name, str(tmp_path / "share"))
    monkeypatch.setenv("XTUNER_ROOT", str(tmp_path))
    outcome = run_consistency_job(results)
    assert not outcome.executed and outcome.verdict == "cannot_conclude" and outcome.not_collected
    assert outcome.summary.startswith("not collected: the case cannot run here: needs 8 GPUs")
    assert outcome.manual_steps == results / "consistency" / "how_to_collect.md"
    report = json.loads(outcome.report_json.read_text())
    assert report["root_cause"] is None
    assert report["context"]["not_executed"][0].startswith("the case cannot run here")
    # no launch option: the wrapper re-runs the case's own command with collection in the environment only
    wrapper = (results / "consistency" / "statistics" / "diagnostic_wrapper.sh").read_text()
    assert "export RL_AUTOTEST_COLLECT=" in wrapper and "autotest/attach" in wrapper
    assert "--diagnostic-config" not in wrapper
    assert not any(s["status"] == "verified" and "collection" in s["step"] for s in report["steps"])
    assert (results / "consistency" / "statistics" / "diagnostic_wrapper.sh").exists()
    assert (results / "consistency" / "statistics" / "diagnostic_config.json").exists()


def test_missing_or_bad_request_is_one_line(tmp_path):
    with pytest.raises(UsageError, match=r"no consistency request here"):
        load_request(tmp_path)
    (tmp_path / REQUEST_FILE).write_text('{"case": "x",\n oops}')
    with pytest.raises(UsageError, match=r"consistency_request.json:2: malformed JSON"):
        load_request(tmp_path)
    (tmp_path / REQUEST_FILE).write_text('{"case": "x"}')
    with pytest.raises(UsageError, match=r"key 'case_file' is missing"):
        load_request(tmp_path)


def _summary_of(verdict: str, kinds: dict[str, tuple[float, ...]]) -> str:
    cause = {"bucket": "parameter_sync_mismatch", "module": "model.layers.1.mlp", "localisation": "model.layers.1.mlp"}
    report = RootCauseReport(verdict, "high", cause if verdict == "root_cause_found" else None, None, (), (), None,
                             (), (), (), (), (), {})
    records = {k: [LogprobRecord(k, 2, 0, "r0", (4, 5), (7, 8), v, "fp32", f"{k}.jsonl:1")] for k, v in kinds.items()}
    report = with_logprob_finding(report, compare_logprobs(records), Step("three-way", "executed", ""))
    return _summary(report, [], ["mismatch/mismatch_k3_kl"])


def test_summary_names_each_path_and_never_says_no_divergence_under_a_breach():
    base, hot = (-0.5, -1.0), (-0.7, -0.8)
    module = _summary_of("root_cause_found", {"recorded": base, "recomputed": base, "trainer": hot})
    assert module.startswith("root cause (high confidence): parameter_sync_mismatch")
    assert "the sampling path is clear" in module
    partial = _summary_of("root_cause_found", {"recorded": base, "recomputed": base})  # no trainer records
    assert "recomputed vs trainer not compared (trainer log-probs not provided)" in partial
    sampling = _summary_of("no_divergence", {"recorded": hot, "recomputed": base, "trainer": base})
    assert sampling.startswith("sampling-path divergence (high confidence)")
    aligned = _summary_of("no_divergence", {"recorded": base, "recomputed": base, "trainer": base})
    assert aligned.startswith("the window does not reproduce the breach")
    assert not any("no divergence" in s for s in (module, partial, sampling, aligned))


def test_the_cases_layout_reaches_the_analysis(tmp_path, monkeypatch):
    """``consistency.layout`` in the case is how the job's analysis reassembles each side's per-rank dumps."""
    case_file = tmp_path / "grpo-gsm8k-qwen3-8b-lmdeploy.yaml"
    text = (ROOT / "autotest/cases/grpo-gsm8k-qwen3-8b-lmdeploy.yaml").read_text()
    case_file.write_text(text.replace("consistency:\n", "consistency:\n  layout: {rollout: 'tp=2', train: 'pp=2'}\n", 1))
    results = tmp_path / "results"
    results.mkdir()
    (results / "tracker.jsonl").write_text(json.dumps({"mismatch/mismatch_k3_kl": 3e-3, "step": 1}) + "\n")
    (results / REQUEST_FILE).write_text(json.dumps({
        "case": "grpo-gsm8k-qwen3-8b-lmdeploy", "case_file": str(case_file),
        "breaches": [{"metric": "mismatch/mismatch_k3_kl", "first_breach_step": 1}],
        "tracker": str(results / "tracker.jsonl"), "results_dir": str(results)}))
    for name in ("CI_SHARE_MODEL", "CI_SHARE_DATA"):
        monkeypatch.setenv(name, str(tmp_path / "share"))
    monkeypatch.setenv("XTUNER_ROOT", str(tmp_path))
    seen = {}
    import autotest.consistency.job as job

    real = job.analyze_dumps

    def spy(*args, **kwargs):
        seen.update(kwargs["layouts"])
        return real(*args, **kwargs)

    monkeypatch.setattr(job, "analyze_dumps", spy)
    outcome = run_consistency_job(results)
    assert {side: layout.text() for side, layout in seen.items()} == {"rollout": "tp=2", "train": "pp=2"}
    assert json.loads(outcome.report_json.read_text())["context"]["layout"] == [["rollout", "tp=2"], ["train", "pp=2"]]
