"""Step alignment: a logging change is one finding with its evidence, not a cascade of per-check ERRORs."""

from __future__ import annotations

from pathlib import Path

from autotest.inputs.baseline import load_baseline
from autotest.judge.model import ERROR, PASS
from autotest.judge.step_alignment import RULE
from autotest.judge.verdict import compare_paths
from tests.helpers import ROOT, write_tracker

BASELINE = ROOT / "baselines" / "tiny-grpo.yaml"


def _golden_rows(renumber=lambda s: s, eval_renumber=None, keep=lambda s: True, offset_values: float = 0.0):
    """The baseline's own golden values written as a tracker, with steps renumbered."""
    table = load_baseline(BASELINE).golden_table
    eval_renumber = eval_renumber or renumber
    summary: dict[int, dict[str, float]] = {}
    evals: dict[int, dict[str, float]] = {}
    for metric, values in table.items():
        for step, value in values.items():
            if metric.startswith("eval/"):
                evals.setdefault(eval_renumber(step), {})[metric] = value
            elif keep(step):
                summary.setdefault(renumber(step), {})[metric] = value + offset_values
    return summary, evals


def _compare(tmp_path: Path, summary, evals):
    tracker = write_tracker(tmp_path / "tracker.jsonl", summary, evals)
    return compare_paths(BASELINE, tracker).verdict


def _by_id(verdict):
    return {r.check_id: r for r in verdict.results}


def test_every_step_one_higher_is_one_finding_and_the_training_is_judged_shifted_back(tmp_path: Path) -> None:
    summary, evals = _golden_rows(renumber=lambda s: s + 1, eval_renumber=lambda s: s if s == 0 else s + 1)
    verdict = _compare(tmp_path, summary, evals)
    found = _by_id(verdict)["steps[alignment]"]
    assert found.status == ERROR
    assert found.message.startswith("every training step is 1 higher than the baseline's (current 2..46, baseline "
                                    "1..45); mapped back, the training metrics match better")
    gates = [r for r in verdict.results if r.is_gate and r.check_id != "steps[alignment]" and r.kind == "metric"]
    assert gates and all(r.status == PASS for r in gates), [(r.check_id, r.message) for r in gates if r.status != PASS]
    assert _by_id(verdict)["steps[count]"].status == PASS
    assert verdict.status == ERROR
    primary = next(f for f in verdict.triage if f.primary)
    assert primary.rule == RULE and primary.suggestion.startswith("logging / step accounting changed")


def test_step_numbers_doubled_are_one_finding(tmp_path: Path) -> None:
    summary, evals = _golden_rows(renumber=lambda s: 2 * s)
    verdict = _compare(tmp_path, summary, evals)
    found = _by_id(verdict)["steps[alignment]"]
    assert found.message.startswith("every training step number is 2 x the baseline's (45 steps numbered 2, 4")
    assert all(r.status == PASS for r in verdict.results if r.is_gate and r.kind == "metric")


def test_a_log_every_second_step_is_named(tmp_path: Path) -> None:
    summary, evals = _golden_rows(keep=lambda s: s % 2 == 0)
    verdict = _compare(tmp_path, summary, evals)
    assert _by_id(verdict)["steps[alignment]"].message.startswith(
        "the run logs every 2th of the baseline's steps (22 of 45: 2, 4, .., 44)")


def test_eval_points_at_other_steps_are_one_finding(tmp_path: Path) -> None:
    summary, evals = _golden_rows(eval_renumber=lambda s: s + 1)
    verdict = _compare(tmp_path, summary, evals)
    assert _by_id(verdict)["steps[alignment]"].message.startswith(
        "eval points at other steps: the run evaluated at 1, 16, 31, the baseline at 0, 15, 30, 45")


def test_an_aligned_run_has_no_finding_and_a_shift_that_also_changes_values_still_fails(tmp_path: Path) -> None:
    summary, evals = _golden_rows()
    assert "steps[alignment]" not in _by_id(_compare(tmp_path, summary, evals))
    summary, evals = _golden_rows(renumber=lambda s: s + 1, eval_renumber=lambda s: s if s == 0 else s + 1,
                                  offset_values=0.5)
    (tmp_path / "b").mkdir()
    verdict = _compare(tmp_path / "b", summary, evals)
    assert "match no better" in _by_id(verdict)["steps[alignment]"].message or "match better" in \
        _by_id(verdict)["steps[alignment]"].message
    assert verdict.status == "FAIL"  # the renumbering never hides a real change
