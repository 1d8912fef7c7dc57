"""One PNG per checked metric: x = real step, golden and current series, threshold band, breaches marked.

For a replicate mean, each replicate is drawn thinly under the mean (the series that was judged).
What a picture shows is computed first, as plain data (:class:`MetricPlot`), then drawn by a :class:`Drawer`;
``autotest.report.plot_worker`` writes a report's plots, with a second process drawing some of them where a
core is idle."""

from __future__ import annotations

import io
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from autotest.files import write_bytes_atomic
from autotest.judge.model import CheckResult, Verdict
from autotest.judge.trace import Trace
from autotest.scopes import find

Series = tuple[list[int], list[float]]


def plot_name(metric: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", metric).strip("_") + ".png"


@dataclass(frozen=True)
class Layer:
    """One check's marks, drawn in the check's order: a band around the golden series (``band``) or a
    horizontal threshold line (``line``), then its breached points (``breaches``)."""

    label: str
    band: tuple[list[int], list[float], list[float]] | None = None
    line: float | None = None
    breaches: Series | None = None
    breach_label: str = ""


@dataclass(frozen=True)
class MetricPlot:
    """Everything one metric's picture shows, as plain data (a plot worker receives it pickled)."""

    metric: str
    file_name: str
    title: str
    golden: Series | None
    golden_label: str
    replicates: tuple[tuple[str, Series], ...]
    current: Series | None
    current_points: int  # logged steps, non-finite ones included: many points are drawn without markers
    current_label: str
    layers: tuple[Layer, ...]


def _band(result: CheckResult, golden: list[float]) -> tuple[list[float], list[float]] | None:
    t = result.threshold
    kind = find(result.scope)
    if t is None or not golden or (kind is not None and not kind.plots_band):
        return None  # a pooled threshold bounds a mean in noise units, a slope's a growth per step: not a band
    if result.method == "absolute":
        return [g - t for g in golden], [g + t for g in golden]
    if result.method == "relative":
        return [g - abs(g) * t for g in golden], [g + abs(g) * t for g in golden]
    if result.method == "slowdown":
        return list(golden), [g + t for g in golden]
    return None


def _finite(series) -> Series:
    finite = [(s, v) for s, v in (series or {}).items() if math.isfinite(v)]
    return [s for s, _ in finite], [v for _, v in finite]


def metric_plots(verdict: Verdict, golden: Trace, current: Trace,
                 replicates: Sequence[tuple[str, Trace]] = ()) -> list[MetricPlot]:
    """What the plot of every checked metric shows, in the order of the verdict's checks."""
    by_metric: dict[str, list[CheckResult]] = {}
    for r in verdict.results:
        if r.kind == "metric" and r.metric:
            by_metric.setdefault(r.metric, []).append(r)
    plots = []
    for metric, results in by_metric.items():
        cur = current.get(metric) or {}
        gold = golden.get(metric) or {}
        layers = []
        for r in results:
            points = [p for p in r.points if p.baseline is not None and math.isfinite(p.baseline)]
            band = _band(r, [p.baseline for p in points])
            breached = [p for p in r.points if p.breached and p.current is not None and math.isfinite(p.current)]
            layer = Layer(label="", breach_label=f"breach ({r.status})",
                          breaches=([p.step for p in breached], [p.current for p in breached]) if breached else None)
            if band:
                layer = replace(layer, label=f"{r.method} {r.operator} {r.threshold:g} ({r.scope})",
                                band=([p.step for p in points], *band))
            elif r.method == "value" and r.threshold is not None:
                layer = replace(layer, label=f"value {r.operator} {r.threshold:g}", line=r.threshold)
            layers.append(layer)
        role = verdict.metric_roles.get(metric)
        status = "/".join(sorted({r.status for r in results}))
        plots.append(MetricPlot(
            metric=metric, file_name=plot_name(metric),
            title=f"{metric}{f' ({role})' if role else ''} — {status}",
            golden=(list(gold), list(gold.values())) if gold else None,
            golden_label=f"golden ({Path(golden.source.split(' ')[0]).name})",
            replicates=tuple((label, _finite(trace.get(metric))) for label, trace in replicates),
            current=_finite(cur) if cur else None, current_points=len(cur),
            current_label=f"mean of {len(replicates)} replicates" if replicates else "current",
            layers=tuple(layers)))
    return plots


class Drawer:
    """One figure with one axes on an Agg canvas, emptied and redrawn for every plot: no pyplot (a caller's
    figures and backend are left alone), one renderer (text measured for one plot is cached for the next) and
    one set of tick objects (making them is a large part of a fresh plot's cost). The pictures are pixel for
    pixel those of a fresh figure per metric (tests/unit/report/test_plots.py)."""

    def __init__(self) -> None:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure

        self.figure = Figure(figsize=(7, 3.6), dpi=90)
        FigureCanvasAgg(self.figure)
        self.axes = self.figure.add_subplot()
        self.margins = {side: getattr(self.figure.subplotpars, side) for side in ("left", "bottom", "right", "top")}

    def draw(self, plot: MetricPlot, plots_dir: Path) -> None:
        """Write ``plots_dir/<plot.file_name>``."""
        fig, ax = self.figure, self.axes
        _empty(ax)
        fig.subplots_adjust(**self.margins)  # each plot's tight layout starts where a fresh figure's would
        _draw_metric(ax, plot)
        fig.tight_layout()
        # tight_layout leaves a placeholder layout engine behind, which makes savefig lay the figure out
        # a second time for nothing; without it the picture is the same
        fig.set_layout_engine(None)
        write_bytes_atomic(plots_dir / plot.file_name, _png(fig))

    def close(self) -> None:
        self.figure.clear()


def _empty(ax) -> None:
    """Take the previous metric's series, bands, markers and legend off the axes; the limits autoscale to the
    next metric's data alone (the title is replaced, the grid and label set again)."""
    for artist in [*ax.lines, *ax.collections, *ax.patches, *ax.texts]:
        artist.remove()
    if ax.legend_ is not None:
        ax.legend_.remove()
    ax.relim()
    ax.autoscale(True)


def _draw_metric(ax, plot: MetricPlot) -> None:
    if plot.golden:
        steps, values = plot.golden
        ax.plot(steps, values, "o-" if len(steps) < 30 else "-", color="tab:blue", label=plot.golden_label,
                markersize=3)
    for label, (steps, values) in plot.replicates:
        ax.plot(steps, values, "-", color="tab:gray", linewidth=0.7, alpha=0.6, label=label)
    if plot.current:
        steps, values = plot.current
        # the marker follows the number of logged steps, non-finite ones included
        ax.plot(steps, values, "s-" if plot.current_points < 30 else "-", color="tab:orange",
                label=plot.current_label, markersize=3)
    for layer in plot.layers:
        if layer.band:
            steps, low, high = layer.band
            ax.fill_between(steps, low, high, color="tab:blue", alpha=0.15, label=layer.label)
        elif layer.line is not None:
            ax.axhline(layer.line, color="tab:red", linestyle="--", linewidth=1, label=layer.label)
        if layer.breaches:
            steps, values = layer.breaches
            ax.scatter(steps, values, color="red", zorder=5, marker="x", s=40, label=layer.breach_label)
    ax.set_title(plot.title, fontsize=9)
    ax.set_xlabel("step")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="best")


def _png(fig) -> bytes:
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png")
    return buffer.getvalue()
