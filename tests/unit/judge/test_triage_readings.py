"""Readings for hypotheses the role rows cannot tell apart (issue 30): a metric logged in other units and a run
whose shape changed, each measured on the traces and named by its own rule, with the report's hypothesis table."""

from __future__ import annotations

from pathlib import Path
from types import MappingProxyType

import yaml

from autotest.inputs.baseline import load_baseline
from autotest.judge.structural import RunFacts
from autotest.judge.trace import Trace
from autotest.judge.verdict import compare, judge
from autotest.report.markdown import render_markdown

STEPS = range(1, 31)
EVALS = (0, 10, 20, 30)
NAMES = {"reward": "response/rewards/mean", "length": "response/response_len/mean", "entropy": "entropy/mean",
         "eval": "eval/accuracy"}
THRESHOLDS = {"reward": ("absolute", 0.05), "length": ("relative", 0.1), "entropy": ("absolute", 0.1),
              "eval": ("absolute", 0.05)}


def _golden() -> dict[str, dict[int, float]]:
    series = {"reward": {s: 0.01 + 0.02 * s for s in STEPS}, "length": {s: 40.0 - 0.5 * s for s in STEPS},
              "entropy": {s: 2.0 - 0.03 * s for s in STEPS}, "eval": {s: 0.2 + 0.01 * s for s in EVALS}}
    return {NAMES[k]: v for k, v in series.items()}


def _baseline(tmp_path: Path, steps: int | None = None, extra_checks: tuple[dict, ...] = ()):
    checks = [{"metric": NAMES[k], "method": m, "operator": "<", "threshold": t} for k, (m, t) in THRESHOLDS.items()]
    checks += list(extra_checks)
    extra = {"steps": {"expected": steps, "exact": True}} if steps else {}
    path = tmp_path / "b.yaml"
    path.write_text(yaml.safe_dump({"golden": {"table": _golden()}, "checks": checks, **extra}))
    return load_baseline(path)


def _trace(change=None, last: int = 30, warnings: tuple[str, ...] = ()) -> Trace:
    current = {m: {s: v for s, v in series.items() if s <= last} for m, series in _golden().items()}
    if change:
        change({k: current[NAMES[k]] for k in NAMES})
    return Trace("current", MappingProxyType(current), train_steps=tuple(s for s in STEPS if s <= last),
                 eval_steps=tuple(s for s in EVALS if s <= last), warnings=warnings)


def _noisy_times(factor: float):
    def change(c):
        for i, s in enumerate(sorted(c["length"])):
            c["length"][s] *= factor * (1 + (0.02 if i % 2 else -0.02))  # seed noise around the factor
    return change


def test_a_length_logged_twice_with_nothing_else_moved_is_logging(tmp_path: Path):
    verdict = compare(_baseline(tmp_path), _trace(_noisy_times(2.0))).verdict
    assert verdict.status == "FAIL"
    primary = verdict.triage[0]
    assert primary.rule == "logging-units" and not primary.uncertain_with
    # no per-step noise in this baseline: the line says what was tested of the others (their gates), no more
    assert primary.suggestion.startswith("logging / units: response/response_len/mean is 2 x golden at every step "
                                         "while no other gate breached (not read step by step: no per-step noise); "
                                         "check how it is computed or logged")
    (reading,) = verdict.measured
    assert reading.hypothesis == "logging/units" and reading.holds
    assert "divided by 2 it is within 10% of the golden at every step and passes" in reading.finding
    report = render_markdown(verdict)
    assert "## Triage evidence (per hypothesis, measured)" in report and "| logging/units |" in report


def test_an_offset_on_one_metric_is_logging_too(tmp_path: Path):
    def shift(c):
        for s in c["entropy"]:
            c["entropy"][s] += 0.5
    verdict = compare(_baseline(tmp_path), _trace(shift)).verdict
    assert verdict.triage[0].rule == "logging-units"
    assert "entropy/mean is golden +0.5 at every step" in verdict.triage[0].suggestion


def test_a_length_that_drifts_away_is_not_a_unit_change(tmp_path: Path):
    def drift(c):
        for s in c["length"]:
            c["length"][s] *= 1 + 0.03 * s  # a growing change, not one factor
    verdict = compare(_baseline(tmp_path), _trace(drift)).verdict
    assert "logging-units" not in [f.rule for f in verdict.triage]
    (reading,) = verdict.measured
    assert not reading.holds and "not one of units" in reading.finding


def test_a_factor_with_another_metric_moved_is_not_read_as_units(tmp_path: Path):
    def two(c):
        _noisy_times(2.0)(c)
        for s in c["reward"]:
            c["reward"][s] += 0.2
    verdict = compare(_baseline(tmp_path), _trace(two)).verdict
    assert "logging-units" not in [f.rule for f in verdict.triage] and not verdict.measured


