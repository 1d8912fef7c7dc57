"""The power table's A/B part: each paired gate's MDE and threshold by seeds per side, from the paired: section."""

from __future__ import annotations

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
    one, four = (paired_mde(spec, windows[0], k) for k in (1, 4))
    assert f"±{one:.3g} ({paired_threshold(spec, windows[0], 1):.3g})" in row and f"±{four:.3g}" in row
    assert four < one and lines[5].startswith("| `entropy/mean[paired 31-45]` | 0.1 | ")
