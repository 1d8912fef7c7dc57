"""Shadow gates: judged like gates, recorded with their own status, never deciding the run (autotest.judge.shadow)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from autotest.inputs.baseline import load_baseline
from autotest.inputs.baseline_model import in_shadow
from autotest.judge.power import gate_power
from autotest.judge.verdict import compare
from autotest.readers.reading import read_trace
from tests.helpers import run_cli, write_tracker, write_yaml

REWARDS, KL = "response/rewards/mean", "mismatch/mismatch_k3_kl"


def shadow_baseline(folder: Path, kl_severity: str = "shadow", rewards_severity: str = "gate") -> Path:
    """Ten steps of rewards and kl; the kl check's severity as asked (a gate-in-waiting by default)."""
    rewards = ", ".join(f"{s}: {0.1 * s:.2f}" for s in range(1, 11))
    kl = ", ".join(f"{s}: 0.001" for s in range(1, 11))
    return write_yaml(folder / "shadowed.yaml", f"""\
schema_version: 1
name: shadowed
golden:
  table:
    {REWARDS}: {{{rewards}}}
    {KL}: {{{kl}}}
provenance: {{runs: 5}}
checks:
  - {{metric: {REWARDS}, method: absolute, operator: "<", threshold: 0.05, severity: {rewards_severity},
     measured_max_deviation: 0.02}}
  - {{metric: {KL}, method: absolute, operator: "<", threshold: 0.002, scope: final, severity: {kl_severity},
     measured_max_deviation: 0.001}}
""")


def tracker(folder: Path, kl: float = 0.001, rewards_shift: float = 0.0) -> Path:
    return write_tracker(folder / "tracker.jsonl",
                         {s: {REWARDS: 0.1 * s + rewards_shift, KL: kl} for s in range(1, 11)})


def judged(tmp_path: Path, **kwargs):
    baseline = load_baseline(shadow_baseline(tmp_path))
    return compare(baseline, read_trace(tracker(tmp_path, **kwargs), "auto", {})).verdict


def test_a_run_where_only_a_shadow_gate_breaches_passes_and_keeps_the_shadow_fail(tmp_path: Path) -> None:
    verdict = judged(tmp_path, kl=0.01)
    shadow = next(r for r in verdict.results if r.metric == KL)
    assert verdict.status == "PASS"
    assert (shadow.status, shadow.severity, shadow.is_gate) == ("FAIL", "shadow", False)
    assert not verdict.triage  # a shadow failure is never a cause


def test_a_shadow_gate_is_judged_exactly_as_a_gate(tmp_path: Path) -> None:
    as_shadow = next(r for r in judged(tmp_path, kl=0.01).results if r.metric == KL)
    gate = load_baseline(shadow_baseline(tmp_path / "g", kl_severity="gate"))
    as_gate = next(r for r in compare(gate, read_trace(tracker(tmp_path / "g", kl=0.01), "auto", {})).verdict.results
                   if r.metric == KL)
    assert (as_shadow.status, as_shadow.observed, as_shadow.threshold, as_shadow.message) == \
        (as_gate.status, as_gate.observed, as_gate.threshold, as_gate.message)


def test_a_gate_failure_still_fails_and_triage_never_picks_the_shadow(tmp_path: Path) -> None:
    verdict = judged(tmp_path, kl=0.01, rewards_shift=0.2)
    assert verdict.status == "FAIL"
    assert [r.check_id for r in verdict.results if r.is_gate and r.status == "FAIL"] == [f"{REWARDS}[stepwise]"]
    assert all(KL not in f.evidence for f in verdict.triage if f.primary)


def test_a_missing_shadow_metric_is_its_own_error_never_the_runs(tmp_path: Path) -> None:
    baseline = load_baseline(shadow_baseline(tmp_path))
    trace = read_trace(write_tracker(tmp_path / "t.jsonl", {s: {REWARDS: 0.1 * s} for s in range(1, 11)}),
                       "auto", {})
    verdict = compare(baseline, trace).verdict
    assert verdict.status == "PASS"
    assert next(r for r in verdict.results if r.metric == KL).status == "ERROR"


