from __future__ import annotations

import math
import re
from pathlib import Path
from types import MappingProxyType

import pytest

from autotest.inputs.baseline import load_baseline
from autotest.inputs.baseline_model import Baseline, CheckSpec, StepPolicy
from autotest.judge.checks import (
    evaluate_check,
    point_error,
)
from autotest.judge.model import ERROR, FAIL, INFO, PASS, decide_status
from autotest.readers.reading import read_trace
from autotest.judge.structural import shape_results as structural_checks
from autotest.judge.trace import Trace
from autotest.judge.verdict import compare, golden_trace
from tests.helpers import ROOT, write_tracker


def trace(series: dict[str, dict[int, float]], train=None, evals=()) -> Trace:
    steps = sorted({s for v in series.values() for s in v}) if train is None else train
    return Trace("cur.jsonl", MappingProxyType(series), tuple(steps), tuple(evals))


def baseline(*checks: CheckSpec, table=True, **kw) -> Baseline:
    return Baseline(name="b", path=Path("b.yaml"), checks=checks, golden_table={} if table else None, **kw)


def check(golden: dict, current: dict, table: bool = True, **spec) -> object:
    spec.setdefault("metric", "m")
    spec.setdefault("method", "absolute")
    spec.setdefault("operator", "<")
    spec.setdefault("threshold", 0.1)
    c = CheckSpec(**spec)
    return evaluate_check(c, baseline(c), trace({"m": golden}), trace({"m": current}), table)


@pytest.mark.parametrize("method,cur,base,expected", [
    ("absolute", 1.2, 1.0, 0.2), ("absolute", 0.8, 1.0, 0.2),
    ("relative", 1.1, 1.0, 0.1), ("relative", -0.9, -1.0, 0.1),
    ("slowdown", 12.0, 10.0, 2.0), ("slowdown", 8.0, 10.0, 0.0),
    ("value", 3.0, None, 3.0),
])
def test_methods(method, cur, base, expected):
    assert point_error(method, cur, base, 1e-12) == pytest.approx(expected)


def test_relative_with_zero_baseline_uses_declared_floor():
    assert point_error("relative", 1e-6, 0.0, 1e-3) == pytest.approx(1e-3)
    r = check({1: 0.0}, {1: 0.0}, method="relative", threshold=0.1)
    assert r.status == PASS and r.parameters["relative_floor"] == 1e-12
    r = check({1: 0.0}, {1: 1e-9}, method="relative", threshold=0.1, relative_floor=1e-6)
    assert r.status == PASS and r.observed == pytest.approx(1e-3)


@pytest.mark.parametrize("operator,error,ok", [
    ("<", 0.1, False), ("<", 0.05, True), ("<=", 0.1, True), ("<=", 0.11, False),
    (">", 0.1, False), (">", 0.2, True), (">=", 0.1, True), (">=", 0.09, False),
])
def test_operators(operator, error, ok):
    r = check({1: 0.0}, {1: error}, operator=operator, threshold=0.1)
    assert r.status == (PASS if ok else FAIL)


def test_stepwise_reports_first_and_worst_by_real_step():
    golden = {1: 0.0, 3: 0.0, 5: 0.0, 7: 0.0}
    r = check(golden, {1: 0.0, 3: 0.5, 5: 0.9, 7: 0.2}, threshold=0.3)
    assert r.status == FAIL
    assert (r.first_breach_step, r.worst_step, r.observed) == (3, 5, 0.9)
    assert "m at step 3: current 0.5 vs golden 0, absolute error 0.5 not < 0.3" in r.message
    assert "worst step 5" in r.message and "2/4 steps breach" in r.message


def test_stepwise_missing_current_steps_is_error_not_pass():
    r = check({1: 0.0, 2: 0.0, 3: 0.0}, {1: 0.0, 2: 0.0})
    assert r.status == ERROR and "lacks steps 3" in r.message


