"""Replicate means: the mean trace, the pooled threshold scale (derived and simulated), per-replicate structure."""

from __future__ import annotations

import math
from pathlib import Path
from types import MappingProxyType

import pytest

from autotest.inputs.baseline import Baseline, CalibrationSpec, CheckSpec
from autotest.judge.model import ERROR, FAIL, INFO, PASS, CheckResult, Verdict
from autotest.scopes.pooled import pooled_statistic
from autotest.judge.replicate_mean import (
    Member,
    calibration_runs,
    for_the_mean,
    judge_replicates,
    mean_trace,
    pooled_threshold_scale,
)
from autotest.judge.trace import Trace

METRIC = "response/rewards/mean"
STEPS = range(1, 11)
GOLDEN = {s: 0.1 * s for s in STEPS}
NOISE = {s: 0.01 for s in STEPS}


def _trace(series: dict[str, dict[int, float]], source: str = "t", train=None, **kw) -> Trace:
    frozen = MappingProxyType({m: MappingProxyType(v) for m, v in series.items()})
    steps = train if train is not None else sorted({s for v in series.values() for s in v})
    return Trace(source, frozen, train_steps=tuple(steps), **kw)


def _baseline(*checks: CheckSpec, runs: int | None = 5) -> Baseline:
    table = MappingProxyType({METRIC: MappingProxyType(GOLDEN)})
    return Baseline("b", Path("b.yaml"), checks, golden_table=table, calibrated_range=(1, 10),
                    noise_table=MappingProxyType({METRIC: MappingProxyType(NOISE)}),
                    provenance={"runs": runs} if runs else {}, calibration=CalibrationSpec(runs=3))


POOLED = CheckSpec(METRIC, "absolute", "<", 3.0, scope="pooled", window=(1, 10), derivation="calibrated pooled")
PER_STEP = CheckSpec(METRIC, "absolute", "<", 0.05, scope="percentile", percentile=80.0)


# ---------------------------------------------------------------- the threshold scale


@pytest.mark.parametrize("k, n, expected", [(1, 5, 1.0), (2, 5, 0.7638), (3, 5, 0.6667), (4, 5, 0.6124),
                                            (2, 3, 0.7906), (1000, 5, 0.4093)])
def test_scale_is_the_ratio_of_the_k_mean_to_the_one_run_deviation(k, n, expected) -> None:
    assert pooled_threshold_scale(k, n) == pytest.approx(expected, abs=1e-4)


def test_the_scale_matches_the_simulated_spread_of_the_pooled_statistic() -> None:
    """Seeds as i.i.d. draws of a curve with correlated steps: the pooled statistic of a K-run mean against
    an N-run golden spreads by the derived factor times that of one run (what calibration measured)."""
    import numpy as np

    rng = np.random.default_rng(7)
    trials, n, steps = 20000, 5, 12
    sigma = np.linspace(0.5, 2.0, steps)
    # AR(1) correlation across steps, as neighbouring steps of a training curve are correlated
    cov = 0.8 ** np.abs(np.subtract.outer(np.arange(steps), np.arange(steps))) * np.outer(sigma, sigma)
    chol = np.linalg.cholesky(cov)

    def runs(count: int) -> np.ndarray:  # trials x count x steps deviations from the true curve
        return rng.standard_normal((trials, count, steps)) @ chol.T

    x = np.arange(steps) - (steps - 1) / 2

    def statistics(z: np.ndarray) -> tuple[np.ndarray, np.ndarray]:  # window mean and fitted trend of z
        return z.mean(axis=1), (z * x).sum(axis=1) / (x * x).sum() * (steps - 1)

    golden = runs(n).mean(axis=1)
    one = statistics((runs(1)[:, 0] - golden) / sigma)
    for k in (2, 3, 4):
        mean_k = statistics((runs(k).mean(axis=1) - golden) / sigma)
        for of_k, of_one in zip(mean_k, one):
            assert of_k.std() / of_one.std() == pytest.approx(pooled_threshold_scale(k, n), rel=0.03)


def test_calibration_runs_come_from_the_provenance_then_the_calibration_section() -> None:
    assert calibration_runs(_baseline(runs=5)) == 5
    assert calibration_runs(_baseline(runs=None)) == 3


def test_only_pooled_thresholds_are_scaled_and_the_derivation_says_so() -> None:
    scaled, scale = for_the_mean(_baseline(POOLED, PER_STEP), 3)
    pooled, per_step = scaled.checks
    assert scale == pytest.approx(math.sqrt((1 / 3 + 1 / 5) / (1 + 1 / 5)))
    assert pooled.threshold == pytest.approx(3.0 * scale)
    assert "K=3 replicates" in pooled.derivation and "N=5 calibration runs" in pooled.derivation
    assert per_step == PER_STEP
    assert for_the_mean(_baseline(POOLED), 1) == (_baseline(POOLED), 1.0)


