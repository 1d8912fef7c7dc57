"""The nightly's bisect: a case that flipped PASS -> FAIL between two recorded nightlies is bisected between their
framework commits, within a declared budget of runs and device-seconds (``rl-autotest nightly-bisect``).

- ``find_flips``: per case, the last two trusted gate runs of the history; PASS then FAIL at different framework
  commits is a flip (same commit: not the code; say so, bisect nothing);
- ``run_nightly_bisect``: each flip's bisect (:func:`autotest.bisect.session.bisect`) with every probe recorded in
  the history as a ``bisect`` run (never used for calibration or drift), the first bad commit it names as a
  finding (the dashboard marks it), and the night's cost against the budget. A drift toward a threshold (a
  persistent shift below the per-run thresholds) is bisected too, between the last trusted night before its change
  window and the first after it ("near commit X (window ...)"); a case whose flip and drift share a window is
  bisected once. Cases that changed together are triaged first (:mod:`autotest.history.fleet`): an environment
  change explains them all and starts no bisect; a code change starts one bisect for the fleet, its answer
  attributed to every case;
- ``summary_lines`` / ``annotations``: the step summary (markdown) and the workflow annotations, rendered from the
  outcomes only.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from autotest.bisect.probe import ProbeResult
from autotest.bisect.search import BAD, GOOD, SKIPPED
from autotest.bisect.session import BisectOptions, BisectOutcome, bisect
from autotest.errors import UsageError
from autotest.history.fleet import (
    CODE,
    DRIFT,
    ENVIRONMENT,
    FLIP,
    CaseEvent,
    FleetFinding,
    FleetParams,
    drift_events,
    merge_case_events,
    split_fleet,
    window_text,
)
from autotest.history.fleet_store import record_fleet_findings
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
class Target:
    """One bisect the night runs: on ``case``, between its ``good`` and ``bad`` runs' framework commits."""

    case: str
    good: RunRow
    bad: RunRow
    #: "flip", "drift" (between the ends of a change window) or "fleet" (one bisect for cases that changed together)
    source: str
    #: a drift's window (``2026-01-24 .. 2026-01-27, 3 nights``): the commit found is "near", not "first bad"
    near_window: str | None = None
    #: every case the answer is attributed to (``case`` first)
    cases: tuple[str, ...] = ()
    #: a drift's levels (check_id, mean before, mean after, threshold), the largest shift first: its probes answer
    #: by which level the statistic is nearer (:func:`drift_answer`)
    levels: tuple[tuple[str, float, float, float], ...] = ()


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
    #: the bisects the night runs (flips, drifts, one per fleet code change), in order
    targets: list[Target] = field(default_factory=list)
    #: cases that changed together (an environment finding starts no bisect; a code finding one)
    fleet: list[FleetFinding] = field(default_factory=list)
    #: fleet finding id -> its batch recalibration's review (an environment finding)
    batch_reviews: dict[int, Path] = field(default_factory=dict)
    #: case -> the case whose bisect answers for it (a fleet code change)
    attributed: dict[str, str] = field(default_factory=dict)

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


def night_targets(store: HistoryStore, flips: Sequence[Flip], cases: Sequence[str] | None = None,
                  params: FleetParams = FleetParams()) -> tuple[list[Target], list[FleetFinding], dict[str, str]]:
    """Tonight's bisects: the flips and the drifts toward a threshold not bisected yet, triaged as a fleet first.
    Returns (targets, fleet findings, case -> why it starts no bisect of its own)."""
    events = [CaseEvent(f.case, FLIP, f.good, f.bad, (f.good, f.bad)) for f in flips]
    for case in cases or store.cases():
        done = {(b.good_sha, b.bad_sha) for b in store.findings(case)}
        events += [e for e in drift_events(store, case, params, worse_only=True)
                   if (e.good.framework_sha, e.bad.framework_sha) not in done]
    events = merge_case_events(events)
    triaged = split_fleet(events, params)
    by_ends = {(e.case, e.good.run_id, e.bad.run_id): e for e in events}
    targets: list[Target] = []
    not_run: dict[str, str] = {}
    for finding in triaged.findings:
        if finding.kind != CODE:
            not_run.update({c.case: f"caused by {finding.describe()}" for c in finding.cases})
            continue
        rep = next(c for c in finding.cases if c.case == finding.representative)
        good, bad = store.run(rep.good_run_id), store.run(rep.bad_run_id)
        assert good is not None and bad is not None
        drift = rep.event == DRIFT
        levels = by_ends[(rep.case, rep.good_run_id, rep.bad_run_id)].levels if drift else ()
        targets.append(Target(rep.case, good, bad, "fleet", window_text(good, bad) if drift else None,
                              (rep.case, *(c.case for c in finding.cases if c.case != rep.case)), levels))
    for event in triaged.alone:
        near = window_text(event.good, event.bad) if event.kind == DRIFT else None
        targets.append(Target(event.case, event.good, event.bad, DRIFT if near else FLIP, near, (event.case,),
                              event.levels if near else ()))
    return targets, triaged.findings, not_run


