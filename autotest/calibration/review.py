"""Render a calibration into the markdown report a reviewer reads (the YAML is inputs.baseline_writer's).

Rendering only; every number comes from :mod:`autotest.calibration.thresholds`'s objects and the provenance. Names,
paths, branches and warnings are user text: each is rendered markdown-inert (:mod:`autotest.report.md_safe`).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Sequence

from autotest.calibration.golden_shifts import GoldenShift
from autotest.calibration.thresholds import (
    CALIBRATED,
    SIGNIFICANT_DIGITS,
    Calibration,
    SelfCheck,
    exceed_chance,
)
from autotest.inputs.baseline import (
    Baseline,
)
from autotest.report.md_safe import md_code, md_text

#: golden values keep this many significant digits (far below any threshold)


def _fmt(value: float | None, digits: int = 3) -> str:
    if value is None:
        return "-"
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    return f"{value:.{digits}g}"


def _cell(text: str) -> str:
    """Text safe inside a markdown table cell (``max |golden|`` would split it)."""
    return text.replace("|", "\\|")


def _code(text: object) -> str:
    """A name or path as a code span inside a table cell."""
    return _cell(md_code(text))


def _threshold_rows(calibration: Calibration) -> list[str]:
    rows = ["| check | method | severity | measured max dev (each run's worst pair) | x margin | floor (source) "
            "| threshold | previous | change |",
            "|---|---|---|---|---|---|---|---|---|"]
    for c in calibration.checks:
        new, old = c.check, c.previous
        if c.status != CALIBRATED:
            rows.append(f"| {_code(new.check_id)} | {new.method} {new.operator} | {new.severity} | - | - | - | "
                        f"{new.shown_threshold} | {old.shown_threshold} | {c.status}: {_cell(c.note)} |")
            continue
        per_run = ", ".join(_fmt(v) for v in c.per_run)
        if c.rule:  # its kind's own rule (pooled: t quantile x leave-one-out spread, in noise units)
            rows.append(f"| {_code(new.check_id)} | {_cell(c.rule)} | {new.severity} | {_cell(c.measured_what)} "
                        f"{_fmt(c.measured)} ({per_run}) | - | {_cell(c.floor_source)} | **{new.threshold:g}** | "
                        f"{old.shown_threshold} | {c.status} |")
            continue
        ratio = new.threshold / old.threshold if old.threshold and not old.placeholder else math.inf
        change = "from placeholder" if old.placeholder else \
            "unchanged" if new.threshold == old.threshold else f"x{ratio:.2g}"
        rows.append(f"| {_code(new.check_id)} | {new.method} {new.operator} | {new.severity} | {_fmt(c.measured)} "
                    f"({per_run}) | {_fmt(c.proposed)} | {_fmt(c.floor)} ({_cell(c.floor_source)}) "
                    f"| **{new.threshold:g}** | {old.shown_threshold} | {change} |")
    return rows


def _shift_rows(shifts: Sequence[GoldenShift], thresholds: dict[str, float]) -> list[str]:
    rows = ["| metric | steps compared | max \\|shift\\| (step) | mean shift | new threshold | steps added / removed |",
            "|---|---|---|---|---|---|"]
    for s in shifts:
        worst = "-" if s.max_shift is None else f"{_fmt(s.max_shift)} (step {s.max_shift_step})"
        rows.append(f"| {_code(s.metric)} | {s.common_steps} | {worst} | {_fmt(s.mean_shift)} "
                    f"| {_fmt(thresholds.get(s.metric))} | {s.added_steps} / {s.removed_steps} |")
    return rows


def render_report(calibration: Calibration, self_check: SelfCheck, shifts: Sequence[GoldenShift],
                  previous: Baseline | None, previous_note: str, warnings: Sequence[str], candidate: Path,
                  target: Path, promote_command: str, power: Sequence[str] = ()) -> str:
    """The review document: what was run, the thresholds and how they were made, the diff, the self-check."""
    b = calibration.baseline
    p = b.provenance
    n = calibration.num_runs
    commit = p.get("commit", {})
    lines = [f"# Calibration candidate: {md_text(b.name)}", "",
             f"- command: {md_code(p.get('command', ''))} on {md_text(p.get('date', '?'))}",
             f"- commit under test: {md_code(commit.get('sha'))} ({md_text(commit.get('branch') or 'detached')}, "
             f"{'dirty: ' + md_text(commit.get('diff_stat', 'untracked files')) if commit.get('dirty') else 'clean'})",
             f"- runs: N={n}, seeds {', '.join(str(s) for s in p.get('seeds', []))}; margin "
             f"{calibration.settings.margin:g}; thresholds rounded up to {SIGNIFICANT_DIGITS} significant digits",
             f"- candidate: {md_code(candidate)}; current baseline: {md_code(target)}"
             + ("" if previous is not None else " (none yet)"),
             f"- calibration results: {md_code(p.get('results_dir', '?'))}", ""]
    if warnings:
        lines += ["## Warnings", ""] + [f"- {md_text(w)}" for w in warnings] + [""]
    lines += ["## Thresholds", "",
              "measured max dev = the largest run-to-run deviation: the check's own statistic for every ordered "
              "pair of runs (one as current, the other as golden); threshold = max(measured x margin, floor), "
              "golden = the N-run mean.", ""]
    lines += _threshold_rows(calibration) + [""]
    if calibration.useless:
        lines += ["## Checks that cannot fire", "",
                  "A gate whose minimum detectable effect exceeds the metric's whole range cannot see even a "
                  "change as large as everything the metric does over the run; each is kept as reference only "
                  "(see the calibration docs):", ""]
        lines += [f"- {md_code(u.check_id)}: {md_text(u.why())}" for u in calibration.useless] + [""]
    if power:
        lines += ["## Detection power", "", *power, ""]
    lines += ["## Golden shift against the current baseline", ""]
    if previous_note:
        lines += [previous_note, ""]
    thresholds = {c.check.metric: c.check.threshold for c in calibration.checks}
    lines += _shift_rows(shifts, thresholds) + [""]
    if calibration.uncovered:
        lines += ["Steps not every run logged stay uncalibrated (not in the golden table):", ""]
        lines += [f"- {md_code(m)}: {', '.join(str(s) for s in steps)}" for m, steps in calibration.uncovered.items()]
        lines.append("")
    rate = self_check.false_alarm_rate
    lines += ["## Self-check (leave-one-out)", "",
              f"Each run checked against a baseline calibrated from the other {n - 1}: "
              f"estimated false-alarm rate **{self_check.false_alarms}/{len(self_check.held_out)}"
              f"{'' if rate is None else f' = {rate:.0%}'}** (from N-1 runs, so it leans pessimistic for the "
              f"N-run baseline). Before the margin, a fresh run exceeds the largest "
              f"of {n} measured deviations with a chance of about 1/(N+1) = {exceed_chance(n):.0%}.", "",
              "| held-out run | verdict | failing gates |", "|---|---|---|"]
    for h in self_check.held_out:
        lines.append(f"| {h.label} | {h.status} | {'<br>'.join(_cell(md_text(f)) for f in h.failing) or '-'} |")
    lines += ["", "## Runs", "", "| run | tracker |", "|---|---|"]
    for label, tracker in zip(p.get("seeds", []), p.get("trackers", [])):
        lines.append(f"| seed {md_text(label)} | {_code(tracker)} |")
    lines += ["", "## Next step", "",
              f"Review this diff, then promote: {md_code(promote_command)} (or recalibrate with more runs). "
              "Promotion replaces the baseline atomically.", ""]
    return "\n".join(lines)