# ---------------------------------------------------------------- the mean trace


def test_mean_trace_averages_each_metric_at_the_steps_every_replicate_logged() -> None:
    a = _trace({METRIC: {1: 0.1, 2: 0.2, 3: 0.3}, "time/step": {1: 1.0, 2: 1.0, 3: 1.0}}, "a")
    b = _trace({METRIC: {1: 0.3, 2: 0.4}, "time/step": {1: 1.2, 2: 1.2, 3: 1.2}}, "b", train=[1, 2])
    c = _trace({METRIC: {1: 0.2, 2: 0.3, 3: 0.5}, "time/step": {1: 9.0, 2: 9.0, 3: 9.0}}, "c")
    mean = mean_trace([a, b, c], ["r1", "r2", "r3"])
    assert dict(mean.series[METRIC]) == pytest.approx({1: 0.2, 2: 0.3})  # step 3 is not in b
    assert dict(mean.series["time/step"]) == pytest.approx({1: 1.2, 2: 1.2, 3: 1.2})  # median: c's slow machine
    assert mean.train_steps == (1, 2)
    assert mean.source == "mean of 3 replicates (a, b, c)"


def test_a_metric_one_replicate_lacks_is_left_out_and_a_non_numeric_one_is_kept() -> None:
    a = _trace({METRIC: {1: 0.1}, "entropy/mean": {1: 2.0}}, "a", warnings=("truncated line 3",))
    b = _trace({METRIC: {1: 0.3}}, "b", non_numeric=MappingProxyType({"entropy/mean": ("a list", 4)}))
    mean = mean_trace([a, b], ["r1", "r2"])
    assert "entropy/mean" not in mean.series  # its check then reports it missing: never a silent pass
    assert mean.non_numeric["entropy/mean"] == ("a list", 4)
    assert mean.warnings == ("r1: truncated line 3",)


# ---------------------------------------------------------------- the verdict


def _verdict(status: str = PASS, *structural: CheckResult, observed: float = 0.5) -> Verdict:
    results = (CheckResult("run[completion]", PASS, "run exited 0 after step 10", kind="structural"),
               *structural, CheckResult(POOLED.check_id, status, "m", metric=METRIC, observed=observed))
    return Verdict(status, "case", results, context={"launch": {"exit_code": 0, "wall_s": 10.0}})


def _member(index: int, seed: int, shift: float, verdict: Verdict | None = None) -> Member:
    trace = _trace({METRIC: {s: GOLDEN[s] + shift for s in STEPS}}, f"r{index}/tracker.jsonl")
    return Member(index, seed, f"/res/replicates/r{index}-seed{seed}", verdict or _verdict(), trace)


def test_the_mean_is_judged_with_the_scaled_pooled_threshold() -> None:
    # each replicate alone is 2.5 noise units off (passes 3.0); their mean 2.5 fails the scaled 3.0 x 0.764
    members = [_member(1, 0, 0.024), _member(2, 5, 0.026)]  # mean 0.025
    comparison = judge_replicates(_baseline(POOLED), None, members, case="c")
    verdict = comparison.verdict
    pooled = next(r for r in verdict.results if r.check_id == POOLED.check_id)
    assert pooled.status == FAIL and pooled.threshold == pytest.approx(3.0 * pooled_threshold_scale(2, 5))
    assert pooled.observed == pytest.approx(pooled_statistic(list(STEPS), {s: GOLDEN[s] + 0.025 for s in STEPS},
                                                             GOLDEN, NOISE).observed)
    assert verdict.pooled_threshold_scale == pytest.approx(pooled_threshold_scale(2, 5))
    assert [(r.label, r.status, r.exit, r.averaged, r.observed) for r in verdict.replicates] == [
        ("r1-seed0", PASS, "0", True, {POOLED.check_id: 0.5}), ("r2-seed5", PASS, "0", True, {POOLED.check_id: 0.5})]
    assert [label for label, _ in comparison.replicate_traces] == ["r1-seed0", "r2-seed5"]


