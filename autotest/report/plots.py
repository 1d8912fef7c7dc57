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
from autotest.judge.model import ERROR, FAIL, PASS, CheckResult, Verdict
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
    #: a log y-axis: the series sit in the bottom hundredth of a linear axis that also holds the bands and lines
    #: (a 1e-14 mismatch under a 1.5e-11 threshold would be a flat line at zero)
    log_y: bool = False


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
            layer = Layer(label="", breach_label=f"breach of {_check_name(r)} (check {r.status})",
                          breaches=([p.step for p in breached], [p.current for p in breached]) if breached else None)
            if band:
                layer = replace(layer, label=f"{r.method} {r.operator} {r.threshold:g} ({r.scope})",
                                band=([p.step for p in points], *band))
            elif r.method == "value" and r.threshold is not None:
                layer = replace(layer, label=f"value {r.operator} {r.threshold:g}", line=r.threshold)
            layers.append(layer)
        role = verdict.metric_roles.get(metric)
        plot = MetricPlot(
            metric=metric, file_name=plot_name(metric),
            title=f"{metric}{f' ({role})' if role else ''} — {_headline(results)}",
            golden=(list(gold), list(gold.values())) if gold else None,
            golden_label=f"golden ({Path(golden.source.split(' ')[0]).name})",
            replicates=tuple((label, _finite(trace.get(metric))) for label, trace in replicates),
            current=_finite(cur) if cur else None, current_points=len(cur),
            current_label=f"mean of {len(replicates)} replicates" if replicates else "current",
            layers=tuple(layers))
        plots.append(replace(plot, log_y=_squashed(plot)))
    return plots


def _check_name(result: CheckResult) -> str:
    """The check's own name within its metric: ``percentile`` of ``m[percentile]``, else the whole id."""
    name = result.check_id
    if result.metric and name.startswith(f"{result.metric}[") and name.endswith("]"):
        return name[len(result.metric) + 1:-1]
    return name


def _headline(results: Sequence[CheckResult]) -> str:
    """The metric's verdict as the run reads it: its gates decide (FAIL over ERROR over PASS); checks that do not
    gate (reference, shadow, non-blocking) are counted apart, never mixed into the status."""
    gates = [r for r in results if r.is_gate]
    others = len(results) - len(gates)
    statuses = {r.status for r in gates}
    status = next((s for s in (FAIL, ERROR) if s in statuses), PASS) if gates else "not gated"
    failing = sum(r.status == status for r in gates)
    line = f"{status} ({failing} of {len(gates)} gates)" if status in (FAIL, ERROR) and len(gates) > 1 else status
    if others:
        line += f"; {others} check{'s' if others > 1 else ''} not gating"
    return line


def _squashed(plot: MetricPlot) -> bool:
    """Whether the series would sit in the bottom hundredth of a linear axis: every value drawn is non-negative
    and the median series value is under 1% of the largest thing drawn (a band's top, a threshold line)."""
    series = [v for v in (*(plot.golden[1] if plot.golden else []), *(plot.current[1] if plot.current else []),
                          *(v for _, (_, values) in plot.replicates for v in values)) if math.isfinite(v)]
    drawn = list(series)
    for layer in plot.layers:
        if layer.band:
            drawn += [v for v in layer.band[2] if math.isfinite(v)]
        if layer.line is not None and math.isfinite(layer.line):
            drawn.append(layer.line)
    positive = sorted(v for v in series if v > 0)
    if not positive or any(v < 0 for v in series):
        return False
    return positive[len(positive) // 2] < 0.01 * max(drawn)


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
    ax.set_yscale("linear")
    ax.relim()
    ax.autoscale(True)


def _draw_metric(ax, plot: MetricPlot) -> None:
    floor = _log_floor(plot) if plot.log_y else None
    if floor is not None:
        from matplotlib.ticker import FuncFormatter, NullFormatter

        ax.set_yscale("log", nonpositive="mask")  # a zero is left out, never drawn at a made-up height
        # plain "1e-14" labels: the default 10^x ones go through mathtext, whose parser threads drawing
        # side by side (replicates publishing at once) would share
        ax.yaxis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:.0e}"))
        ax.yaxis.set_minor_formatter(NullFormatter())
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
            if floor is not None:  # a band reaching zero or below runs off the bottom of a log axis
                low = [max(v, floor) for v in low]
            ax.fill_between(steps, low, high, color="tab:blue", alpha=0.15, label=layer.label)
        elif layer.line is not None:
            ax.axhline(layer.line, color="tab:red", linestyle="--", linewidth=1, label=layer.label)
        if layer.breaches:
            steps, values = layer.breaches
            ax.scatter(steps, values, color="red", zorder=5, marker="x", s=40, label=layer.breach_label)
    ax.set_title(plot.title, fontsize=9)
    ax.set_xlabel("step")
    ax.grid(alpha=0.3)
    ax.set_ylabel("log scale" if floor is not None else "", fontsize=7)
    handles, labels = ax.get_legend_handles_labels()
    unique = dict(zip(labels, handles))  # one entry per label: a label drawn twice is named once
    ax.legend(list(unique.values()), list(unique), fontsize=7, loc="best")


def _log_floor(plot: MetricPlot) -> float | None:
    """A tenth of the smallest positive series value: where a band's low edge stops on a log axis."""
    values = [v for series in (plot.golden, plot.current) if series for v in series[1] if math.isfinite(v) and v > 0]
    return min(values) / 10 if values else None


def _png(fig) -> bytes:
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png")
    return buffer.getvalue()