def tonight_cost(folders: Sequence[Path]) -> float:
    """Device-seconds recorded in tonight's results folders (each run's ``context.cost``)."""
    runs = [f for folder in folders for f in find_results_folders(folder)]
    return round(sum(device_seconds_of_folder(f) or 0.0 for f in runs), 1)


def known_cases(asked: Sequence[str], recorded: Sequence[str], where: str) -> None:
    """Every ``--case`` names a case the history holds; an unknown one is one line naming it (never "0 flipped")."""
    for name in asked:
        if name not in recorded:
            shown = ", ".join(recorded[:8]) + (", ..." if len(recorded) > 8 else "") if recorded else "none"
            raise UsageError(f"--case {name!r}: no run of this case in the history {where} (its cases: {shown}); "
                             "check the name, or leave --case out for every case")


def run_nightly_bisect(history: str | None, results_root: Path, tonight: Sequence[Path], budget: NightlyBudget,
                       load: Callable[[str], Case], *, cases: Sequence[str] | None = None,
                       options: BisectOptions | None = None,
                       say: Callable[[str], None] | None = None,
                       fleet_params: FleetParams = FleetParams()) -> NightlyReport:
    """Bisect every flip and drift within the budget, once per fleet; every probe is recorded in the history as a
    bisect run."""
    say = say or (lambda line: None)
    if budget.max_runs < 2:
        raise UsageError(f"--max-runs: {budget.max_runs} is below 2; the good and bad ends take two runs")
    with open_for_reading(history, results_root) as store:
        if cases is not None:
            known_cases(cases, store.cases(), store.url)
        flips = find_flips(store, cases)
        targets, fleet, caused = night_targets(store, flips, cases, fleet_params)
        url = store.url
    report = NightlyReport(tonight_cost(tonight), budget, flips, targets=targets, fleet=fleet)
    report.not_run.update(caused)
    drifts = sum(t.source == DRIFT for t in targets)
    say(f"nightly: {len(flips)} case(s) flipped PASS -> FAIL, {drifts} drift(s) to bisect, {len(fleet)} fleet "
        f"finding(s); tonight's runs cost {format_device_seconds(report.tonight_device_seconds)}")
    if fleet:
        try:
            with HistoryStore.open(url) as store:
                report.fleet = record_fleet_findings(store, fleet)
        except UsageError as exc:
            say(f"nightly: warning: the fleet findings are not in the history: {exc}")
        for finding in report.fleet:
            say(f"nightly: {finding.describe()}")
            if finding.kind != CODE:  # with its recorded id now
                report.not_run.update({c.case: f"caused by {finding.describe()}" for c in finding.cases})
            if finding.kind == ENVIRONMENT and finding.finding_id is not None:
                review = _write_batch(url, finding, results_root, say)
                if review is not None:
                    report.batch_reviews[finding.finding_id] = review
    for target in targets:
        good_sha, bad_sha = target.good.framework_sha, target.bad.framework_sha
        for case in target.cases[1:]:
            report.attributed[case] = target.case
        if good_sha == bad_sha:
            what = "across the drift window " if target.near_window else ""
            _not_run(report, target, f"the framework commit did not change {what}({(bad_sha or '?')[:12]}): "
                                     "the environment or the noise, not the code; nothing to bisect")
            continue
        if good_sha is None or bad_sha is None:
            _not_run(report, target, "a run without its framework commit in the history; nothing to bisect between")
            continue
        left = None if budget.device_seconds is None else budget.device_seconds - report.total_device_seconds
        if left is not None and left <= 0:
            _not_run(report, target, f"the nightly budget of {format_device_seconds(budget.device_seconds or 0)} "
                                     "is spent")
            continue
        if target.near_window:
            say(f"nightly: {target.case}: drift toward a threshold; bisecting the window {target.near_window} "
                f"({good_sha[:12]}..{bad_sha[:12]})")
        base = options or BisectOptions(good="", bad="")
        answer = drift_answer(*target.levels[0]) if target.near_window and target.levels else base.answer
        outcome = bisect(load(target.case), replace(
            base, good=good_sha, bad=bad_sha, max_runs=budget.max_runs, answer=answer,
            max_device_seconds=left, results_root=results_root, progress=say,
            after_round=lambda folders: _record_probes(folders, url, say)))
        report.outcomes[target.case] = outcome
        if outcome.first_bad is None:
            continue
        # the dashboard marks it on each case's series; a fleet's answer is every case's
        findings = [BisectFinding(case, good_sha, bad_sha, outcome.first_bad.sha, outcome.first_bad.subject,
                                  outcome.first_bad.author, outcome.confidence or "unknown", str(outcome.folder),
                                  near_window=target.near_window) for case in target.cases]
        if target.near_window:
            say(f"nightly: {target.case}: {_near(outcome.first_bad, target.near_window)}")
        try:
            with HistoryStore.open(url) as store:
                for finding in findings:
                    store.add_finding(finding)
        except UsageError as exc:  # the bisect's answer stands (bisect.json); only the dashboard's mark is lost
            say(f"nightly: warning: the finding for {target.case} is not in the history: {exc}")
    return report


