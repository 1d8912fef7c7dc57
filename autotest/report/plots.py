"""One PNG per checked metric: x = real step, golden and current series, threshold band, breaches marked.

For a replicate mean, each replicate is drawn thinly under the mean (the series that was judged)."""

from __future__ import annotations

import io
import math
import re
from collections.abc import Sequence
from pathlib import Path

from autotest.files import make_folder, write_bytes_atomic
from autotest.judge.model import CheckResult, Verdict
from autotest.judge.trace import Trace


def plot_name(metric: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", metric).strip("_") + ".png"


def _band(result: CheckResult, steps: list[int], golden: list[float]) -> tuple[list[float], list[float]] | None:
    t = result.threshold
    if t is None or not golden or result.scope == "pooled":
        return None  # a pooled threshold bounds a mean in noise units, not a band around each step
    if result.method == "absolute":
        return [g - t for g in golden], [g + t for g in golden]
    if result.method == "relative":
        return [g - abs(g) * t for g in golden], [g + abs(g) * t for g in golden]
    if result.method == "slowdown":
        return list(golden), [g + t for g in golden]
    return None


def plot_checks(verdict: Verdict, golden: Trace, current: Trace, out_dir: Path,
                replicates: Sequence[tuple[str, Trace]] = ()) -> dict[str, str]:
    """Write plots/<metric>.png for every metric check; returns metric -> path relative to out_dir.

    ``replicates``: (label, trace) of each replicate when ``current`` is their mean.

    One figure with one axes on an Agg canvas is emptied and redrawn for every metric: no pyplot (a caller's
    figures and backend are left alone), one renderer (text measured for one plot is cached for the next) and
    one set of tick objects (making them is a large part of a fresh plot's cost). The pictures are pixel for
    pixel those of a fresh figure per metric (tests/unit/report/test_plots.py)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    plots_dir = out_dir / "plots"
    make_folder(plots_dir)
    written: dict[str, str] = {}
    by_metric: dict[str, list[CheckResult]] = {}
    for r in verdict.results:
        if r.kind == "metric" and r.metric:
            by_metric.setdefault(r.metric, []).append(r)
    fig = Figure(figsize=(7, 3.6), dpi=90)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    margins = {side: getattr(fig.subplotpars, side) for side in ("left", "bottom", "right", "top")}
    try:
        for metric, results in by_metric.items():
            _empty(ax)
            fig.subplots_adjust(**margins)  # each plot's tight layout starts where a fresh figure's would
            _draw_metric(ax, metric, results, verdict, golden, current, replicates)
            fig.tight_layout()
            # tight_layout leaves a placeholder layout engine behind, which makes savefig lay the figure out
            # a second time for nothing; without it the picture is the same
            fig.set_layout_engine(None)
            name = plot_name(metric)
            write_bytes_atomic(plots_dir / name, _png(fig))
            written[metric] = f"plots/{name}"
    finally:
        fig.clear()
    return written


def _empty(ax) -> None:
    """Take the previous metric's series, bands, markers and legend off the axes; the limits autoscale to the
    next metric's data alone (the title is replaced, the grid and label set again)."""
    for artist in [*ax.lines, *ax.collections, *ax.patches, *ax.texts]:
        artist.remove()
    if ax.legend_ is not None:
        ax.legend_.remove()
    ax.relim()
    ax.autoscale(True)


def _draw_metric(ax, metric: str, results: list[CheckResult], verdict: Verdict, golden: Trace, current: Trace,
                 replicates: Sequence[tuple[str, Trace]]) -> None:
    cur = current.get(metric) or {}
    gold = golden.get(metric) or {}
    if gold:
        steps = list(gold)
        ax.plot(steps, list(gold.values()), "o-" if len(steps) < 30 else "-", color="tab:blue",
                label=f"golden ({Path(golden.source.split(' ')[0]).name})", markersize=3)
    for label, trace in replicates:
        finite = [(s, v) for s, v in (trace.get(metric) or {}).items() if math.isfinite(v)]
        ax.plot([s for s, _ in finite], [v for _, v in finite], "-", color="tab:gray", linewidth=0.7,
                alpha=0.6, label=label)
    if cur:
        finite = [(s, v) for s, v in cur.items() if math.isfinite(v)]
        ax.plot([s for s, _ in finite], [v for _, v in finite], "s-" if len(cur) < 30 else "-",
                color="tab:orange", label=f"mean of {len(replicates)} replicates" if replicates else "current",
                markersize=3)
    for r in results:
        points = [p for p in r.points if p.baseline is not None and math.isfinite(p.baseline)]
        band = _band(r, [p.step for p in points], [p.baseline for p in points])
        if band:
            ax.fill_between([p.step for p in points], band[0], band[1], color="tab:blue", alpha=0.15,
                            label=f"{r.method} {r.operator} {r.threshold:g} ({r.scope})")
        elif r.method == "value" and r.threshold is not None:
            ax.axhline(r.threshold, color="tab:red", linestyle="--", linewidth=1,
                       label=f"value {r.operator} {r.threshold:g}")
        breached = [p for p in r.points if p.breached and p.current is not None and math.isfinite(p.current)]
        if breached:
            ax.scatter([p.step for p in breached], [p.current for p in breached], color="red", zorder=5,
                       marker="x", s=40, label=f"breach ({r.status})")
    status = "/".join(sorted({r.status for r in results}))
    role = verdict.metric_roles.get(metric)
    ax.set_title(f"{metric}{f' ({role})' if role else ''} — {status}", fontsize=9)
    ax.set_xlabel("step")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="best")


def _png(fig) -> bytes:
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png")
    return buffer.getvalue()
