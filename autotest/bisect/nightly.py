"""The nightly's bisect: a case that flipped PASS -> FAIL between two recorded nightlies is bisected between their
framework commits, within a declared budget of runs and device-seconds (``rl-autotest nightly-bisect``).

- ``find_flips``: per case, the last two trusted gate runs of the history; PASS then FAIL at different framework
  commits is a flip (same commit: not the code; say so, bisect nothing);
- ``run_nightly_bisect``: each flip's bisect (:func:`autotest.bisect.session.bisect`) with every probe recorded in
  the history as a ``bisect`` run (never used for calibration or drift), the first bad commit it names as a
  finding (the dashboard marks it), and the night's cost against the budget;
- ``summary_lines`` / ``annotations``: the step summary (markdown) and the workflow annotations, rendered from the
  outcomes only.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from autotest.bisect.session import BisectOptions, BisectOutcome, bisect
from autotest.errors import UsageError
from autotest.history.record import find_results_folders
from autotest.history.run_facts import device_seconds_of_folder
from autotest.history.store import BisectFinding, HistoryStore, RunRow, open_for_reading, record_results
from autotest.inputs.case import Case
from autotest.judge.model import FAIL, PASS
from autotest.report.cost import format_device_seconds


@dataclass(frozen=True)
class Flip:
    case: str
    good: RunRow
    bad: RunRow

    @property
    def same_commit(self) -> bool:
        return self.good.framework_sha == self.bad.framework_sha


@dataclass(frozen=True)
class NightlyBudget:
    #: training runs one bisect may make (the ends included)
    max_runs: int
    #: device-seconds the whole night may spend, its own runs included (None: no limit)
    device_seconds: float | None = None


@dataclass
class NightlyReport:
    tonight_device_seconds: float
    budget: NightlyBudget
    flips: list[Flip] = field(default_factory=list)
    outcomes: dict[str, BisectOutcome] = field(default_factory=dict)
    #: case -> why no bisect ran for it
    not_run: dict[str, str] = field(default_factory=dict)

    @property
    def bisect_device_seconds(self) -> float:
        return round(sum(o.device_seconds for o in self.outcomes.values()), 1)

    @property
    def total_device_seconds(self) -> float:
        return round(self.tonight_device_seconds + self.bisect_device_seconds, 1)

    @property
    def over_budget(self) -> bool:
        return self.budget.device_seconds is not None and self.total_device_seconds > self.budget.device_seconds


def find_flips(store: HistoryStore, cases: Sequence[str] | None = None) -> list[Flip]:
    """Cases whose last two trusted gate runs went PASS -> FAIL, in case order."""
    flips = []
    for case in cases or store.cases():
        gates = [r for r in store.runs(case, trusted_only=True) if r.kind == "gate"]
        if len(gates) >= 2 and gates[-2].status == PASS and gates[-1].status == FAIL:
            flips.append(Flip(case, gates[-2], gates[-1]))
    return flips


def tonight_cost(folders: Sequence[Path]) -> float:
    """Device-seconds recorded in tonight's results folders (each run's ``context.cost``)."""
    runs = [f for folder in folders for f in find_results_folders(folder)]
    return round(sum(device_seconds_of_folder(f) or 0.0 for f in runs), 1)


def run_nightly_bisect(history: str | None, results_root: Path, tonight: Sequence[Path], budget: NightlyBudget,
                       load: Callable[[str], Case], *, cases: Sequence[str] | None = None,
                       options: BisectOptions | None = None,
                       say: Callable[[str], None] | None = None) -> NightlyReport:
    """Bisect every flip within the budget; every probe is recorded in the history as a bisect run."""
    say = say or (lambda line: None)
    if budget.max_runs < 2:
        raise UsageError(f"--max-runs: {budget.max_runs} is below 2; the good and bad ends take two runs")
    with open_for_reading(history, results_root) as store:
        flips = find_flips(store, cases)
        url = store.url
    report = NightlyReport(tonight_cost(tonight), budget, flips)
    say(f"nightly: {len(flips)} case(s) flipped PASS -> FAIL; tonight's runs cost "
        f"{format_device_seconds(report.tonight_device_seconds)}")
    for flip in flips:
        if flip.same_commit:
            report.not_run[flip.case] = (f"the framework commit did not change ({(flip.bad.framework_sha or '?')[:12]}): "
                                         "the environment or the noise, not the code; nothing to bisect")
            continue
        if flip.good.framework_sha is None or flip.bad.framework_sha is None:
            report.not_run[flip.case] = "a run without its framework commit in the history; nothing to bisect between"
            continue
        left = None if budget.device_seconds is None else budget.device_seconds - report.total_device_seconds
        if left is not None and left <= 0:
            report.not_run[flip.case] = (f"the nightly budget of {format_device_seconds(budget.device_seconds or 0)} "
                                         "is spent")
            continue
        base = options or BisectOptions(good="", bad="")
        outcome = bisect(load(flip.case), replace(
            base, good=flip.good.framework_sha, bad=flip.bad.framework_sha, max_runs=budget.max_runs,
            max_device_seconds=left, results_root=results_root, progress=say,
            after_round=lambda folders: _record_probes(folders, url, say)))
        report.outcomes[flip.case] = outcome
        if outcome.first_bad is not None:  # the dashboard marks it on the case's series
            finding = BisectFinding(flip.case, flip.good.framework_sha, flip.bad.framework_sha, outcome.first_bad.sha,
                                    outcome.first_bad.subject, outcome.first_bad.author,
                                    outcome.confidence or "unknown", str(outcome.folder))
            try:
                with HistoryStore.open(url) as store:
                    store.add_finding(finding)
            except UsageError as exc:  # the bisect's answer stands (bisect.json); only the dashboard's mark is lost
                say(f"nightly: warning: the finding for {flip.case} is not in the history: {exc}")
    return report


def _record_probes(folders: Sequence[Path], url: str, say: Callable[[str], None]) -> None:
    """Record a round's probe runs; one the history refuses is a warning: the bisect's answer does not need it."""
    for probe_folder in folders:
        for folder in find_results_folders(probe_folder):
            try:
                record_results(folder, url)
            except UsageError as exc:
                say(f"nightly: warning: the probe run {folder} is not in the history: {exc}")


def summary_lines(report: NightlyReport) -> list[str]:
    """The step summary, markdown."""
    lines = ["## Bisect of tonight's PASS -> FAIL flips", ""]
    if not report.flips:
        lines += ["No case flipped from PASS to FAIL since the previous nightly.", ""]
    for flip in report.flips:
        lines.append(f"### {flip.case}: PASS at `{(flip.good.framework_sha or '?')[:12]}` -> FAIL at "
                     f"`{(flip.bad.framework_sha or '?')[:12]}`")
        lines.append("")
        if flip.case in report.not_run:
            lines += [f"No bisect: {report.not_run[flip.case]}.", ""]
            continue
        outcome = report.outcomes[flip.case]
        lines.append(f"- **{outcome.status}**: {outcome.message}")
        lines.append(f"- {outcome.rounds} round(s), {outcome.runs} run(s), "
                     f"{format_device_seconds(outcome.device_seconds)}; report: `{outcome.folder / 'bisect.md'}`")
        lines.append("")
    budget = report.budget.device_seconds
    lines.append(f"Cost: tonight's runs {format_device_seconds(report.tonight_device_seconds)}, bisects "
                 f"{format_device_seconds(report.bisect_device_seconds)}, total "
                 f"{format_device_seconds(report.total_device_seconds)}"
                 + (f" of a budget of {format_device_seconds(budget)}" if budget is not None else "")
                 + (" (OVER BUDGET)" if report.over_budget else ""))
    return lines


def annotations(report: NightlyReport) -> list[str]:
    """GitHub workflow commands: the culprit as an error, anything else as a warning."""
    found = []
    for case, outcome in report.outcomes.items():
        if outcome.first_bad is not None:
            found.append(f"::error title=bisect {case}::first bad commit {outcome.first_bad.short()} "
                         f"(confidence {outcome.confidence}; {outcome.runs} runs)")
        else:
            found.append(f"::warning title=bisect {case}::{outcome.status}: {outcome.message}")
    found += [f"::warning title=bisect {case}::no bisect: {why}" for case, why in report.not_run.items()]
    if report.over_budget:
        found.append(f"::error title=nightly budget::the nightly cost "
                     f"{format_device_seconds(report.total_device_seconds)}, over its budget of "
                     f"{format_device_seconds(report.budget.device_seconds or 0)}")
    return found
