"""The plots of a tiny-grpo report: the same pictures as the reference images, breaches in red, no global state.

The reference images in tests/data/plots/tiny-grpo/ were drawn from a frozen tiny-grpo baseline
(tests/data/plots/tiny-grpo-baseline.yaml, so a recalibration does not move them); the reused-figure drawer was
checked pixel for pixel against the original one-pyplot-figure-per-metric drawer; a change that moves a pixel
fails here. After a deliberate change to the pictures, look at the new
ones and redraw the references:

    PYTHONPATH=. python tests/unit/report/test_plots.py --regen
"""

from __future__ import annotations

import re
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from autotest.inputs.baseline import load_baseline
from autotest.readers.reading import read_trace
from autotest.judge.verdict import Comparison, compare
from autotest.report.plot_worker import plot_checks
from autotest.report.plots import Drawer, Layer, MetricPlot, _squashed, metric_plots
from tests.helpers import DATA, FROZEN_TINY_GRPO_BASELINE, tiny_grpo_tracker

REFERENCE = DATA / "plots" / "tiny-grpo"
#: the matplotlib the references were drawn with: glyph rasterisation can move a pixel between releases
REFERENCE_MATPLOTLIB = "3.11.2"


def _comparison(tmp_path: Path) -> Comparison:
    return compare(load_baseline(FROZEN_TINY_GRPO_BASELINE),
                   read_trace(tiny_grpo_tracker(tmp_path / "tracker.jsonl")))


def _pixels(path: Path):
    from matplotlib.image import imread

    return imread(path)


def test_the_seven_plots_are_pixel_for_pixel_the_reference_pictures(tmp_path):
    import matplotlib
    import numpy as np

    if matplotlib.__version__ != REFERENCE_MATPLOTLIB:
        pytest.skip(f"the reference plots were drawn with matplotlib {REFERENCE_MATPLOTLIB}, this is "
                    f"{matplotlib.__version__}: redraw them (see this module's docstring)")
    comparison = _comparison(tmp_path)
    written = plot_checks(comparison.verdict, comparison.golden, comparison.current, tmp_path / "out")
    assert sorted(Path(p).name for p in written.values()) == sorted(p.name for p in REFERENCE.glob("*.png"))
    assert len(written) == 7
    for relative in written.values():
        drawn, reference = _pixels(tmp_path / "out" / relative), _pixels(REFERENCE / Path(relative).name)
        assert drawn.shape == reference.shape, relative
        differing = int(np.any(drawn != reference, axis=-1).sum())
        assert differing == 0, f"{relative}: {differing} pixels differ from {REFERENCE / Path(relative).name}"


def _red_marks(path: Path) -> int:
    """Pixels of the breach markers' pure red (the series, bands and threshold lines are other colours)."""
    rgb = _pixels(path)[..., :3]
    return int(((rgb[..., 0] > 0.9) & (rgb[..., 1] < 0.1) & (rgb[..., 2] < 0.1)).sum())


def test_breached_metrics_carry_red_marks_and_clean_ones_none(tmp_path):
    comparison = _comparison(tmp_path)
    written = plot_checks(comparison.verdict, comparison.golden, comparison.current, tmp_path / "out")
    breached = {r.metric for r in comparison.verdict.results if r.kind == "metric" and r.scope != "pooled"
                and any(p.breached for p in r.points)}
    assert breached == {"response/rewards/mean", "mismatch/mismatch_k3_kl", "entropy/mean", "eval/greedy_accuracy"}
    for metric, relative in written.items():
        marks = _red_marks(tmp_path / "out" / relative)
        assert (marks > 20) == (metric in breached), f"{metric}: {marks} red pixels"


