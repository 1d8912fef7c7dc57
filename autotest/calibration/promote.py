"""``rl-autotest baseline promote``: replace a case's baseline with its reviewed candidate, guarded.

The golden baseline decides every verdict of its case, so promotion checks what it installs: the
candidate must load (schema), be the same case's (its ``name``), come from ``rl-autotest calibrate``
(provenance) and have a clean leave-one-out self-check. ``force`` (a reason) skips the last two and
records the reason in the installed file. The replaced baseline is kept as ``<name>.yaml.bak-<time>``
and the new one is written durably (fsync), so a crash mid-promotion leaves one whole file.
"""

from __future__ import annotations

import datetime as dt
import math
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from autotest.calibration.thresholds import golden_shifts
from autotest.errors import UsageError
from autotest.files import write_bytes_atomic
from autotest.inputs.baseline import Baseline, load_baseline
from autotest.judge.verdict import golden_trace

PRODUCED_BY = "rl-autotest calibrate"


@dataclass(frozen=True)
class Promotion:
    path: Path
    #: the replaced baseline's copy (None when there was none)
    backup: Path | None
    #: one line per changed threshold, check and golden series
    changes: tuple[str, ...]
    forced: str | None = None
    #: the candidate's review report, kept beside the baseline it now describes (None: there was none)
    review: Path | None = None


def candidate_files(baseline: Path) -> tuple[Path, Path]:
    stem = baseline.name.rsplit(".", 1)[0]
    return baseline.with_name(f"{stem}.candidate.yaml"), baseline.with_name(f"{stem}.candidate.md")


def _refusals(candidate: Baseline, expected_name: str) -> tuple[list[str], list[str]]:
    """(problems --force cannot override, problems it can)."""
    hard, soft = [], []
    if candidate.name != expected_name:
        hard.append(f"name: it is the baseline of {candidate.name!r}, not {expected_name!r}; "
                    "promote it for its own case")
    placeholders = [c.check_id for c in candidate.checks if c.placeholder]
    if placeholders:  # calibration could not measure them (metric not logged): nobody set a number
        hard.append(f"checks: threshold still a placeholder for {', '.join(placeholders)} (calibration could not "
                    "measure it; see the candidate's derivation); fix the metric name or remove the check")
    if candidate.provenance.get("produced_by") != PRODUCED_BY:
        soft.append(f"provenance.produced_by: not {PRODUCED_BY!r} (hand-made or edited?)")
    self_check = candidate.provenance.get("self_check")
    rate = self_check.get("false_alarm_rate") if isinstance(self_check, dict) else None
    if isinstance(rate, (int, float)) and rate > 0:
        soft.append(f"provenance.self_check: leave-one-out false-alarm rate {rate:.0%}")
    return hard, soft


def diff_lines(old: Baseline | None, new: Baseline) -> list[str]:
    """What promotion changes: thresholds, checks added or removed, golden series moved."""
    if old is None:
        return [f"new baseline: {len(new.checks)} checks"]
    before = {c.check_id: c for c in old.checks}
    after = {c.check_id: c for c in new.checks}
    lines = [f"removed check {cid}" for cid in before if cid not in after]
    lines += [f"added check {cid}" for cid in after if cid not in before]
    lines += [f"threshold {cid}: {before[cid].shown_threshold} -> {c.shown_threshold}" for cid, c in after.items()
              if cid in before and before[cid].shown_threshold != c.shown_threshold]
    try:
        old_golden = golden_trace(old)
    except UsageError as exc:
        lines.append(f"golden: the current baseline's values could not be read ({exc})")
        old_golden = None
    for shift in golden_shifts(old_golden, new) if old_golden is not None else ():
        if shift.added_steps or shift.removed_steps or shift.max_shift:
            moved = "" if shift.max_shift is None or not math.isfinite(shift.max_shift) else \
                f"max shift {shift.max_shift:.3g} at step {shift.max_shift_step}"
            steps = f"+{shift.added_steps}/-{shift.removed_steps} steps" if shift.added_steps or \
                shift.removed_steps else ""
            lines.append(f"golden {shift.metric}: " + ", ".join(p for p in (moved, steps) if p))
    return lines or ["no threshold or golden value changes"]


def _backup_path(baseline: Path) -> Path:
    stamp = dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    path, n = baseline.with_name(f"{baseline.name}.bak-{stamp}"), 1
    while path.exists():  # two promotions in one second keep both backups
        path, n = baseline.with_name(f"{baseline.name}.bak-{stamp}-{n}"), n + 1
    return path


def promote(baseline: Path, *, force: str | None = None) -> Promotion:
    """Replace ``baseline`` with its candidate after the checks above; every refusal is one UsageError."""
    baseline = Path(baseline)
    candidate_path, report_path = candidate_files(baseline)
    if not candidate_path.is_file():
        raise UsageError(f"{candidate_path}: no candidate to promote; run `rl-autotest calibrate` for this case first")
    candidate = load_baseline(candidate_path)
    current = load_baseline(baseline) if baseline.is_file() else None
    hard, soft = _refusals(candidate, current.name if current else baseline.name.rsplit(".", 1)[0])
    if hard or (soft and not force):
        fix = "fix the candidate" if hard else "recalibrate, or pass --force REASON after review"
        raise UsageError(f"{candidate_path}: not promoted: {'; '.join(hard + soft)}; {fix}")
    changes = tuple(diff_lines(current, candidate))
    data = candidate_path.read_bytes()
    if force and soft:
        note = f"# promoted with --force: {' '.join(force.split())} (skipped: {'; '.join(soft)})\n"
        data = note.encode("utf-8") + data
    backup = None
    if current is not None:
        backup = _backup_path(baseline)
        shutil.copy2(baseline, backup)
    write_bytes_atomic(baseline, data, durable=True)
    candidate_path.unlink()
    # the review report (the diff against the baseline just replaced, the self-check, the power table) is what
    # a reviewer reads with the commit: kept as <case>.review.md, never deleted
    review = None
    if report_path.is_file():
        review = baseline.with_name(f"{baseline.name.rsplit('.', 1)[0]}.review.md")
        os.replace(report_path, review)
    return Promotion(baseline, backup, changes, force if soft else None, review)