def drift_answer(check_id: str, before: float, after: float, threshold: float) -> Callable[[ProbeResult], ProbeResult]:
    """A drift bisect's probe answer: ``bad`` when the drifted statistic lies nearer its new level than its old one.

    The per-run gates pass on both sides of a drift below the thresholds, so they cannot split the window; the
    midpoint of the two levels can. Confidence ``high`` when the statistic is a quarter of the shift or more from
    the midpoint, else ``low``. A probe without that statistic is skipped."""
    middle, shift = (before + after) / 2, after - before

    def answer(found: ProbeResult) -> ProbeResult:
        observed = found.gates.get(check_id, ("", None, None))[1]
        if observed is None:
            return replace(found, answer=SKIPPED, reason=f"{check_id} not judged; the drift's side is unknown")
        new_side = (observed - middle) * shift > 0
        sure = abs(observed - middle) >= abs(shift) / 4
        return replace(found, answer=BAD if new_side else GOOD, confidence="high" if sure else "low",
                       reason=f"{check_id} {observed:.4g} nearer the drift's {'new' if new_side else 'old'} level "
                              f"({after:.4g} since, {before:.4g} before; threshold {threshold:.4g})")

    return answer


def _write_batch(url: str, finding: FleetFinding, results_root: Path, say: Callable[[str], None]) -> Path | None:
    """An environment finding's batch recalibration proposal: ``<results root>/fleet/fleet-<id>/review.md`` and
    ``recalibrate.sh`` (:mod:`autotest.calibration.batch`); one that cannot be written is a warning."""
    from autotest.calibration.batch import batch_proposal, write_batch

    try:
        with open_for_reading(url, results_root) as store:
            proposal = batch_proposal(store, finding)
        review, _ = write_batch(proposal, results_root / "fleet" / f"fleet-{finding.finding_id}")
    except (UsageError, OSError) as exc:
        say(f"nightly: warning: the batch recalibration for fleet finding {finding.finding_id} was not written: {exc}")
        return None
    say(f"nightly: fleet finding {finding.finding_id}: batch recalibration of {len(proposal.candidates)} case(s) "
        f"proposed: {review}")
    return review