def test_a_teachers_kl_a_factor_off_is_left_to_the_teacher_path(tmp_path: Path):
    golden = {**_golden(), "distillation/teacher_kl/math": {s: 0.5 - 0.01 * s for s in STEPS}}
    checks = [{"metric": NAMES[k], "method": m, "operator": "<", "threshold": t} for k, (m, t) in THRESHOLDS.items()]
    checks.append({"metric": "distillation/teacher_kl/math", "method": "relative", "operator": "<", "threshold": 0.1})
    path = tmp_path / "b.yaml"
    path.write_text(yaml.safe_dump({"golden": {"table": golden}, "checks": checks}))
    current = {m: {s: v * (2.0 if m == "distillation/teacher_kl/math" else 1.0) for s, v in series.items()}
               for m, series in golden.items()}
    trace = Trace("current", MappingProxyType(current), train_steps=tuple(STEPS), eval_steps=EVALS)
    verdict = compare(load_baseline(path), trace).verdict
    assert verdict.triage[0].rule == "teacher-path" and not verdict.measured


def test_an_eval_in_percent_at_every_point_is_the_eval_path_or_logging_with_the_check_that_tells(tmp_path: Path):
    evals = tuple(range(0, 31, 5))
    golden = {**_golden(), NAMES["eval"]: {s: 0.2 + 0.01 * s for s in evals}}
    checks = [{"metric": NAMES[k], "method": m, "operator": "<", "threshold": t} for k, (m, t) in THRESHOLDS.items()]
    path = tmp_path / "b.yaml"
    path.write_text(yaml.safe_dump({"golden": {"table": golden}, "checks": checks}))
    current = {m: {s: v * (100.0 if m == NAMES["eval"] else 1.0) for s, v in series.items()}
               for m, series in golden.items()}
    trace = Trace("current", MappingProxyType(current), train_steps=tuple(STEPS), eval_steps=evals)
    verdict = compare(load_baseline(path), trace).verdict
    first, second = verdict.triage[:2]
    assert (first.rule, first.uncertain_with, second.rule) == ("eval-path", "logging-units", "logging-units")
    assert first.next_step.startswith("eval-path or logging-units, which the evidence does not tell apart; "
                                      "to tell: grade one saved eval batch")
    assert "eval/accuracy is 100 x golden" in second.suggestion  # each rule's own line, in the report's ranked list
    assert second.why_ranked.startswith("as likely as eval-path")
    assert "uncertain: as likely as `logging-units`" in render_markdown(verdict)


def test_an_eval_scaled_at_four_points_is_not_read_as_units(tmp_path: Path):
    def percent(c):
        for s in c["eval"]:
            c["eval"][s] *= 100
    verdict = compare(_baseline(tmp_path), _trace(percent)).verdict
    assert verdict.triage[0].rule == "eval-path"
    assert "needs 5 or more" in verdict.measured[0].finding


def _facts(**kw) -> RunFacts:
    return RunFacts(expected_steps=30, exact_steps=True, **{"exit_code": 0, **kw})


def test_a_clean_run_one_step_short_is_a_changed_shape_not_a_crash(tmp_path: Path):
    verdict = judge(_baseline(tmp_path, steps=30), _trace(last=29), facts=_facts()).verdict
    assert verdict.status == "ERROR"
    assert [f.rule for f in verdict.triage][:1] == ["run-shape"] and "run-incomplete" not in _rules(verdict)
    assert verdict.triage[0].suggestion.startswith("run shape changed: the run ended cleanly after 29 steps, the "
                                                   "case expects 30 (a step-count / schedule / config change")
    assert "not a crash" in verdict.triage[0].suggestion
    shape = next(m for m in verdict.measured if m.hypothesis == "run shape")
    assert shape.holds and "over steps 1-29 (the steps both runs did) all" in shape.finding


def test_a_run_that_stops_before_a_late_window_is_still_read_by_the_steps_it_did(tmp_path: Path):
    late = {"metric": NAMES["reward"], "method": "absolute", "operator": "<", "threshold": 0.05, "scope": "window",
            "window": [25, 30]}
    verdict = judge(_baseline(tmp_path, steps=30, extra_checks=(late,)), _trace(last=20), facts=_facts()).verdict
    assert verdict.triage[0].rule == "run-shape", verdict.measured
    shape = next(m for m in verdict.measured if m.hypothesis == "run shape")
    assert "(1 more cover none of them)" in shape.finding


def _rules(verdict):
    return [f.rule for f in verdict.triage]


def test_a_crash_a_cut_log_or_changed_steps_stay_run_incomplete(tmp_path: Path):
    baseline = _baseline(tmp_path, steps=30)
    crashed = judge(baseline, _trace(last=20), facts=_facts(exit_code=1)).verdict
    cut = judge(baseline, _trace(last=20, warnings=("t.jsonl:99: truncated final line dropped",)),
                facts=_facts()).verdict
    compared = compare(baseline, _trace(last=29)).verdict  # an existing log: no exit status to read

    def late(c):
        for s in c["reward"]:
            c["reward"][s] += 0.2 if s > 15 else 0.0
    changed = judge(baseline, _trace(late, last=29), facts=_facts()).verdict
    for verdict in (crashed, cut, compared, changed):
        assert "run-shape" not in _rules(verdict) and "run-incomplete" in _rules(verdict), verdict.triage
    assert "did not end cleanly" in next(m for m in crashed.measured if m.hypothesis == "run shape").finding
