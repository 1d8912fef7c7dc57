"""Checks that cannot fire: a gate whose MDE exceeds its metric's whole range is kept as reference only."""

from __future__ import annotations

from pathlib import Path
from types import MappingProxyType

import numpy as np

from autotest.calibration.review import render_report
from autotest.calibration.golden_shifts import golden_shifts
from autotest.calibration.thresholds import calibrate, leave_one_out
from autotest.calibration.usefulness import DEMOTED, metric_range
from autotest.inputs.baseline_model import Baseline, CalibrationSpec, CheckSpec
from autotest.judge.trace import Trace

STEPS = range(1, 21)
LENGTH, REWARD, MISMATCH = "response/response_len/mean", "response/rewards/mean", "mismatch/mismatch_k3_kl"


def _runs(n: int = 8, seed: int = 3, rise: float = 3.0) -> list[Trace]:
    """A noisy trainer: a length rising by ``rise`` a step under a seed noise (sd 20) as wide as its curve, a
    rising reward, a mismatch."""
    rng = np.random.default_rng(seed)
    traces = []
    for i in range(n):
        series = {LENGTH: {s: 100 + rise * s + float(rng.normal(0, 20)) for s in STEPS},
                  REWARD: {s: 0.1 + 0.04 * s + float(rng.normal(0, 0.01)) for s in STEPS},
                  MISMATCH: {s: 1e-3 + float(rng.normal(0, 3e-4)) for s in STEPS}}
        traces.append(Trace(f"run{i}", MappingProxyType({m: MappingProxyType(v) for m, v in series.items()}),
                            tuple(STEPS)))
    return traces


def _spec(*checks: CheckSpec) -> Baseline:
    return Baseline(name="noisy", path=Path("noisy.yaml"), checks=checks, golden_table=MappingProxyType({}),
                    calibration=CalibrationSpec(margin=1.5, relative_floor=0.01))


def _chk(metric: str, method: str = "absolute", severity: str = "gate", **kw) -> CheckSpec:
    return CheckSpec(metric=metric, method=method, operator="<", threshold=1.0, severity=severity, **kw)


SPEC = _spec(_chk(LENGTH, "relative", scope="percentile", percentile=80.0), _chk(LENGTH, scope="pooled"),
             _chk(REWARD, scope="percentile", percentile=80.0),
             _chk(MISMATCH, scope="percentile", percentile=50.0))


def test_a_per_step_gate_whose_mde_exceeds_the_curve_is_reference_only_and_named() -> None:
    cal = calibrate(SPEC, _runs())
    assert [u.check_id for u in cal.useless] == [f"{LENGTH}[percentile]"]
    useless = cal.useless[0]
    assert useless.mde > useless.span and useless.source == "golden over steps 1-20"
    assert useless.line().startswith(f"useless: {LENGTH}[percentile]: its minimum detectable effect ±")
    assert "drop it, or gate the metric with a pooled check (scope: pooled)" in useless.line()
    severity = {c.check_id: c.severity for c in cal.baseline.checks}
    # the pooled check on the same metric has power; reward's curve spans far more than its MDE; a level
    # metric (mismatch) is never held against its own span
    assert severity == {f"{LENGTH}[percentile]": "reference", f"{LENGTH}[pooled]": "gate",
                        f"{REWARD}[percentile]": "gate", f"{MISMATCH}[percentile]": "gate"}
    demoted = next(c for c in cal.baseline.checks if c.check_id == f"{LENGTH}[percentile]")
    assert demoted.derivation.startswith(DEMOTED) and "calibrated, N=8" in demoted.derivation


def test_a_curve_flat_within_its_seed_noise_is_not_held_against_its_span() -> None:
    # a flat length spans only what the seeds scatter by: any change moves it past that, so no verdict on it
    cal = calibrate(SPEC, _runs(rise=0.0))
    assert cal.useless == ()
    assert metric_range(cal.baseline, LENGTH, {}, _runs(rise=0.0)) is None


def test_the_review_report_lists_it_with_its_mde_and_range() -> None:
    cal = calibrate(SPEC, _runs())
    text = render_report(cal, leave_one_out(SPEC, _runs()), golden_shifts(None, cal.baseline), None, "", [],
                         Path("b/noisy.candidate.yaml"), Path("b/noisy.yaml"), "rl-autotest baseline promote noisy")
    section = text.split("## Checks that cannot fire", 1)[1].split("##", 1)[0]
    assert f"- `{LENGTH}[percentile]`: its minimum detectable effect ±{cal.useless[0].mde:.3g}" in section
    assert f"whole range {cal.useless[0].span:.3g}" in section


def test_recalibration_judges_a_demoted_check_as_a_gate_again_and_a_hand_demoted_one_stays() -> None:
    first = calibrate(SPEC, _runs()).baseline
    # a quiet trainer this time: the same check now has power and gates again
    quiet = [Trace(t.source, MappingProxyType({**t.series, LENGTH: MappingProxyType(
        {s: 100 + 3 * s + (v - 100) / 100 for s, v in t.series[LENGTH].items()})}), t.train_steps)
        for t in _runs(seed=1)]
    again = calibrate(first, quiet)
    assert again.useless == ()
    assert {c.check_id: c.severity for c in again.baseline.checks}[f"{LENGTH}[percentile]"] == "gate"
    by_hand = _spec(_chk(LENGTH, "relative", "reference", scope="percentile", percentile=80.0,
                         derivation="reference: informs the length trend"))
    assert calibrate(by_hand, quiet).baseline.checks[0].severity == "reference"


def test_a_share_of_eval_items_has_the_natural_range_and_a_level_metric_none() -> None:
    baseline = calibrate(SPEC, _runs()).baseline
    assert metric_range(baseline, "eval/accuracy", {"eval/accuracy": 20}) == (
        0.0, 1.0, "natural range of a share of eval items")
    assert metric_range(baseline, MISMATCH, {}) is None
    low, high, source = metric_range(baseline, REWARD, {})
    assert high - low > 0.7 and source == "golden over steps 1-20"


def test_a_useless_pooled_check_is_told_to_take_more_runs_not_to_be_pooled() -> None:
    from autotest.calibration.usefulness import UselessCheck

    line = UselessCheck(f"{LENGTH}[pooled]", LENGTH, 35.0, 82.0, 105.0, "golden over steps 1-10", pooled=True).line()
    assert line.endswith("drop it, or calibrate from more runs (a pooled MDE shrinks with them)")


def test_a_shadow_gate_that_cannot_fire_is_demoted_and_restored_as_shadow() -> None:
    from autotest.calibration.usefulness import UselessCheck, demote, restored

    shadow = CheckSpec("m", "absolute", "<", 1.0, severity="shadow", derivation="calibrated, N=5")
    demoted = demote(shadow, UselessCheck("m[stepwise]", "m", 5.0, 0.0, 1.0, "golden over steps 1-10"))
    assert demoted.severity == "reference" and demoted.derivation.startswith(f"{DEMOTED} (was shadow): ")
    gate = demote(CheckSpec("m", "absolute", "<", 1.0), UselessCheck("m[stepwise]", "m", 5.0, 0.0, 1.0, "golden over steps 1-10"))
    assert [c.severity for c in restored((demoted, gate))] == ["shadow", "gate"]
