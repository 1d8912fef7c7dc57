"""Publish a verdict, whatever the ending: results.json, report.md, plots and the CI step summary.

A full or read-only disk never costs the verdict: every file is written whole or not at all
(:mod:`autotest.files`); results.json failing stops publishing (no report.md without its record) and raises
:class:`~autotest.errors.WriteFailed`; a plot or the step summary failing is noted in ``Published.unsaved``
(and the plots' in results.json), and the rest is still written.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from autotest.errors import WriteFailed
from autotest.files import make_folder, write_atomic
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
    #: one "cannot write <path>: <error>; <advice>" line per file that could not be written
    unsaved: tuple[str, ...] = ()


#: called once results.json is written (e.g. to record the run in the history); returns lines for the report
AfterResults = Callable[[Path], Sequence[str]]


def publish(comparison: Comparison, out_dir: str | Path, *, with_plots: bool = True,
            after_results: AfterResults | None = None, step_summary: bool = True) -> Published:
    """Render the verdict into ``out_dir``; every file is written atomically (``step_summary``: and append
    it to the CI step summary). Raises :class:`WriteFailed` when results.json or report.md cannot be written."""
    out = make_folder(Path(out_dir).resolve())
    plots: dict[str, str] = {}
    unsaved: list[str] = []
    if with_plots and comparison.golden is not None and comparison.current is not None:
        plots, lost = _draw(comparison, out)
        unsaved += lost
    results_json = write_results_json(comparison.verdict, out, {"plots": plots})
    history = list(after_results(out)) if after_results is not None else []
    report_md = out / "report.md"
    write_atomic(report_md, render_markdown(comparison.verdict, plots, history, folder=out))
    summary = False
    if step_summary:
        try:
            summary = append_step_summary(render_step_summary(comparison.verdict, report_md, history))
        except WriteFailed as exc:
            unsaved.append(f"step summary: {exc}")
    return Published(results_json, report_md, plots, summary, tuple(unsaved))


def publish_noting_unsaved(comparison: Comparison, out_dir: str | Path, *, lost: Sequence[str] = (),
                           **options) -> tuple[Published | None, tuple[str, ...]]:
    """:func:`publish`, never losing the verdict to a full or read-only disk: what was published (None when
    results.json or report.md could not be written) and the lines naming what could not be written (``lost``
    earlier, e.g. the tracker copy, then publish's own), recorded in results.json as ``context.unsaved``
    when that file could still be written."""
    unsaved = [*comparison.verdict.context.get("unsaved", ()), *lost]
    if unsaved:
        comparison.verdict.context["unsaved"] = unsaved
    try:
        published = publish(comparison, out_dir, **options)
    except WriteFailed as exc:
        return None, (*unsaved, str(exc))
    return published, (*unsaved, *published.unsaved)


def _draw(comparison: Comparison, out: Path) -> tuple[dict[str, str], list[str]]:
    """The plots, and the plot file that could not be written (if any); a plotting problem is noted in the
    report and never fails the run (or a user's pytest)."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # e.g. "No artists with labels found" on a run with no rows
            return plot_checks(comparison.verdict, comparison.golden, comparison.current, out,
                               replicates=comparison.replicate_traces), []
    except WriteFailed as exc:  # a full disk: the verdict's files are still tried (they are far smaller)
        comparison.verdict.context["plots_error"] = f"plots not drawn: {exc}"
        return {}, [str(exc)]
    except Exception as exc:  # noqa: BLE001 - the verdict stands without its pictures
        comparison.verdict.context["plots_error"] = f"plots not drawn: {type(exc).__name__}: {exc}"
        return {}, []
