"""What one run of a case is asked (:class:`RunOptions`) and what it answers (:class:`CaseRun`).

Shared by the single run (:mod:`autotest.pipeline`) and the replicates (:mod:`autotest.run_replicates`),
with the endings both publish the same way: a comparison saved into its results folder, the harness's own
traceback kept in ``logs/``, and the run's outcome read off its verdict.
"""

from __future__ import annotations

import traceback
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Sequence

from autotest.errors import WriteFailed
from autotest.files import write_atomic
from autotest.inputs.case import Case
from autotest.judge.model import PASS, Verdict
from autotest.judge.power import PowerAsk, caught_phrase
from autotest.judge.verdict import Comparison
from autotest.report.markdown import kind_phrase, relaunch_phrase
from autotest.report.publish import AfterResults, publish
from autotest.run.infra import DEFAULT_POLICY, RetryPolicy

if TYPE_CHECKING:
    from autotest.judge.live import ReplicateGroup

SKIP = "SKIP"
DRY_RUN = "DRY-RUN"
#: how long a GPU case waits for a free slice of this node (the plugin's --gpu-wait-s help says 6 h)
GPU_WAIT_S = 6 * 3600.0


@dataclass(frozen=True)
class RunOptions:
    #: root of the per-case results folders; None: the one default (see autotest.run.results_dir)
    results_root: Path | None = None
    #: write into exactly this folder instead of a fresh one under the root (calibration's run<i>-seed<s>)
    results_dir: Path | None = None
    seed: int | None = None
    fault: str | None = None
    dry_run: bool = False
    fail_fast: bool = False
    with_plots: bool = True
    #: extra environment for the launched command
    env: dict[str, str] = field(default_factory=dict)
    #: how often the launcher asks the follower; a poll costs one stat unless the tracker grew
    poll_interval_s: float = 0.1
    #: shown the experiment card before launching; returning False launches nothing
    confirm: Callable[[str], bool] | None = None
    #: submit the launch as a Ray job to this cluster instead of a local process group
    ray_address: str | None = None
    #: custom resources the Ray job asks for (``{"probe": 1}``): each run, each replicate, lands on a node offering them
    ray_resources: dict[str, float] = field(default_factory=dict)
    #: relaunch limits per infrastructure failure kind (an accuracy FAIL is never relaunched)
    retry_policy: RetryPolicy = DEFAULT_POLICY
    #: called with one progress line while the run goes (terminal or CI log)
    progress: Callable[[str], None] | None = None
    #: how long a GPU case waits for a free slice of this node
    gpu_wait_s: float = GPU_WAIT_S
    #: judge against this baseline file instead of the case's (calibration's baselines dir)
    baseline_path: Path | None = None
    #: called with the results folder once results.json is written (the shells record the run in
    #: the history this way); the lines it returns go into report.md and the step summary
    after_results: AfterResults | None = None
    #: the framework repository and ref to test (override the case file and RL_AUTOTEST_FRAMEWORK_*)
    framework_repo: str | None = None
    framework_ref: str | None = None
    #: seeds to run side by side and judge on their mean; None: the case's ``replicates``
    replicates: int | None = None
    #: allow more replicates than the platform's cap (autotest.inputs.replicate_limits); ``--force``
    force_replicates: bool = False
    #: append the verdict to $GITHUB_STEP_SUMMARY (a replicate's own verdict does not: the mean's does)
    step_summary: bool = True
    #: a PASS whose gates cannot catch the case's declared ``detect`` targets is an ERROR, not a warning
    strict_power: bool = False
    #: adaptive replicates: one seed, then up to this many when it lands near a threshold (None: off)
    adaptive_max: int | None = None
    #: why the run is made ("gate", "calibration", "bisect"), recorded as results.json's context.kind; a run
    #: with a fault is "fault" whatever this says. Only gate and calibration runs feed the history's
    #: calibration, drift and bands
    purpose: str = "gate"
    #: set by the replicates runner under fail-fast: this run's replicates and its label among them (fail-fast
    #: decides on their mean, :class:`autotest.judge.live.ReplicateGroup`)
    replicate_group: ReplicateGroup | None = None
    replicate_label: str = ""

    @property
    def kind(self) -> str:
        return "fault" if self.fault else self.purpose


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
        power = ""
        if self.status == PASS and self.verdict is not None:
            caught = caught_phrase(self.verdict.results)
            power = f" — {caught}" if caught else ""
        lost = ""
        if self.unsaved:
            more = f" (and {len(self.unsaved) - 1} more)" if len(self.unsaved) > 1 else ""
            lost = f" — results not saved: {self.unsaved[0]}{more}"
        kind = kind_phrase(self.verdict) if self.verdict is not None else ""
        return f"{self.case}: {self.status}{relaunch_phrase(self.relaunches)}{mean}{kind}{power}{reason}{lost}{where}"


def harness_error_log(results_dir: Path, exc: BaseException) -> str:
    """Where the traceback went (or why it could not be written: the verdict still names the failure)."""
    log = results_dir / "logs" / "harness_error.log"
    try:
        write_atomic(log, "".join(traceback.format_exception(exc)))
    except WriteFailed as lost:
        return f"not saved: {lost}"
    return str(log)


def save(comparison: Comparison, folder: Path, options: RunOptions,
         lost: Sequence[str] = ()) -> tuple[Verdict, tuple[str, ...]]:
    """Publish into ``folder``; the verdict as published (ERROR under --strict-history when the history could
    not record it) and the lines naming what a full or read-only disk kept from being written."""
    published = publish(comparison, folder, lost=lost, with_plots=options.with_plots,
                        after_results=options.after_results, step_summary=options.step_summary)
    return published.verdict or comparison.verdict, published.unsaved


def power_ask(case: Case, options: RunOptions) -> PowerAsk:
    """What the verdict must say about the case's gates catching its declared ``detect`` targets."""
    return PowerAsk(targets=case.detect, strict=options.strict_power)


def finished(shown: CaseRun, verdict: Verdict, **more: Any) -> CaseRun:
    """``shown`` (the run's card and folder) ending in ``verdict``: its status, and the primary triage
    suggestion as the reason when it did not pass."""
    primary = next((f.suggestion for f in verdict.triage if f.primary), "")
    return replace(shown, status=verdict.status, reason=primary if verdict.status != PASS else "", verdict=verdict,
                   **more)
