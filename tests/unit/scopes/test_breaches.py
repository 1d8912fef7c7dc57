"""Scope ``breaches``: a per-step value bound with a count of breaching steps allowed. A fault on alternate steps
FAILs with its period named while a median of the per-step errors passes it; the count allowed passes a clean run's
rare spike; calibration sets bound and count from the clean runs; a bad spec is one line."""

from __future__ import annotations

import math
from pathlib import Path
from types import MappingProxyType

import numpy as np
import pytest

from autotest.calibration.thresholds import CALIBRATED, KEPT, calibrate
from autotest.errors import UsageError
from autotest.inputs.baseline import load_baseline
from autotest.inputs.baseline_model import Baseline, CalibrationSpec, CheckSpec
from autotest.judge.model import FAIL, PASS
from autotest.judge.trace import Trace
from autotest.judge.verdict import compare
from autotest.scopes import scope_kind
from autotest.scopes.breaches import allowed_count
from tests.unit.judge.test_checks import check

STEPS = range(1, 46)
CLEAN = {s: 1e-14 * (1 + 0.1 * (s % 3)) for s in STEPS}
ALTERNATE = {s: (3e-5 if s % 2 == 0 else 1e-14) for s in STEPS}  # a sync skipped on odd steps


def bound(current: dict, allowed: int = 0, threshold: float = 1.5e-11):
    return check({}, current, method="value", operator="<=", threshold=threshold, scope="breaches",
                 options=(("allowed_breaches", allowed),))


def test_alternate_steps_fail_with_the_period_named_where_the_median_passes():
    result = bound(ALTERNATE)
    assert result.status == FAIL
    assert result.message.startswith("m: 22/45 steps (49%) breach value <= 1.5e-11, 0 allowed; every 2nd step "
                                     "(steps = 0 mod 2: 2, 4, 6, ...; 22/22 of them breach, 0 off them); first "
                                     "breach at step 2: 3e-05")
    assert result.first_breach_step == 2
    median = check(CLEAN, ALTERNATE, method="absolute", operator="<=", threshold=1.5e-11, scope="percentile",
                   percentile=50)
    assert median.status == PASS  # what the issue saw: the median reads a clean step
    assert "22/45 steps (49%) breach the threshold; every 2nd step" in median.message


def test_every_fifth_step_fails_with_period_five():
    result = bound({s: (1e-4 if s % 5 == 1 else 1e-14) for s in STEPS}, allowed=2)
    assert result.status == FAIL and "9/45 steps (20%) breach" in result.message
    assert "every 5th step (steps = 1 mod 5: 1, 6, 11" in result.message


def test_the_count_allowed_passes_a_clean_runs_rare_spike():
    spiked = {**CLEAN, 17: 1e-9, 30: 2e-9}
    assert bound(spiked, allowed=2).status == PASS
    assert "2 breaching steps, 2 allowed" in bound(spiked, allowed=2).message
    failed = bound(spiked, allowed=1)
    assert failed.status == FAIL and "2/45 steps (4%) breach" in failed.message and "every" not in failed.message


def test_a_prefix_with_more_breaches_than_allowed_fails_early_and_one_within_waits():
    kind = scope_kind("breaches")
    assert kind.decide_early is not None
    prefix = {s: ALTERNATE[s] for s in range(1, 8)}
    assert bound(prefix, allowed=2).status == FAIL  # steps 2, 4, 6
    assert bound({s: ALTERNATE[s] for s in range(1, 5)}, allowed=2).status == PASS


def test_the_allowed_count_keeps_a_clean_run_within_the_budget():
    k, p = allowed_count(runs=10, steps=45, budget=0.05)
    assert math.isclose(p, 1 - 0.025 ** (1 / 450))
    # P(Binomial(45, p) > k) <= budget / 2, and k is the least such count
    from math import comb
    tail = lambda k: 1 - sum(comb(45, i) * p ** i * (1 - p) ** (45 - i) for i in range(k + 1))  # noqa: E731
    assert tail(k) <= 0.025 < tail(k - 1)
    assert k == 2
    assert allowed_count(runs=100, steps=45, budget=0.05)[0] < k  # more clean runs, a tighter count


def _run(name: str, series: dict[int, float]) -> Trace:
    return Trace(name, MappingProxyType({"k3": MappingProxyType(series)}), tuple(series), ())


