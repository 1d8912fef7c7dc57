"""The design per detection target: golden K, paired K and the window gate that sees the change, with its runs."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from types import MappingProxyType

import numpy as np
import pytest

from autotest.calibration.thresholds import calibrate
from autotest.inputs.baseline import Baseline, CalibrationSpec, CheckSpec
from autotest.inputs.baseline_model import PairedSpec, PairedWindow
from autotest.judge.paired import paired_mde
from autotest.judge.power import REPLICATES, baseline_power
from autotest.judge.power_design import Design, advise
from autotest.judge.trace import Trace
from autotest.report.power_table import design_rows

METRIC = "reward"
STEPS = np.arange(1, 31)
WINDOWS = ((1, 10), (11, 20), (21, 30))


def _run(rng: np.random.Generator) -> Trace:
    """A learning curve whose seed-to-seed noise grows with the step (quiet early, loud late), as a trainer's."""
    values = 0.6 * STEPS / 30 + rng.normal(0, 1, len(STEPS)) * (0.002 + 0.03 * (STEPS / 30) ** 2)
    series = MappingProxyType({METRIC: MappingProxyType({int(s): float(v) for s, v in zip(STEPS, values)})})
    return Trace("run", series, train_steps=tuple(int(s) for s in STEPS))


def _baseline(paired: PairedSpec | None = None) -> Baseline:
    pooled = CheckSpec(METRIC, "absolute", "<", 1e9, scope="pooled")
    checks = (*(replace(pooled, window=w) for w in WINDOWS), pooled)
    spec = Baseline("synthetic", Path("synthetic.yaml"), checks,
                    calibration=CalibrationSpec(runs=10, false_alarm_budget=0.05))
    baseline = calibrate(spec, [_run(np.random.default_rng(i)) for i in range(10)]).baseline
    return replace(baseline, paired=paired)


@pytest.fixture(scope="module")
def golden_only() -> Baseline:
    return _baseline()


def _mde(baseline: Baseline, check_id: str, k: int) -> float:
    return next(p for p in baseline_power(baseline) if p.check_id == check_id).mde(k)


def test_each_window_gets_the_fewest_replicates_whose_own_gate_reaches_the_target(golden_only: Baseline) -> None:
    late = f"{METRIC}[pooled 21-30]"
    effect = _mde(golden_only, late, 4) * 1.001  # the late window reaches it at K=4, not at K=2
    assert _mde(golden_only, late, 2) > effect
    (target,) = advise(golden_only, {METRIC: effect})
    assert [s.steps for s in target.spans] == [*WINDOWS, (1, 30)]
    by_span = {s.steps: s for s in target.spans}
    assert by_span[(21, 30)].golden == Design("golden", late, 4, _mde(golden_only, late, 4))
    early = by_span[(1, 10)].golden
    assert early is not None and early.gate == f"{METRIC}[pooled 1-10]" and early.k == 1  # quiet early: one run
    assert all(s.paired is None for s in target.spans)  # no paired: section
    # wherever it acts: one verdict judges every gate at one K, so the largest any window needs
    assert target.overall("golden") == 4 and target.advised == Design("golden", late, 4, _mde(golden_only, late, 4))
    assert target.advised.runs == 4


def test_a_whole_run_gate_is_never_counted_for_a_change_confined_to_a_window(golden_only: Baseline) -> None:
    """Its MDE holds for a shift at every step; a late change moves its statistic a third as much."""
    whole, late = f"{METRIC}[pooled]", f"{METRIC}[pooled 21-30]"
    assert _mde(golden_only, whole, 1) < _mde(golden_only, late, 1)  # the data make the whole run tempting
    effect = (_mde(golden_only, whole, 1) + _mde(golden_only, late, 1)) / 2
    (target,) = advise(golden_only, {METRIC: effect})
    by_span = {s.steps: s for s in target.spans}
    assert by_span[(1, 30)].golden is not None and by_span[(1, 30)].golden.k == 1
    late_design = by_span[(21, 30)].golden
    assert late_design is None or (late_design.gate == late and late_design.k > 1)


