"""The power table's A/B part: each paired gate's MDE and threshold by seeds per side, from the paired: section."""

from __future__ import annotations

import pytest

from autotest.inputs.baseline_model import PairedSpec, PairedWindow
from autotest.judge.paired import paired_mde, paired_threshold
from autotest.report.power_table import paired_power_rows


def test_without_a_paired_section_it_says_how_to_measure_one() -> None:
    (line,) = paired_power_rows(None)
    assert "no `paired:` section" in line and "rl-autotest calibrate CASE --paired" in line


def test_each_window_shows_its_mde_narrowing_with_seeds() -> None:
    windows = (PairedWindow("response/rewards/mean", 1, 15, 0.02, 0.5), PairedWindow("entropy/mean", 31, 45, 0.1, 2.0))
    spec = PairedSpec(pairs=10, perturbation="RL_AUTOTEST_AA_PERTURB=1", windows=windows)
    lines = paired_power_rows(spec, seeds=(1, 4))
    assert lines[0].startswith("Paired (A/B) gates: head minus base on the same seeds, from 10 A/A pairs "
                               "(RL_AUTOTEST_AA_PERTURB=1)")
    assert lines[2] == "| gate | noise (one seed) | seeds=1 | seeds=4 |"
    row = lines[4]
    assert row.startswith("| `response/rewards/mean[paired 1-15]` | 0.02 | ")
    # closed form, not the functions the table calls: two windows share the 5% budget, so each gate's threshold is
    # t(1 - 0.025/2, dof = 10 pairs) = 2.63377 (scipy.stats.t.ppf) x noise / sqrt(K), above the floor 1% x 0.5;
    # the MDE adds z(0.8) = 0.841621 x noise / sqrt(K): K=1 0.0526753 and 0.0695077, K=4 0.0347539
    assert "±0.0695 (0.0527)" in row and "±0.0348 (0.0263)" in row
    assert paired_mde(spec, windows[0], 4) == pytest.approx(0.0263377 + 0.841621 * 0.01, rel=1e-5)
    assert paired_threshold(spec, windows[0], 1) == pytest.approx(2.63377 * 0.02, rel=1e-5)
    assert lines[5].startswith("| `entropy/mean[paired 31-45]` | 0.1 | ")


def test_report_md_states_the_cost_and_its_quantity_beside_each_gates_mde() -> None:
    from autotest.judge.model import FAIL, PASS, CheckResult, Verdict
    from autotest.report.cost import run_cost
    from autotest.report.power_table import cost_and_power_section

    gate = CheckResult("r[pooled 1-15]", PASS, "ok", metric="r", method="abs", mde=0.0412, mde_share=0.08,
                       mde_steps=(1, 15))
    verdict = Verdict(PASS, "c", (gate,), context={"cost": run_cost(8, 100.0, {}).to_dict()})
    lines = cost_and_power_section(verdict)
    assert lines[0].endswith("80% power, K=1) and its cost")
    assert "Cost: **800.0 GPU-s** (GPU-seconds: wall 100.0 s x 8 GPUs)" in lines
    # the steps the MDE holds over, beside it: a change acting on fewer of them is diluted
    assert "| `r[pooled 1-15]` | over steps 1-15 | ±0.0412 | 8% |" in lines
    assert lines[4:6] == ["| gate | a shift held | MDE | share of golden |", "|---|---|---|---|"]
    # a FAIL (no gate with an MDE) still states its cost; a verdict with neither has no section
    failed = cost_and_power_section(Verdict(FAIL, "c", (), context={"cost": run_cost(0, 9.0, {}, cpu_s=3.0).to_dict()}))
    assert failed[0] == "## What this run cost (no gate with a minimum detectable effect)"
    assert failed[2].startswith("Cost: **3.0 CPU-s** (CPU-seconds: ") and failed[3:] == [""]
    assert cost_and_power_section(Verdict(FAIL, "c", ())) == []