def test_percentile_is_declared_and_reported():
    golden = {s: 0.0 for s in range(1, 11)}
    current = {s: (0.5 if s == 10 else 0.01) for s in range(1, 11)}
    r = check(golden, current, scope="percentile", percentile=80, threshold=0.1)
    assert r.status == PASS and r.parameters == {"percentile": 80, "interpolation": "linear"}
    r = check(golden, current, scope="percentile", percentile=95, threshold=0.1)
    assert r.status == FAIL and "p95 of per-step absolute error over 10 steps" in r.message


def test_final_scope_compares_last_point_at_the_same_step():
    r = check({45: 0.9007}, {0: 0.2, 15: 0.5, 30: 0.8, 45: 0.88}, scope="final", threshold=0.05)
    assert r.status == PASS and r.points[0].step == 45
    r = check({45: 0.9007}, {0: 0.2, 45: 0.80}, scope="final", threshold=0.05)
    assert r.status == FAIL and r.first_breach_step == 45
    r = check({45: 0.9007}, {0: 0.2, 15: 0.5, 30: 0.8}, scope="final", threshold=0.05)
    assert r.status == ERROR and "different steps (current 30, baseline 45)" in r.message


def test_points_scope_checks_named_steps_only():
    golden = {0: 0.4, 5: 0.6, 10: 0.7}
    r = check(golden, {0: 0.41, 3: 9.0, 5: 0.59, 10: 0.71}, scope="points", points=[0, 5, 10], threshold=0.03)
    assert r.status == PASS
    r = check(golden, {0: 0.41, 5: 0.65, 10: 0.71}, scope="points", points=[0, 5, 10], threshold=0.03)
    assert r.status == FAIL and r.first_breach_step == 5
    r = check(golden, {0: 0.41, 5: 0.6}, scope="points", points=[0, 5, 10], threshold=0.03)
    assert r.status == ERROR and "no value at steps 10" in r.message
    r = check({0: 0.4}, {0: 0.4, 5: 0.6}, scope="points", points=[0, 5], threshold=0.03)
    assert r.status == ERROR and r.message.startswith("uncalibrated gate: m has no golden value at steps 5; run")
    r = check({0: 0.4}, {0: 0.4, 5: 0.6}, scope="points", points=[0, 5], threshold=0.03, severity="reference")
    assert r.status == INFO and "no golden value at steps 5 (uncalibrated)" in r.message


def test_window_mean():
    golden = {s: 1.0 for s in range(1, 11)}
    current = {s: 1.0 + (0.3 if s % 2 else -0.3) for s in range(1, 11)}
    r = check(golden, current, scope="window", window=[1, 10], threshold=0.05)
    assert r.status == PASS and r.observed == pytest.approx(0.0, abs=1e-12)
    r = check(golden, {s: 1.2 for s in range(1, 11)}, scope="window", window=[3, 6], threshold=0.05)
    assert r.status == FAIL and "mean over steps 3-6" in r.message


def test_value_method_needs_no_golden():
    r = check({}, {1: 1e-9, 2: 5e-3}, method="value", operator="<=", threshold=1e-3)
    assert r.status == FAIL and r.first_breach_step == 2


def test_reference_severity_never_fails():
    r = check({1: 10.0}, {1: 20.0}, method="relative", threshold=0.1, severity="reference")
    assert r.status == INFO and r.message.startswith("reference only, outside threshold")
    assert decide_status([r]) == PASS


def test_nan_in_current_fails_and_nan_in_baseline_errors():
    r = check({1: 0.0, 2: 0.0}, {1: 0.0, 2: math.nan})
    assert r.status == FAIL and r.first_breach_step == 2
    r = check({1: 0.0, 2: math.nan}, {1: 0.0, 2: 0.0})
    assert r.status == ERROR and "baseline is broken" in r.message
    r = check({1: 0.0, 2: 0.0}, {1: 0.0, 2: math.inf}, scope="percentile", percentile=80)
    assert r.status == FAIL and "non-finite current value at step 2" in r.message