def test_power_treats_a_shadow_gate_as_a_gate(tmp_path: Path) -> None:
    shadow = load_baseline(shadow_baseline(tmp_path))
    gate = load_baseline(shadow_baseline(tmp_path / "g", kl_severity="gate"))
    reference = load_baseline(shadow_baseline(tmp_path / "r", kl_severity="reference"))
    found = [gate_power(b, next(c for c in b.checks if c.metric == KL)) for b in (shadow, gate, reference)]
    assert found[0] is not None and found[0] == found[1] and found[2] is None


def test_a_case_in_shadow_makes_every_gate_shadow(tmp_path: Path) -> None:
    baseline = in_shadow(load_baseline(shadow_baseline(tmp_path, kl_severity="reference")))
    assert [c.severity for c in baseline.checks] == ["shadow", "reference"]
    verdict = compare(baseline, read_trace(tracker(tmp_path, rewards_shift=0.2), "auto", {})).verdict
    assert verdict.status == "PASS"


def test_compare_says_would_have_failed_in_the_cli_report_and_results_json(tmp_path: Path,
                                                                         capsys: pytest.CaptureFixture) -> None:
    out = tmp_path / "out"
    code = run_cli("compare", "--baseline", str(shadow_baseline(tmp_path)), "--current",
                   str(tracker(tmp_path, kl=0.01)), "--out", str(out), "--no-plots", "--no-history")
    printed = capsys.readouterr().out
    assert code == 0
    assert f"shadow: {KL}[final] would have failed (" in printed
    assert "FAIL " not in printed and "\nshadowed: PASS" in printed
    report = (out / "report.md").read_text()
    assert f"- shadow: {KL}[final] would have failed (" in report and "| shadow |" in report
    results = json.loads((out / "results.json").read_text())
    assert results["status"] == "PASS"
    assert [(r["status"], r["severity"]) for r in results["results"] if r.get("metric") == KL] == [("FAIL", "shadow")]


def test_a_case_file_takes_shadow_true(tmp_path: Path) -> None:
    from autotest.inputs.case import load_case
    from tests.helpers import DATA

    text = (DATA / "bad_cases" / "bad_shadow.yaml").read_text().replace("bad_shadow", "shadow_case")
    case = load_case(write_yaml(tmp_path / "shadow_case.yaml", text.replace('shadow: "yes"', "shadow: true")))
    assert case.shadow is True
    assert load_case(write_yaml(tmp_path / "shadow_case.yaml", text.replace('shadow: "yes"\n', ""))).shadow is False


def test_replicates_judge_a_candidate_in_shadow_on_their_mean_with_its_pooled_threshold_scaled() -> None:
    from dataclasses import replace

    from autotest.inputs.baseline_model import in_shadow as shadowed
    from autotest.judge.replicate_mean import judge_replicates
    from autotest.judge.shadow import ShadowCandidate
    from tests.unit.judge.test_replicate_mean import POOLED, _baseline, _member

    # the mean is 2.5 noise units off: the blocking 3.0 x 0.764 fails; the looser candidate (5.0 x 0.764) passes
    candidate = ShadowCandidate("candidate@0000beef", shadowed(_baseline(replace(POOLED, threshold=5.0))))
    verdict = judge_replicates(_baseline(POOLED), None, [_member(1, 0, 0.024), _member(2, 5, 0.026)], case="c",
                               candidate=candidate).verdict
    judged = next(r for r in verdict.results if r.check_id == f"candidate@0000beef:{POOLED.check_id}")
    assert verdict.status == "FAIL" and (judged.status, judged.severity) == ("PASS", "shadow")
    assert judged.threshold == pytest.approx(5.0 * verdict.pooled_threshold_scale)


def test_the_step_summary_says_what_a_shadow_gate_would_have_done(tmp_path: Path) -> None:
    from autotest.report.markdown import render_step_summary

    summary = render_step_summary(judged(tmp_path, kl=0.01))
    assert "PASS" in summary.splitlines()[0]
    assert f"- shadow: {KL}[final] would have failed (" in summary