def test_paired_seeds_cost_two_runs_each_and_win_where_they_are_cheaper(golden_only: Baseline) -> None:
    quiet = PairedWindow(METRIC, 21, 30, noise=0.002, level=0.5)
    paired = PairedSpec(pairs=10, perturbation="OMP_NUM_THREADS=2", windows=(quiet,), false_alarm_budget=0.05,
                        relative_floor=0.0)
    baseline = replace(golden_only, paired=paired)
    late = f"{METRIC}[pooled 21-30]"
    effect = _mde(baseline, late, 8) * 1.001  # golden needs K=8 there
    one_seed = paired_mde(paired, quiet, 1)
    assert one_seed < effect  # one seed per side reaches it: 2 runs against 8
    (target,) = advise(baseline, {METRIC: effect})
    span = next(s for s in target.spans if s.steps == (21, 30))
    assert span.golden is not None and span.golden.k == 8
    assert span.paired == Design("paired", f"{METRIC}[paired 21-30]", 1, one_seed)
    assert span.cheapest == span.paired and span.paired.runs == 2
    # the early and middle windows have no paired gate: the advice for anywhere falls back on golden
    assert target.overall("paired") is None and target.advised is not None and target.advised.kind == "golden"


def test_a_target_out_of_reach_and_a_case_without_targets_say_so(golden_only: Baseline) -> None:
    (target,) = advise(golden_only, {METRIC: 1e-9})
    assert all(s.golden is None for s in target.spans) and target.advised is None
    assert target.unreached == target.spans
    lines = design_rows([target], paired=False)
    early = _mde(golden_only, f"{METRIC}[pooled 1-10]", 8)
    assert lines[-1].startswith(f"- advised for {METRIC} 1e-09 where it can be reached: no design; over steps 1-10 "
                                "no design up to 8 replicates or seeds per side reaches it (closest: "
                                f"`{METRIC}[pooled 1-10]` ±{early:.3g} at K=8)")
    assert "— (beyond K=8) | — (no `paired:` section) | out of reach |" in lines[4]
    (none,) = design_rows([], paired=False)
    assert none.startswith("Design per detection target: none declared; add `detect: {metric: effect}`")
    (unknown,) = advise(golden_only, {"entropy": 0.1})
    assert unknown.spans == () and "no gate on entropy" in design_rows([unknown], paired=False)[4]


def test_the_table_names_each_span_its_gate_k_and_runs(golden_only: Baseline) -> None:
    late = f"{METRIC}[pooled 21-30]"
    effect = _mde(golden_only, late, 4) * 1.001
    lines = design_rows(advise(golden_only, {METRIC: effect}), paired=False)
    assert lines[2] == "| target | acts over | golden | paired | cheapest |"
    row = next(line for line in lines if "| steps 21-30 |" in line)
    assert f"`{late}` K=4: ±{_mde(golden_only, late, 4):.3g}" in row and row.endswith("| golden K=4 (4 runs) |")
    assert lines[-1] == (f"- advised for {METRIC} {effect:g} wherever it acts: **golden K=4 (4 runs)** a verdict "
                         f"(its hardest gate `{late}` ±{_mde(golden_only, late, 4):.3g})")


def test_a_window_out_of_reach_is_named_and_the_design_covers_the_others(golden_only: Baseline) -> None:
    late, middle = f"{METRIC}[pooled 21-30]", f"{METRIC}[pooled 11-20]"
    assert _mde(golden_only, middle, 8) < _mde(golden_only, late, 8)  # the late third is the noisiest
    effect = (_mde(golden_only, middle, 8) + _mde(golden_only, late, 8)) / 2
    (target,) = advise(golden_only, {METRIC: effect})
    assert [s.steps for s in target.unreached] == [(21, 30)]
    assert target.unreached[0].closest == Design("golden", late, 8, _mde(golden_only, late, 8))
    k = next(k for k in REPLICATES if _mde(golden_only, middle, k) <= effect)
    advised = target.advised
    assert advised == Design("golden", middle, k, _mde(golden_only, middle, k))  # the hardest window still reached
    line = design_rows([target], paired=False)[-1]
    assert line.startswith(f"- advised for {METRIC} {effect:g} where it can be reached: **golden K={k} ({k} runs)**")
    assert f"; over steps 21-30 no design up to 8 replicates or seeds per side reaches it (closest: `{late}`" in line
