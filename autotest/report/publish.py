"""Publish a verdict, whatever the ending: results.json, report.md, plots and the CI step summary."""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from autotest.files import write_atomic
from autotest.judge.model import ERROR, CheckResult, Verdict, decide_status
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
            after_results: AfterResults | None = None, step_summary: bool = True) -> Published:
    """Render the verdict into ``out_dir``; every file is written atomically (``step_summary``: and append
    it to the CI step summary)."""
    out = Path(out_dir).resolve()
    out.mkdir(parents=True, exist_ok=True)
    plots: dict[str, str] = {}
    if with_plots and comparison.golden is not None and comparison.current is not None:
        plots = _draw(comparison, out)
    verdict = comparison.verdict
    results_json = write_results_json(verdict, out, {"plots": plots})
    try:
        history = list(after_results(out)) if after_results is not None else []
    except NotRecorded as exc:
        # the record was not written, so results.json may change: it says why (and the verdict, when strict)
        history = [f"not recorded in the run history: {exc.error}"]
        verdict = not_recorded_verdict(verdict, exc)
        results_json = write_results_json(verdict, out, {"plots": plots, "history": exc.to_dict()})
    report_md = out / "report.md"
    write_atomic(report_md, render_markdown(verdict, plots, history, folder=out))
    summary = step_summary and append_step_summary(render_step_summary(verdict, report_md, history))
    return Published(results_json, report_md, plots, summary, verdict)


def not_recorded_verdict(verdict: Verdict, exc: NotRecorded) -> Verdict:
    """The verdict of a run whose record failed: unchanged, or with an ERROR gate under --strict-history."""
    if not exc.strict:
        return verdict
    check = CheckResult(HISTORY_CHECK, ERROR, f"the verdict could not be recorded in the run history "
                        f"({exc.error}); --strict-history requires it: bring the history store back (or fix "
                        "--history / $RL_AUTOTEST_HISTORY) and rerun", kind="structural")
    results = (*verdict.results, check)
    return replace(verdict, results=results, status=decide_status(results))


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
