"""Publish a verdict, whatever the ending: results.json, report.md, plots and the CI step summary.

A full or read-only disk never costs the verdict (it is returned, and the shells print it): every file is
written whole or not at all (:mod:`autotest.files`); results.json failing stops publishing (no report.md
without its record); a plot or the step summary failing leaves the rest written. Each file that could not
be written is one line in ``Published.unsaved``, recorded in results.json when that could still be written.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from autotest.errors import WriteFailed
from autotest.files import make_folder, write_atomic
from autotest.judge.model import ERROR, CheckResult, Verdict, decide_status
from autotest.judge.verdict import Comparison
from autotest.report.markdown import (
    append_step_summary,
    render_markdown,
    render_step_summary,
    write_results_json,
)
from autotest.report.plot_worker import plot_checks


@dataclass(frozen=True)
class Published:
    #: None when the disk refused it (then ``unsaved`` says why)
    results_json: Path | None
    report_md: Path | None
    plots: dict[str, str]
    step_summary_written: bool
    #: one "cannot write <path>: <error>; <advice>" line per file that could not be written
    unsaved: tuple[str, ...] = ()
    #: the verdict as published (an ERROR under --strict-history when the run could not be recorded)
    verdict: Verdict | None = None


#: called once results.json is written (e.g. to record the run in the history); returns lines for the report
AfterResults = Callable[[Path], Sequence[str]]

#: the check a verdict gains when its run could not be recorded and the record was required
HISTORY_CHECK = "history[recorded]"


class NotRecorded(Exception):
    """Raised by an :data:`AfterResults` hook whose record could not be written (the history store is down or
    misplaced). results.json says so (``history: {recorded: false, error}``); ``strict`` (--strict-history)
    adds an ERROR gate, so a PASS becomes ERROR (a FAIL stays FAIL: the regression is the news)."""

    def __init__(self, error: str, *, url: str | None = None, strict: bool = False) -> None:
        super().__init__(error)
        self.error, self.url, self.strict = error, url, strict

    def to_dict(self) -> dict:
        return {"recorded": False, "error": self.error, "url": self.url, "strict": self.strict}


def publish(comparison: Comparison, out_dir: str | Path, *, with_plots: bool = True,
            after_results: AfterResults | None = None, step_summary: bool = True,
            lost: Sequence[str] = ()) -> Published:
    """Render the verdict into ``out_dir``; every file is written atomically (``step_summary``: and append
    it to the CI step summary). ``lost``: files of this run that could not be written before (the tracker
    copy, say), reported with publish's own in ``unsaved``."""
    unsaved = [*comparison.verdict.context.get("unsaved", ()), *lost]
    plots: dict[str, str] = {}
    results_json: Path | None = None
    report_md: Path | None = None
    history: list[str] = []
    verdict = comparison.verdict
    try:
        out = make_folder(Path(out_dir).resolve())
        if with_plots and comparison.golden is not None and comparison.current is not None:
            plots = _draw(comparison, out, unsaved)
        if unsaved:
            comparison.verdict.context["unsaved"] = list(unsaved)
        results_json = write_results_json(verdict, out, {"plots": plots})
        try:
            history = list(after_results(out)) if after_results is not None else []
        except NotRecorded as exc:
            # the record was not written, so results.json may change: it says why (and the verdict, when strict)
            history = [f"not recorded in the run history: {exc.error}"]
            verdict = not_recorded_verdict(verdict, exc)
            results_json = write_results_json(verdict, out, {"plots": plots, "history": exc.to_dict()})
        write_atomic(out / "report.md", render_markdown(verdict, plots, history, folder=out))
        report_md = out / "report.md"
    except WriteFailed as exc:  # no report.md without its results.json; the step summary still gets the verdict
        unsaved.append(str(exc))
    summary = False
    if step_summary:
        notes = [*history, *(f"not saved: {line}" for line in unsaved)]
        try:
            summary = append_step_summary(render_step_summary(verdict, report_md, notes))
        except WriteFailed as exc:
            unsaved.append(f"step summary: {exc}")
    return Published(results_json, report_md, plots, summary, tuple(unsaved), verdict)


def not_recorded_verdict(verdict: Verdict, exc: NotRecorded) -> Verdict:
    """The verdict of a run whose record failed: unchanged, or with an ERROR gate under --strict-history."""
    if not exc.strict:
        return verdict
    check = CheckResult(HISTORY_CHECK, ERROR, f"the verdict could not be recorded in the run history "
                        f"({exc.error}); --strict-history requires it: bring the history store back (or fix "
                        "--history / $RL_AUTOTEST_HISTORY) and rerun", kind="structural")
    results = (*verdict.results, check)
    return replace(verdict, results=results, status=decide_status(results))


def _draw(comparison: Comparison, out: Path, unsaved: list[str]) -> dict[str, str]:
    """The plots; a plotting problem is noted in the report and never fails the run (or a user's pytest);
    a plot the disk refused is also added to ``unsaved``."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # e.g. "No artists with labels found" on a run with no rows
            return plot_checks(comparison.verdict, comparison.golden, comparison.current, out,
                               replicates=comparison.replicate_traces)
    except WriteFailed as exc:  # a full disk: the verdict's files are still tried (they are far smaller)
        comparison.verdict.context["plots_error"] = f"plots not drawn: {exc}"
        unsaved.append(str(exc))
        return {}
    except Exception as exc:  # noqa: BLE001 - the verdict stands without its pictures
        comparison.verdict.context["plots_error"] = f"plots not drawn: {type(exc).__name__}: {exc}"
        return {}