def test_calibration_sets_bound_and_count_from_the_clean_runs():
    rng = np.random.default_rng(0)
    runs = [_run(f"r{i}", {s: float(1e-14 * rng.uniform(0.5, 2.0)) for s in STEPS}) for i in range(10)]
    largest = max(v for r in runs for v in r.get("k3").values())
    made = CheckSpec(metric="k3", method="value", operator="<", threshold=math.nan, scope="breaches",
                     placeholder=True, options=(("allowed_breaches", 0),))
    hand = CheckSpec(metric="k3", method="value", operator="<=", threshold=5e-3)  # a bound written by hand
    settings = CalibrationSpec(margin=1.5, floors=MappingProxyType({"k3": 1e-4}))
    spec = Baseline(name="s", path=Path("s.yaml"), checks=(made, hand), golden_table=MappingProxyType({}),
                    calibration=settings)
    result = calibrate(spec, runs)
    bounds, kept = result.checks
    assert kept.status == KEPT and kept.check.threshold == 5e-3
    assert bounds.status == CALIBRATED and not bounds.check.placeholder
    # the floor 1e-4 is capped at 1000 x the runs' own level, which is above largest x 1.5
    assert largest * 1.5 < bounds.check.threshold <= 1000 * largest * 1.01
    assert dict(bounds.check.options) == {"allowed_breaches": 2}
    assert "allowed_breaches 2" in bounds.check.derivation and "N=10 runs x 45 steps" in bounds.check.derivation
    # every calibration run passes its own bound; the alternate fault does not
    for held in runs:
        assert compare(result.baseline, held).verdict.status == PASS
    faulty = _run("fault", {s: (3e-5 if s % 2 == 0 else v) for s, v in runs[0].get("k3").items()})
    failed = [r for r in compare(result.baseline, faulty).verdict.results if r.status == FAIL]
    assert [r.check_id for r in failed] == ["k3[breaches]"] and "every 2nd step" in failed[0].message


@pytest.mark.parametrize("extra,message", [
    ("method: absolute, allowed_breaches: 1", r"checks\[0\]\.method: scope breaches bounds the value itself, not "
                                              r"method 'absolute'; write method: value"),
    ("method: value, allowed_breaches: -1", r"checks\[0\]\.allowed_breaches: .*"),
    ("method: value, allowed_breaches: two", r"checks\[0\]\.allowed_breaches: .*write how many steps may breach"),
])
def test_a_bad_breaches_check_is_one_line(tmp_path, extra, message):
    path = tmp_path / "b.yaml"
    path.write_text("golden: {table: {m: {1: 0.0}}}\n"
                    f"checks: [{{metric: m, operator: '<', threshold: 0.1, scope: breaches, {extra}}}]\n",
                    encoding="utf-8")
    with pytest.raises(UsageError, match=message):
        load_baseline(path)


def test_allowed_breaches_on_another_scope_is_one_line(tmp_path):
    path = tmp_path / "b.yaml"
    path.write_text("golden: {table: {m: {1: 0.0}}}\n"
                    "checks: [{metric: m, method: value, operator: '<', threshold: 0.1, allowed_breaches: 1}]\n",
                    encoding="utf-8")
    with pytest.raises(UsageError, match=r"allowed_breaches: only applies to scope 'breaches', not 'stepwise'"):
        load_baseline(path)


def test_a_breaches_check_round_trips_through_the_writer(tmp_path):
    from autotest.inputs.baseline_writer import baseline_yaml

    path = tmp_path / "b.yaml"
    path.write_text("golden: {table: {m: {1: 0.0}}}\n"
                    "checks: [{metric: m, method: value, operator: '<', threshold: 0.1, scope: breaches, "
                    "allowed_breaches: 3}, {metric: m, method: absolute, operator: '<', threshold: 1}]\n",
                    encoding="utf-8")
    loaded = load_baseline(path)
    assert dict(loaded.checks[0].options) == {"allowed_breaches": 3}
    (tmp_path / "c.yaml").write_text(baseline_yaml(loaded), encoding="utf-8")
    assert load_baseline(tmp_path / "c.yaml").checks == loaded.checks


def test_the_report_row_gives_the_breaching_steps_and_the_count_allowed():
    result = bound(ALTERNATE, allowed=2)
    assert scope_kind("breaches").table_cells(result, "3e-05", "value <= 1.5e-11", "2") == (
        "22/45 steps breach (2 allowed); worst 3e-05", "value <= 1.5e-11", "worst 2")
