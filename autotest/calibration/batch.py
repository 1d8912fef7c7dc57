"""One batch recalibration for an environment fleet finding: a candidate per affected case, one review report.

When one environment change (a base image, a package, a driver) moved every case of a fleet, the goldens are
refreshed together, not one investigation and one rebaseline per case. This module proposes the batch from what the
history recorded; it runs nothing:

- per case, the calibration that makes its candidate in the new environment: ``rl-autotest calibrate CASE
  --from-history --last N`` when N trusted passing runs since the change still have their tracker on disk, else
  ``rl-autotest calibrate CASE --runs N`` (N new runs);
- per case, each changed gated statistic before and after the change (regime means of the recorded trusted runs,
  in the statistic's units and in thresholds), so the reviewer sees what the new goldens will absorb;
- one review report (markdown) and one script with every command, written side by side. The script is built from
  argument lists (:mod:`autotest.shell_script`): a recorded value in it (the changes in its header comment, a case
  name) is a quoted word or escaped comment text, never a command.

Each candidate is then reviewed and promoted as any other (``rl-autotest baseline promote CASE``).
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from autotest.files import make_folder, write_atomic
from autotest.history.fleet import ENVIRONMENT, FleetFinding
from autotest.history.store import PASS, HistoryStore
from autotest.inputs.tracker_layout import tracker_copy
from autotest.report.md_safe import md_code, md_text
from autotest.shell_script import write_script

DEFAULT_RUNS = 3


@dataclass(frozen=True)
class StatisticShift:
    check_id: str
    before: float
    after: float
    threshold: float

    @property
    def shift_thresholds(self) -> float:
        return (self.after - self.before) / self.threshold


@dataclass(frozen=True)
class BatchCandidate:
    case: str
    #: the command that makes the case's candidate baseline in the new environment, word by word
    argv: tuple[str, ...]
    #: trusted runs recorded since the change, and those passing with their tracker on disk
    runs_since: int
    reusable_runs: int
    shifts: tuple[StatisticShift, ...]

    @property
    def command(self) -> str:
        """The command as one shell line (each word quoted)."""
        return shlex.join(self.argv)


@dataclass(frozen=True)
class BatchProposal:
    finding: FleetFinding
    runs: int
    candidates: tuple[BatchCandidate, ...]


def calibrate_argv(case: str, runs: int, *, from_history: bool) -> tuple[str, ...]:
    """The command that makes ``case``'s candidate. The case name comes from the history (any writer's text): a
    name starting with '-' goes after ``--``, so it is the case, never an option."""
    options = ("--from-history", "--last", str(runs)) if from_history else ("--runs", str(runs))
    if case.startswith("-"):
        return ("rl-autotest", "calibrate", *options, "--", case)
    return ("rl-autotest", "calibrate", case, *options)


def batch_proposal(store: HistoryStore, finding: FleetFinding, runs: int = DEFAULT_RUNS) -> BatchProposal:
    """The batch for an environment finding, from the recorded runs before and since its change."""
    if finding.kind != ENVIRONMENT:
        raise ValueError(f"a batch recalibration answers an environment finding, not {finding.kind!r}")
    candidates = []
    for cause in finding.cases:
        trusted = store.runs(cause.case, trusted_only=True)
        ids = [r.run_id for r in trusted]
        split = ids.index(cause.bad_run_id) if cause.bad_run_id in ids else len(trusted)
        since = trusted[split:]
        reusable = [r for r in since if r.status == PASS and tracker_copy(Path(r.results_dir)) is not None]
        argv = calibrate_argv(cause.case, runs, from_history=len(reusable) >= runs)
        before_ids, after_ids = set(ids[:split]), {r.run_id for r in since}
        values: dict[str, tuple[list[float], list[float], float]] = {}
        for p in store.check_points(cause.case, trusted_only=True):
            if p.observed is None or not p.threshold:
                continue
            before, after, _ = values.setdefault(p.check_id, ([], [], p.threshold))
            (before if p.run.run_id in before_ids else after if p.run.run_id in after_ids else []).append(p.observed)
        shifts = tuple(StatisticShift(c, sum(b) / len(b), sum(a) / len(a), t)
                       for c, (b, a, t) in sorted(values.items()) if b and a and (c in cause.check_ids or not
                                                                                  cause.check_ids))
        candidates.append(BatchCandidate(cause.case, argv, len(since), len(reusable), shifts))
    return BatchProposal(finding, runs, tuple(candidates))


def render_batch_review(proposal: BatchProposal) -> str:
    """The one review report of the batch (markdown)."""
    f = proposal.finding
    label = f"fleet finding {f.finding_id}" if f.finding_id is not None else "fleet finding"
    lines = [f"# Batch recalibration: {label}", "",
             f"The environment changed between {f.window_start} and {f.window_end} ({f.nights} night(s)):", ""]
    lines += [f"- {md_code(change)}" for change in f.changes]
    lines += ["", f"It explains the change in {len(proposal.candidates)} case(s); each is recalibrated in the new "
              "environment here, not investigated on its own. This report is a proposal made from the recorded "
              "runs: no calibration has run yet. Run the commands (also in `recalibrate.sh` beside this file), "
              "review each candidate's own report, then promote each with `rl-autotest baseline promote CASE`.", "",
              "| case | event | trusted runs since | reusable (passing, tracker on disk) | candidate made by |",
              "|---|---|---|---|---|"]
    events = {c.case: c.event for c in f.cases}
    for c in proposal.candidates:
        lines.append(f"| {md_text(c.case)} | {md_text(events.get(c.case, '-'))} | {c.runs_since} | {c.reusable_runs} | "
                     f"{md_code(c.command)} |")
    lines += ["", "## What the new goldens absorb", "",
              "Regime means of each changed gated statistic over the trusted runs before and since the change.", "",
              "| case | check | before | since | threshold | shift (x threshold) |", "|---|---|---|---|---|---|"]
    for c in proposal.candidates:
        for s in c.shifts:
            lines.append(f"| {md_text(c.case)} | {md_code(s.check_id)} | {s.before:.4g} | {s.after:.4g} | "
                         f"{s.threshold:.4g} | {s.shift_thresholds:+.2f} |")
    return "\n".join(lines) + "\n"


def write_batch(proposal: BatchProposal, folder: Path) -> tuple[Path, Path]:
    """``review.md`` and ``recalibrate.sh`` in ``folder``; returns their paths."""
    make_folder(folder)
    review, script = folder / "review.md", folder / "recalibrate.sh"
    write_atomic(review, render_batch_review(proposal))
    label = f"fleet finding {proposal.finding.finding_id}" if proposal.finding.finding_id else "a fleet finding"
    write_script(script, [c.argv for c in proposal.candidates],
                 comments=[f"batch recalibration for {label}: {'; '.join(proposal.finding.changes)}"])
    return review, script


def batch_commands(proposals: Sequence[BatchProposal]) -> list[str]:
    return [c.command for p in proposals for c in p.candidates]
