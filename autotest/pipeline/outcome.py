"""What one run of a case answers (:class:`CaseRun`), and the endings every run publishes the same way.

Shared by the single run (:mod:`autotest.pipeline.single`) and the replicates (:mod:`autotest.pipeline.replicated`):
a comparison saved into its results folder, the harness's own traceback kept in ``logs/``, and the run's outcome
read off its verdict. What a run is asked is :mod:`autotest.pipeline.options`.
"""

from __future__ import annotations

import traceback
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Sequence

from autotest.errors import WriteFailed
from autotest.files import write_atomic
from autotest.inputs.case import Case
from autotest.judge.model import PASS, Verdict
from autotest.judge.power import PowerAsk, cost_and_power_phrase
from autotest.judge.verdict import Comparison
from autotest.pipeline.options import JudgeOptions, PublishOptions
from autotest.report.markdown import kind_phrase, relaunch_phrase
from autotest.report.publish import publish

SKIP = "SKIP"
DRY_RUN = "DRY-RUN"


@dataclass(frozen=True)
class CaseRun:
    """The outcome of one case: a verdict, or why it was skipped / only shown."""

    case: str
    status: str  # PASS / FAIL / ERROR / SKIP / DRY-RUN
    results_dir: Path | None
    reason: str = ""
    verdict: Verdict | None = None
    card: str = ""
    command_line: str = ""
    consistency_request: Path | None = None
    #: one "kind (signature)" per relaunch before this verdict; a verdict after a relaunch says so
    relaunches: tuple[str, ...] = ()
    #: how many seeds ran (the verdict judged their mean when more than one)
    replicates: int = 1
    #: one line per results file that could not be written (a full or read-only disk): the verdict above
    #: stands, but its results folder is incomplete (the shells exit 2)
    unsaved: tuple[str, ...] = ()
    #: a dry run's preflight problems (a baseline that cannot be loaded, missing inputs): the run would not start
    problems: tuple[str, ...] = ()

    @property
    def report(self) -> Path | None:
        return self.results_dir / "report.md" if self.results_dir else None

    def summary_line(self) -> str:
        report = self.report if self.verdict is not None else None
        where = f" (report: {report})" if report and not (self.unsaved and not report.is_file()) else ""
        reason = f" — {self.reason}" if self.reason else ""
        mean = f" (mean of {self.replicates} replicates)" if self.replicates > 1 and self.verdict is not None else ""
        phrase = cost_and_power_phrase(self.verdict) if self.verdict is not None else ""
        power = f" — {phrase}" if phrase else ""
        lost = ""
        if self.unsaved:
            more = f" (and {len(self.unsaved) - 1} more)" if len(self.unsaved) > 1 else ""
            lost = f" — results not saved: {self.unsaved[0]}{more}"
        kind = kind_phrase(self.verdict) if self.verdict is not None else ""
        spec = self.verdict.framework_spec if self.verdict is not None else None
        spec_phrase = f" — {spec.headline()}" if spec is not None else ""
        return (f"{self.case}: {self.status}{relaunch_phrase(self.relaunches)}{mean}{kind}{power}{reason}"
                f"{spec_phrase}{lost}{where}")


def harness_error_log(results_dir: Path, exc: BaseException) -> str:
    """Where the traceback went (or why it could not be written: the verdict still names the failure)."""
    log = results_dir / "logs" / "harness_error.log"
    try:
        write_atomic(log, "".join(traceback.format_exception(exc)))
    except WriteFailed as lost:
        return f"not saved: {lost}"
    return str(log)


def save(comparison: Comparison, folder: Path, options: PublishOptions,
         lost: Sequence[str] = ()) -> tuple[Verdict, tuple[str, ...]]:
    """Publish into ``folder``; the verdict as published (ERROR under --strict-history when the history could
    not record it) and the lines naming what a full or read-only disk kept from being written."""
    published = publish(comparison, folder, lost=lost, with_plots=options.with_plots,
                        after_results=options.after_results, step_summary=options.step_summary)
    return published.verdict or comparison.verdict, published.unsaved


def power_ask(case: Case, options: JudgeOptions) -> PowerAsk:
    """What the verdict must say about the case's gates catching its declared ``detect`` targets."""
    return PowerAsk(targets=case.detect, strict=options.strict_power)


def finished(shown: CaseRun, verdict: Verdict, **more: Any) -> CaseRun:
    """``shown`` (the run's card and folder) ending in ``verdict``: its status, and the primary triage
    suggestion as the reason when it did not pass."""
    primary = next((f.next_step for f in verdict.triage if f.primary), "")
    return replace(shown, status=verdict.status, reason=primary if verdict.status != PASS else "", verdict=verdict,
                   **more)