def test_missing_metric_in_current_or_baseline():
    c = CheckSpec("m", "absolute", "<", 0.1)
    b = baseline(c)
    assert evaluate_check(c, b, trace({"m": {1: 0.0}}), trace({"x": {1: 0.0}}), True).status == ERROR
    r = evaluate_check(c, b, trace({"x": {1: 0.0}}), trace({"m": {1: 0.0}}), True)
    assert r.status == ERROR and r.message.startswith("uncalibrated gate: ") and "rl-autotest calibrate" in r.message
    r = evaluate_check(c, b, trace({"x": {1: 0.0}}), trace({"m": {1: 0.0}}), False)
    assert r.status == ERROR and "missing from the baseline tracker" in r.message


def test_step_count_exact_and_at_least():
    cur = trace({"m": {s: 0.0 for s in range(1, 46)}})
    exact = baseline(steps=StepPolicy(45, True))
    assert structural_checks(exact, cur, None)[0].status == PASS
    short = trace({"m": {s: 0.0 for s in range(1, 31)}})
    r = structural_checks(exact, short, None)[0]
    assert r.status == ERROR and "incomplete: 30 training steps (last step 30), expected 45" in r.message
    longer = trace({"m": {s: 0.0 for s in range(1, 47)}})
    assert structural_checks(exact, longer, None)[0].status == FAIL
    assert structural_checks(baseline(steps=StepPolicy(45, False)), longer, None)[0].status == PASS


def test_calibrated_range_and_uncalibrated_tail():
    b = baseline(calibrated_range=(0, 25))
    cur = trace({"m": {s: 0.0 for s in range(1, 51)}}, evals=(0, 25, 50))
    results = structural_checks(b, cur, None)
    assert [r.status for r in results] == [PASS, INFO]
    assert "steps 26-50 are beyond the calibrated range 0-25" in results[1].message
    short = trace({"m": {s: 0.0 for s in range(1, 21)}})
    assert structural_checks(b, short, None)[0].status == ERROR


def test_wall_time():
    b = baseline(wall_time_max_s=2400.0)
    assert structural_checks(b, trace({}), 100.0)[0].status == PASS
    assert structural_checks(b, trace({}), 2500.0)[0].status == FAIL
    assert structural_checks(b, trace({}), None)[0].status == INFO


def test_verdict_rules():
    from autotest.judge.model import CheckResult

    def r(status, severity="gate"):
        return CheckResult("x", status, "", severity=severity)

    assert decide_status([r(PASS), r(INFO)]) == PASS
    assert decide_status([r(PASS), r(ERROR)]) == ERROR
    assert decide_status([r(ERROR), r(FAIL)]) == FAIL
    assert decide_status([r(FAIL, "reference")]) == PASS


# --- the seed's MOPD golden table end to end ----------------------------------------------------

def mopd_tracker(tmp_path: Path, nudge: dict[tuple[str, int], float] | None = None, drop: str | None = None,
                 last_step: int = 25) -> Path:
    b = load_baseline(ROOT / "baselines" / "mopd-qwen3-vl-2b.yaml")
    summary, evals = {}, {}
    for step in range(1, last_step + 1):
        summary[step] = {"response/response_len/mean": 300.0, "time/step": 35.0}
    for metric, series in b.golden_table.items():
        for step, value in series.items():
            value += (nudge or {}).get((metric, step), 0.0)
            if metric == drop:
                continue
            (evals if metric.startswith("eval/") else summary).setdefault(step, {})[metric] = value
    return write_tracker(tmp_path / "tracker.jsonl", summary, evals)


def test_mopd_golden_table_tracker_passes(tmp_path):
    b = load_baseline(ROOT / "baselines" / "mopd-qwen3-vl-2b.yaml")
    verdict = compare(b, read_trace(mopd_tracker(tmp_path))).verdict
    assert verdict.status == PASS
    uncalibrated = {r.metric for r in verdict.results if r.status == INFO}
    assert uncalibrated == {"response/response_len/mean", "time/step"}


