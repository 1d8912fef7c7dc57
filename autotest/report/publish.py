"""Publish a verdict, whatever the ending: results.json, report.md, plots and the CI step summary."""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from autotest.files import write_atomic
from autotest.judge.verdict import Comparison
from autotest.report.markdown import (
    append_step_summary,
    render_markdown,
    render_step_summary,
    write_results_json,
)
from autotest.report.plots import plot_checks


@dataclass(frozen=True)
class Published:
    results_json: Path
    report_md: Path
    plots: dict[str, str]
    step_summary_written: bool


#: called once results.json is written (e.g. to record the run in the history); returns lines for the report
AfterResults = Callable[[Path], Sequence[str]]


def publish(comparison: Comparison, out_dir: str | Path, *, with_plots: bool = True,
            after_results: AfterResults | None = None, step_summary: bool = True) -> Published:
    """Render the verdict into ``out_dir``; every file is written atomically (``step_summary``: and append
    it to the CI step summary)."""
    out = Path(out_dir).resolve()
    out.mkdir(parents=True, exist_ok=True)
    plots: dict[str, str] = {}
    if with_plots and comparison.golden is not None and comparison.current is not None:
        plots = _draw(comparison, out)
    results_json = write_results_json(comparison.verdict, out, {"plots": plots})
    history = list(after_results(out)) if after_results is not None else []
    report_md = out / "report.md"
    write_atomic(report_md, render_markdown(comparison.verdict, plots, history, folder=out))
    summary = step_summary and append_step_summary(render_step_summary(comparison.verdict, report_md, history))
    return Published(results_json, report_md, plots, summary)


def _draw(comparison: Comparison, out: Path) -> dict[str, str]:
    """The plots; a plotting problem is noted in the report and never fails the run (or a user's pytest)."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # e.g. "No artists with labels found" on a run with no rows
            return plot_checks(comparison.verdict, comparison.golden, comparison.current, out,
                               replicates=comparison.replicate_traces)
    except Exception as exc:  # noqa: BLE001 - the verdict stands without its pictures
        comparison.verdict.context["plots_error"] = f"plots not drawn: {type(exc).__name__}: {exc}"
        return {}