def _not_run(report: NightlyReport, target: Target, why: str) -> None:
    for case in target.cases:
        report.not_run[case] = why
        report.attributed.pop(case, None)


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
        if report.attributed.get(flip.case, flip.case) != flip.case:
            lines += [f"Bisected once for the fleet, on {report.attributed[flip.case]}: its answer is this case's.", ""]
            continue
        fleet = next((t.cases for t in report.targets if t.case == flip.case and len(t.cases) > 1), None)
        lines += [f"One bisect for the fleet: {', '.join(fleet)}.", ""] if fleet else []
        lines += _outcome_lines(report, flip.case)
    flipped = {f.case for f in report.flips}
    for target in report.targets:
        if target.case in flipped or target.case not in report.outcomes and target.case not in report.not_run:
            continue
        what = f"drift toward a threshold in the window {target.near_window}" if target.near_window else "changed"
        lines += [f"### {target.case}: {what} (`{(target.good.framework_sha or '?')[:12]}` .. "
                  f"`{(target.bad.framework_sha or '?')[:12]}`)", ""]
        if len(target.cases) > 1:
            lines += [f"One bisect for the fleet: {', '.join(target.cases)}.", ""]
        lines += ([f"No bisect: {report.not_run[target.case]}.", ""] if target.case in report.not_run
                  else _outcome_lines(report, target.case))
    if report.fleet:
        lines += ["## Cases that changed together", ""]
        lines += [f"- {finding.describe()}" + (f"; review: `{report.batch_reviews[finding.finding_id]}`"
                                               if finding.finding_id in report.batch_reviews else "")
                  for finding in report.fleet] + [""]
    budget = report.budget.device_seconds
    lines.append(f"Cost: tonight's runs {format_device_seconds(report.tonight_device_seconds)}, bisects "
                 f"{format_device_seconds(report.bisect_device_seconds)}, total "
                 f"{format_device_seconds(report.total_device_seconds)}"
                 + (f" of a budget of {format_device_seconds(budget)}" if budget is not None else "")
                 + (" (OVER BUDGET)" if report.over_budget else ""))
    return lines


def _near(commit, window: str) -> str:
    """A drift's answer: the window's first bad commit is near the change, not surely its cause."""
    return f"near commit {commit.sha[:12]} (window {window}): {commit.subject} ({commit.author})"


def _outcome_lines(report: NightlyReport, case: str) -> list[str]:
    outcome = report.outcomes[case]
    target = next((t for t in report.targets if t.case == case), None)
    message = outcome.message
    if target is not None and target.near_window and outcome.first_bad is not None:
        message = _near(outcome.first_bad, target.near_window)
    return [f"- **{outcome.status}**: {message}",
            f"- {outcome.rounds} round(s), {outcome.runs} run(s), {format_device_seconds(outcome.device_seconds)}; "
            f"report: `{outcome.folder / 'bisect.md'}`", ""]


def annotations(report: NightlyReport) -> list[str]:
    """GitHub workflow commands: the culprit as an error, anything else as a warning; one line per fleet finding
    (not one per case it explains)."""
    found = []
    targets = {t.case: t for t in report.targets}
    for case, outcome in report.outcomes.items():
        target = targets.get(case)
        fleet = f" for the fleet: {', '.join(target.cases)}" if target is not None and len(target.cases) > 1 else ""
        if outcome.first_bad is not None:
            what = (_near(outcome.first_bad, target.near_window)
                    if target is not None and target.near_window else f"first bad commit {outcome.first_bad.short()}")
            found.append(f"::error title=bisect {case}::{what} (confidence {outcome.confidence}; {outcome.runs} runs)"
                         f"{fleet}")
        else:
            found.append(f"::warning title=bisect {case}::{outcome.status}: {outcome.message}{fleet}")
    found += [f"::warning title=fleet::{finding.describe()}" for finding in report.fleet if finding.kind != CODE]
    found += [f"::warning title=bisect {case}::no bisect: {why}" for case, why in report.not_run.items()
              if not why.startswith("caused by fleet finding")]
    if report.over_budget:
        found.append(f"::error title=nightly budget::the nightly cost "
                     f"{format_device_seconds(report.total_device_seconds)}, over its budget of "
                     f"{format_device_seconds(report.budget.device_seconds or 0)}")
    return found
