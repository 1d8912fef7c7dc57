"""A mid-size regression that the per-step gates let through is now caught, and a clean seed still passes.

Runs the embedded GRPO case for real (seed 11, outside the calibration seeds 0-9) against the committed
baseline, once clean and once with a regression of ``autotest.workloads.regressions`` whose effect is
within the old thresholds' reach only at a few steps, and once with an eval-path regression that only the
sampled (pass@1) eval can see (benchmarks/detection measures the full grid).
"""

from __future__ import annotations

import pytest

from autotest.inputs.case import load_case
from autotest.pipeline import LaunchOptions, PublishOptions, RunOptions, run_case

SEED = 11  # not a calibration seed (0-4): a fresh run, as in CI


def _run(tmp_path, fault: str | None):
    options = RunOptions(LaunchOptions(results_root=tmp_path, seed=SEED, fault=fault, poll_interval_s=1),
                         publish=PublishOptions(with_plots=False))
    return run_case(load_case("tiny-grpo"), options).verdict


def _detail(verdict) -> str:
    return "\n".join(f"{r.status} {r.check_id}: {r.message}" for r in verdict.results)


def _accuracy_failures(verdict) -> set[str]:
    # step time and memory are gated too, but they measure the machine (a 2-core machine's load), not the change
    return {r.check_id for r in verdict.results
            if r.is_gate and r.status in ("FAIL", "ERROR") and not (r.metric or "").startswith(("time/", "memory/"))}


@pytest.mark.slow
def test_clean_seed_passes_and_a_judge_dropping_correct_answers_fails_on_a_pooled_gate(tmp_path):
    clean = _run(tmp_path / "clean", None)
    assert not _accuracy_failures(clean), _detail(clean)
    regressed = _run(tmp_path / "regressed", "judge-drops:0.3")
    assert regressed.status == "FAIL", _detail(regressed)
    # caught by a pooled gate (the benchmark's runs: the late rewards pool; a run on 2026-12-01 came to 4.6 of its
    # 4.8 there and was caught by the pooled response length and the final eval instead)
    assert any("[pooled" in c for c in _accuracy_failures(regressed)), _detail(regressed)


@pytest.mark.slow
def test_an_eval_at_another_temperature_fails_the_sampled_eval_and_triages_to_the_eval_path(tmp_path):
    verdict = _run(tmp_path, "eval-temperature:1.2")
    failed = _accuracy_failures(verdict)
    # training is bitwise a clean run's: only the eval gates may fire; greedy eval (reference) cannot see it
    assert failed and all(check.startswith("eval/accuracy") for check in failed), _detail(verdict)
    assert next(f.rule for f in verdict.triage if f.primary) == "eval-path", _detail(verdict)
    greedy = next(r for r in verdict.results if r.metric == "eval/greedy_accuracy")
    assert greedy.status == "INFO" and greedy.observed == 0, _detail(verdict)
