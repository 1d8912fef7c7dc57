"""Drift: a persistent change in a gated statistic across a case's latest runs.

Each gated check with a threshold gives one series, its observed statistic divided by its
threshold (so a shift reads "0.5 of the threshold" whatever the metric), oldest run first.
``drift_in`` returns typed findings of the mean, ``spread_in`` of the spread (the same series' scatter around its
mean, grown or shrunk: a noisier kernel, an RNG bug, a flaky teacher); ``render_drift_lines`` turns either into
the lines the report, the step summary and ``history drift`` print.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from autotest.errors import UsageError
from autotest.history.changepoint import (
    ChangePoint,
    DriftParams,
    change_points,
    latest_change,
    replicate_spread_change,
    spread_change,
)
from autotest.history.database import describe, resolve_url
from autotest.history.record import read_results_folder
from autotest.history.store import HistoryStore, default_root_of
from autotest.report.publish import NotRecorded
from autotest.run.replicates import run_folder_of

if TYPE_CHECKING:
    from autotest.history.store import CheckPoint, RunRow

LOWER_IS_BETTER = ("<", "<=")


@dataclass(frozen=True)
class StatisticHistory:
    """One gated check's statistic over a case's runs (runs without a finite value left out)."""

    case: str
    check_id: str
    metric: str | None
    operator: str | None
    points: tuple["CheckPoint", ...]

    @property
    def normalised(self) -> tuple[float, ...]:
        return tuple(p.observed / p.threshold for p in self.points)


@dataclass(frozen=True)
class DriftFinding:
    case: str
    check_id: str
    metric: str | None
    #: the first run of the new regime
    since: "RunRow"
    runs_since: int
    #: regime means of the observed statistic, raw and in threshold units
    before_observed: float
    after_observed: float
    threshold: float
    shift_thresholds: float
    p_value: float
    permutations: int
    #: "toward the threshold" (worse) or "away from the threshold"
    direction: str


@dataclass(frozen=True)
class SpreadFinding:
    case: str
    check_id: str
    metric: str | None
    #: the first run of the new spread regime
    since: "RunRow"
    runs_since: int
    #: root mean square scatter around the mean's regimes, raw (the observed statistic's units)
    before_spread: float
    after_spread: float
    threshold: float
    p_value: float
    permutations: int
    #: whose scatter changed: between ``nights`` (run to run) or between the ``replicates`` of each night
    among: str = "nights"

    @property
    def ratio(self) -> float:
        return self.after_spread / self.before_spread if self.before_spread > 0 else float("inf")


def statistic_histories(store: "HistoryStore", case: str, *, trusted_only: bool = True) -> list[StatisticHistory]:
    """Every gated statistic of a case that has a positive threshold, oldest run first; only trusted runs
    (gate and calibration runs not marked untrusted) unless asked."""
    by_check: dict[str, list[CheckPoint]] = {}
    for point in store.check_points(case, gates_only=True, trusted_only=trusted_only):
        if point.observed is not None and point.threshold is not None and point.threshold > 0:
            by_check.setdefault(point.check_id, []).append(point)
    return [StatisticHistory(case, check_id, points[-1].metric, points[-1].operator, tuple(points))
            for check_id, points in sorted(by_check.items())]


def _direction(operator: str | None, shift: float) -> str:
    worse = shift > 0 if operator in LOWER_IS_BETTER else shift < 0
    return "toward the threshold" if worse else "away from the threshold"


def finding_for(history: StatisticHistory, change: ChangePoint, params: DriftParams) -> DriftFinding:
    since = history.points[change.index]
    threshold = history.points[-1].threshold or 1.0
    before = history.points[change.index - change.runs_before:change.index]
    after = history.points[change.index:change.index + change.runs_after]
    mean = lambda pts: sum(p.observed for p in pts) / len(pts)  # noqa: E731
    return DriftFinding(
        case=history.case, check_id=history.check_id, metric=history.metric, since=since.run,
        runs_since=len(history.points) - change.index, before_observed=mean(before), after_observed=mean(after), threshold=threshold,
        shift_thresholds=change.shift, p_value=change.p_value, permutations=params.permutations,
        direction=_direction(history.operator, change.shift))


def drift_in(store: "HistoryStore", case: str, params: DriftParams = DriftParams()) -> list[DriftFinding]:
    findings = []
    for history in statistic_histories(store, case):
        change = latest_change(history.normalised, params)
        if change is not None:
            findings.append(finding_for(history, change, params))
    return findings


def spread_in(store: "HistoryStore", case: str, params: DriftParams = DriftParams()) -> list[SpreadFinding]:
    """Gated statistics whose scatter changed recently: around their mean from run to run (``spread_change``), and
    between the replicates of each night (``replicate_spread_change``) for a case run with replicates."""
    findings = []
    for history in statistic_histories(store, case):
        threshold = history.points[-1].threshold or 1.0
        change = spread_change(history.normalised, params)
        if change is not None:
            findings.append(SpreadFinding(
                case=history.case, check_id=history.check_id, metric=history.metric,
                since=history.points[change.index].run, runs_since=len(history.points) - change.index,
                before_spread=change.before_spread * threshold, after_spread=change.after_spread * threshold,
                threshold=threshold, p_value=change.p_value, permutations=params.permutations))
        nights = nights_of(history.points)
        among = replicate_spread_change([[p.observed / p.threshold for p in night] for night in nights], params)
        if among is not None:
            findings.append(SpreadFinding(
                case=history.case, check_id=history.check_id, metric=history.metric,
                since=nights[among.index][0].run, runs_since=len(nights) - among.index,
                before_spread=among.before_spread * threshold, after_spread=among.after_spread * threshold,
                threshold=threshold, p_value=among.p_value, permutations=params.permutations, among="replicates"))
    return findings


def nights_of(points: "tuple[CheckPoint, ...]") -> list[list["CheckPoint"]]:
    """The points grouped by the run they belong to: a run of replicates records each replicate's folder
    (``<run>/replicates/<r>``), which share their run's folder; a single run is a night of one."""
    nights: dict[Path, list[CheckPoint]] = {}
    for point in points:
        nights.setdefault(run_folder_of(point.run.results_dir), []).append(point)
    return list(nights.values())