def test_drawing_leaves_no_pyplot_figure_and_keeps_the_callers_backend(tmp_path):
    """A user's pytest may hold its own figures or an interactive backend: the report draws off pyplot."""
    import matplotlib

    before = matplotlib.get_backend()
    matplotlib.use("svg")  # stands for a caller's own backend
    try:
        comparison = _comparison(tmp_path)
        plot_checks(comparison.verdict, comparison.golden, comparison.current, tmp_path / "out")
        assert matplotlib.get_backend() == "svg"
    finally:
        matplotlib.use(before)
    assert "matplotlib.pyplot" not in sys.modules or not sys.modules["matplotlib.pyplot"].get_fignums()


def _drawn(tmp_path: Path, plot: MetricPlot):
    drawer = Drawer()
    drawer.draw(plot, tmp_path)
    ax = drawer.axes
    return ax, [t.get_text() for t in ax.get_legend().get_texts()]


def test_a_mismatch_of_1e_14_under_a_1_5e_11_band_is_drawn_on_a_log_axis(tmp_path):
    steps = list(range(1, 46))
    golden = [1e-14 * (1 + 0.1 * (s % 5)) for s in steps]
    plot = MetricPlot(metric="mismatch/k3", file_name="k3.png", title="k3", golden=(steps, golden),
                      golden_label="golden", replicates=(), current=(steps, [2 * g for g in golden]),
                      current_points=45, current_label="current",
                      layers=(Layer(label="absolute <= 1.5e-11", band=(steps, [g - 1.5e-11 for g in golden],
                                                                       [g + 1.5e-11 for g in golden])),))
    plot = replace(plot, log_y=_squashed(plot))
    assert plot.log_y
    ax, _ = _drawn(tmp_path, plot)
    low, high = ax.get_ylim()
    assert ax.get_yscale() == "log"
    assert low < 1e-14 and high > 1.5e-11  # the curves and the band's top both inside the axis
    assert low > 0
    labels = [t.get_text() for t in ax.get_yticklabels() if t.get_text()]
    assert labels and not any("$" in label for label in labels), labels  # plain text, never mathtext


def test_the_tiny_grpo_figures_name_each_check_once_and_read_the_verdict(tmp_path):
    comparison = _comparison(tmp_path)
    plots = {p.metric: p for p in metric_plots(comparison.verdict, comparison.golden, comparison.current)}
    scales = {}
    for metric, plot in plots.items():
        ax, labels = _drawn(tmp_path, plot)
        scales[metric] = ax.get_yscale()
        assert len(labels) == len(set(labels)), f"{metric}: {labels}"
        breaches = [label for label in labels if label.startswith("breach")]
        assert all(re.fullmatch(r"breach of \S.* \(check (PASS|FAIL|ERROR|INFO)\)", b) for b in breaches), breaches
        title = ax.get_title()
        assert title == plot.title and "/" not in title.split(" — ")[1], title
        assert re.fullmatch(r"(PASS|FAIL|ERROR|not gated)( \(\d+ of \d+ gates\))?(; \d+ checks? not gating)?",
                            title.split(" — ")[1]), title
    assert scales["mismatch/mismatch_k3_kl"] == "log"
    assert {m for m, scale in scales.items() if scale == "log"} == {"mismatch/mismatch_k3_kl"}
    _, labels = _drawn(tmp_path, plots["response/rewards/mean"])
    assert "breach of percentile (check FAIL)" in labels and "breach of pooled 31-45 (check FAIL)" in labels
    assert plots["response/rewards/mean"].title.endswith("— FAIL (2 of 4 gates); 1 check not gating")
    assert plots["eval/accuracy"].title.split(" — ")[1] == "PASS"


def _regenerate() -> None:
    import shutil
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        comparison = _comparison(Path(tmp))
        written = plot_checks(comparison.verdict, comparison.golden, comparison.current, Path(tmp) / "out")
        shutil.rmtree(REFERENCE, ignore_errors=True)
        REFERENCE.mkdir(parents=True)
        for relative in written.values():
            shutil.copyfile(Path(tmp) / "out" / relative, REFERENCE / Path(relative).name)
    print(f"redrew {len(written)} reference plots into {REFERENCE}")


if __name__ == "__main__" and sys.argv[1:] == ["--regen"]:
    _regenerate()