def test_a_crashed_replicate_makes_the_verdict_error_naming_it_and_is_left_out_of_the_mean() -> None:
    crashed = _verdict(ERROR, CheckResult("run[tracker]", ERROR, "no tracker.jsonl", kind="structural"))
    crashed = Verdict(ERROR, "case", (CheckResult("run[completion]", ERROR, "run exited with code 1 at step 3 of 10",
                                                  kind="structural"),) + crashed.results[1:],
                      context={"launch": {"exit_code": 1, "wall_s": 2.0}})
    members = [_member(1, 0, 0.0), _member(2, 5, 0.5, crashed)]
    verdict = judge_replicates(_baseline(POOLED), None, members, case="c").verdict
    assert verdict.status == ERROR
    failing = [r for r in verdict.results if r.status == ERROR]
    assert [r.check_id for r in failing] == ["replicate[r2-seed5]"]
    assert "replicate r2-seed5: run exited with code 1 at step 3 of 10; no tracker.jsonl" in failing[0].message
    assert next(r for r in verdict.results if r.check_id == POOLED.check_id).status == PASS  # r1 alone is clean
    assert [r.averaged for r in verdict.replicates] == [True, False]
    assert verdict.replicates[1].exit == "1"
    assert verdict.pooled_threshold_scale == pytest.approx(1.0)  # one replicate averaged: K = 1


def test_a_replicate_that_failed_a_gate_before_it_crashed_is_a_fail_as_a_single_run_would_be() -> None:
    crashed = Verdict(FAIL, "case", (
        CheckResult("run[completion]", ERROR, "run exited with code 1 at step 6 of 10", kind="structural"),
        CheckResult(PER_STEP.check_id, FAIL, "rewards at step 5: 0.9 vs golden 0.5", metric=METRIC)))
    verdict = judge_replicates(_baseline(POOLED), None, [_member(1, 0, 0.0), _member(2, 5, 0.0, crashed)],
                               case="c").verdict
    assert verdict.status == FAIL
    result = next(r for r in verdict.results if r.check_id == "replicate[r2-seed5]")
    assert result.status == FAIL
    assert result.message.startswith("replicate r2-seed5: run exited with code 1 at step 6 of 10; rewards at step 5")


def test_a_replicate_stopped_by_fail_fast_is_a_fail_naming_it() -> None:
    stopped = Verdict(FAIL, "case", (
        CheckResult("run[completion]", INFO, "run stopped by fail-fast at step 4: k3 breach", kind="structural"),
        CheckResult("mismatch[stepwise]", FAIL, "k3 at step 3: 0.02 not <= 0.005", metric="k3")))
    verdict = judge_replicates(_baseline(POOLED), None, [_member(1, 0, 0.0), _member(2, 5, 0.0, stopped)],
                               case="c").verdict
    assert verdict.status == FAIL
    result = next(r for r in verdict.results if r.check_id == "replicate[r2-seed5]")
    assert result.status == FAIL and "stopped by fail-fast" in result.message and "k3 at step 3" in result.message


def test_an_interrupt_is_an_error_and_no_replicate_is_judged() -> None:
    verdict = judge_replicates(_baseline(POOLED), None, [], case="c", interrupted="SIGTERM").verdict
    assert verdict.status == ERROR
    assert [r.check_id for r in verdict.results] == ["replicates[interrupted]"]
    assert "interrupted (SIGTERM)" in verdict.results[0].message


def test_results_json_lists_every_replicate_and_the_scale() -> None:
    data = judge_replicates(_baseline(POOLED), None, [_member(1, 0, 0.001), _member(2, 5, -0.001)], case="c").verdict
    record = data.to_dict()
    assert [(r["seed"], r["folder"], r["status"]) for r in record["replicates"]] == [
        (0, "/res/replicates/r1-seed0", PASS), (5, "/res/replicates/r2-seed5", PASS)]
    assert record["pooled_threshold_scale"] == pytest.approx(0.7638, abs=1e-4)


def test_replicates_at_different_seeds_that_are_bitwise_copies_are_an_error_judged_as_one_run() -> None:
    """A launch that drops {seed}: both 'replicates' are the same run; never judged with K-run thresholds."""
    members = [_member(1, 11, 0.025), _member(2, 12, 0.025)]
    verdict = judge_replicates(_baseline(POOLED), None, members, case="c").verdict
    seed = next(r for r in verdict.results if r.check_id == "replicates[seed]")
    assert seed.status == ERROR and seed.message.startswith(
        "seed not honoured: r1-seed11 (seed 11) and r2-seed12 (seed 12) logged bitwise-identical values")
    pooled = next(r for r in verdict.results if r.check_id == POOLED.check_id)
    assert pooled.threshold == pytest.approx(3.0)  # the one-run threshold, not the scaled one
    assert verdict.status == ERROR