def test_mopd_one_eval_point_past_threshold_fails_naming_everything(tmp_path):
    b = load_baseline(ROOT / "baselines" / "mopd-qwen3-vl-2b.yaml")
    path = mopd_tracker(tmp_path, nudge={("eval/gsm8k/acc", 10): 0.031})
    verdict = compare(b, read_trace(path)).verdict
    assert verdict.status == FAIL
    failed = [r for r in verdict.results if r.status == FAIL]
    assert len(failed) == 1
    assert failed[0].message.startswith(
        "gsm8k_acc (eval/gsm8k/acc) at step 10: current 0.7181 vs golden 0.6871, absolute error 0.031 not < 0.03")


def test_mopd_missing_checked_metric_is_error(tmp_path):
    b = load_baseline(ROOT / "baselines" / "mopd-qwen3-vl-2b.yaml")
    verdict = compare(b, read_trace(mopd_tracker(tmp_path, drop="eval/geo3k/acc"))).verdict
    assert verdict.status == ERROR
    errors = [r for r in verdict.results if r.status == ERROR]
    assert [(r.check_id, r.metric) for r in errors] == [("metrics[names]", None), (errors[1].check_id, "eval/geo3k/acc")]
    assert re.match(r"1 of \d+ checked metrics are not in the log \(.*\): eval/geo3k/acc; ", errors[0].message)


def test_mopd_fifty_step_run_checked_on_calibrated_range(tmp_path):
    b = load_baseline(ROOT / "baselines" / "mopd-qwen3-vl-2b.yaml")
    verdict = compare(b, read_trace(mopd_tracker(tmp_path, last_step=50))).verdict
    assert verdict.status == PASS
    assert any(r.check_id == "steps[uncalibrated]" and "26-50" in r.message for r in verdict.results)


def test_grpo_baseline_from_reference_tracker(tmp_path, monkeypatch):
    share = tmp_path / "share"
    summary = {s: {"response/rewards/mean": 0.5 + s / 100, "mismatch/mismatch_k3_kl": 1e-6,
                   "response/response_len/mean": 200.0, "time/step": 40.0} for s in range(1, 46)}
    write_tracker(share / "qwen3-rl-lmdeploy" / "tracker.jsonl", summary, {45: {"eval/accuracy": 0.9007}})
    monkeypatch.setenv("CI_SHARE_BASELINE", str(share))
    b = load_baseline(ROOT / "baselines" / "grpo-gsm8k-qwen3-8b-lmdeploy.yaml")
    evals = {0: {"eval/accuracy": 0.3}, 15: {"eval/accuracy": 0.6}, 30: {"eval/accuracy": 0.8},
             45: {"eval/accuracy": 0.89}}
    cur = read_trace(write_tracker(tmp_path / "cur.jsonl", summary, evals))
    comparison = compare(b, cur, wall_time_s=1800)
    assert comparison.verdict.status == PASS, [r.message for r in comparison.verdict.results]
    assert golden_trace(b).source.endswith("qwen3-rl-lmdeploy/tracker.jsonl")
    bad = {s: {**v, "mismatch/mismatch_k3_kl": 1e-6 if s < 20 else 3e-3} for s, v in summary.items()}
    verdict = compare(b, read_trace(write_tracker(tmp_path / "bad.jsonl", bad, evals)), wall_time_s=1800).verdict
    assert verdict.status == FAIL
    assert verdict.triage[0].rule == "mismatch" and "step 20" in verdict.triage[0].evidence


def test_the_verdict_lists_structural_results_first():
    c = CheckSpec("m", "absolute", "<", 0.1)
    b = baseline(c, steps=StepPolicy(2, True))
    results = compare(b, trace({"m": {1: 0.0, 2: 0.0}}), golden=trace({"m": {1: 0.0, 2: 0.0}})).verdict.results
    assert [r.check_id for r in results] == ["steps[count]", "m[stepwise]"]