def all_change_points(history: StatisticHistory, params: DriftParams = DriftParams()) -> list[ChangePoint]:
    """Every significant change in the examined window (the dashboard marks them all)."""
    return change_points(history.normalised, params)


def render_drift_lines(findings: list[DriftFinding | SpreadFinding]) -> list[str]:
    """One line per finding: statistic, from which run, by how much, significance."""
    lines = []
    for f in findings:
        commit = f" (commit {f.since.framework_sha[:10]})" if f.since.framework_sha else ""
        if isinstance(f, SpreadFinding):
            among = "between replicates " if f.among == "replicates" else ""
            unit = "nights" if f.among == "replicates" else "runs"
            lines.append(
                f"noise: {f.case} {f.check_id}: scatter {among}{f.before_spread:.3g} -> {f.after_spread:.3g} rms "
                f"(x{f.ratio:.2g}; threshold {f.threshold:.4g}) since run {f.since.started_at}{commit} at "
                f"{f.since.results_dir}, {f.runs_since} {unit}; p = {f.p_value:.3g} (permutation test, "
                f"{f.permutations} permutations): "
                + ("the replicates of one night agree less (or more) than they did" if f.among == "replicates"
                   else "the mean did not move, how much it varies did"))
            continue
        lines.append(
            f"drift: {f.case} {f.check_id}: {f.before_observed:.4g} -> {f.after_observed:.4g} "
            f"({f.shift_thresholds:+.2f} x threshold {f.threshold:.4g}, {f.direction}) "
            f"since run {f.since.started_at}{commit} at {f.since.results_dir}, {f.runs_since} runs; "
            f"p = {f.p_value:.3g} (permutation test, {f.permutations} permutations)")
    return lines


def record_and_detect(results_dir: str | Path, url: str | None = None,
                      params: DriftParams = DriftParams()) -> tuple[bool, list[DriftFinding | SpreadFinding]]:
    """After a verdict: record its results folder, then the case's drift of the mean and of the spread (for
    report.md and the step summary).

    Returns (newly recorded, findings). The history is ``url``, else $RL_AUTOTEST_HISTORY, else
    ``<results root>/history.sqlite``. A record that cannot be written raises :class:`NotRecorded`.
    """
    chosen = None
    try:
        record = read_results_folder(results_dir)
        chosen = resolve_url(url, default_root_of(Path(record.results_dir), record.case))
        store = HistoryStore.open(chosen)
    except UsageError as exc:
        raise NotRecorded(str(exc), url=describe(chosen) if chosen else None) from None
    with store:
        try:
            recorded = store.add(record)
        except UsageError as exc:
            raise NotRecorded(str(exc), url=describe(chosen)) from None
        return recorded, [*drift_in(store, record.case, params), *spread_in(store, record.case, params)]


def history_recorder(url: str | None = None, *, strict: bool = False,
                     warn: Callable[[str], None] | None = None) -> Callable[[Path], list[str]]:
    """The pipeline's ``after_results`` hook: record the run, return its case's drift lines for the report.

    A record that cannot be written is a warning (``warn``), a ``history`` field in results.json and a line
    in the report; ``strict`` (--strict-history) makes it an ERROR gate of the verdict. Drift that cannot
    be computed after a successful record is a line in the report.
    """

    resolve_url(url, Path.cwd())  # a malformed URL is one line before anything runs, not after the run

    def record(results_dir: Path) -> list[str]:
        try:
            _, findings = record_and_detect(results_dir, url)
        except NotRecorded as exc:
            exc.strict = strict
            if warn is not None:
                warn(f"{results_dir}: verdict not recorded in the run history: {exc.error}"
                     + (" (--strict-history: the verdict is ERROR)" if strict else ""))
            raise
        except UsageError as exc:
            return [f"drift not computed: {exc}"]
        return render_drift_lines(findings)

    return record
