"""``rl-autotest baseline promote``: replace a case's baseline with its reviewed candidate, guarded.

The golden baseline decides every verdict of its case, so promotion checks what it installs: the
candidate must load (schema), be the same case's (its ``name``), come from ``rl-autotest calibrate``
(provenance) and have a clean leave-one-out self-check. ``force`` (a reason) skips the last two and
records the reason in the installed file (a comment line, its control characters escaped: YAML forbids them, and a
raw one would make the baseline unloadable). The replaced baseline is kept as ``<name>.yaml.bak-<time>``
and the new one is written durably (fsync) and loaded before it replaces the old one, so a crash mid-promotion
leaves one whole file and a file that would not load is never installed.

``promote_shadow`` (``baseline promote --shadow``) makes shadow gates that held in the history gates, in place;
``promote_to_shadow`` (``--to-shadow``) puts a candidate in shadow beside the baseline (refusing to replace one
already there unless forced), and ``promote_from_shadow`` (``--from-shadow``) makes it the baseline once its gates
held.
"""

from __future__ import annotations

import datetime as dt
import math
import os
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from autotest.calibration.golden_shifts import golden_shifts
from autotest.errors import UsageError
from autotest.files import write_bytes_atomic
from autotest.inputs.baseline import Baseline, load_baseline
from autotest.inputs.baseline_model import SHADOW
from autotest.judge.shadow import candidate_label, shadow_candidate_path
from autotest.judge.verdict import golden_trace
from autotest.terminal import printable

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


def comment_line(text: str) -> bytes:
    """One YAML comment line recording ``text`` (a ``--force`` reason, check ids): whitespace runs made one space,
    control characters escaped (``\\x1b``), so the line neither ends early nor makes the file unloadable."""
    return f"# {printable(' '.join(text.split()))}\n".encode("utf-8")


def _install(path: Path, data: bytes, *, backup: bool) -> Path | None:
    """Write a baseline durably, installed only when it loads: a refused or failed write leaves the old file (and
    no backup of it). ``backup``: keep the replaced file as ``<name>.bak-<time>``; returns that copy's path."""
    copy = None
    if backup and path.is_file():
        copy = _backup_path(path)
        shutil.copy2(path, copy)
    try:
        write_bytes_atomic(path, data, durable=True, check=load_baseline)
    except BaseException:
        if copy is not None:
            copy.unlink(missing_ok=True)
        raise
    return copy


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
        data = comment_line(f"promoted with --force: {force} (skipped: {'; '.join(soft)})") + data
    backup = _install(baseline, data, backup=current is not None)
    candidate_path.unlink()
    # the review report (the diff against the baseline just replaced, the self-check, the power table) is what
    # a reviewer reads with the commit: kept as <case>.review.md, never deleted
    review = None
    if report_path.is_file():
        review = baseline.with_name(f"{baseline.name.rsplit('.', 1)[0]}.review.md")
        os.replace(report_path, review)
    return Promotion(baseline, backup, changes, force if soft else None, review)


def _severity_spans(text: str, indices: Sequence[int]) -> dict[int, tuple[int, int]]:
    """Where the value of ``checks[i].severity`` is written in ``text`` (character offsets), for each index."""
    import yaml

    root = yaml.compose(text, Loader=yaml.SafeLoader)
    checks = next(v for k, v in root.value if k.value == "checks")
    spans = {}
    for i in indices:
        value = next(v for k, v in checks.value[i].value if k.value == "severity")
        spans[i] = (value.start_mark.index, value.end_mark.index)
    return spans


def promote_shadow(baseline: Path, check_ids: Sequence[str], standing: Mapping[str, str], *,
                   force: str | None = None, case_in_shadow: Path | None = None) -> Promotion:
    """Make the named shadow checks of ``baseline`` gates, in place: only each ``severity: shadow`` value is
    rewritten (the rest of the file, its provenance and comments, stays byte for byte), a comment line records
    what was promoted, when and on what evidence, and the previous file is kept as ``<name>.yaml.bak-<time>``.

    ``standing``: check id -> ``yes`` or ``no: <why>`` (``autotest.history.shadow_ready``); a check that is not
    ready is refused unless ``force`` (a reason, recorded). A check that is not a shadow check is always refused;
    so is any when ``case_in_shadow`` (the case file whose ``shadow: true`` keeps every gate in shadow)."""
    baseline = Path(baseline)
    current = load_baseline(baseline)
    by_id = {c.check_id: i for i, c in enumerate(current.checks)}
    if case_in_shadow is not None:
        raise UsageError(f"{case_in_shadow}: shadow: true keeps every gate of the case in shadow; remove that key "
                         "to make its gates block (the baseline's checks are gates already)")
    unknown = [c for c in check_ids if c not in by_id]
    if unknown:
        raise UsageError(f"{baseline}: checks: no check {', '.join(unknown)} (its checks: {', '.join(by_id)})")
    not_shadow = [c for c in check_ids if current.checks[by_id[c]].severity != SHADOW]
    if not_shadow:
        shown = ", ".join(f"{c} is severity: {current.checks[by_id[c]].severity}" for c in not_shadow)
        raise UsageError(f"{baseline}: not promoted: {shown}, not shadow; only a shadow gate is promoted to gate")
    unready = [f"{c} {standing.get(c, 'no: never judged in the history')}" for c in check_ids
               if standing.get(c) != "yes"]
    if unready and not force:
        raise UsageError(f"{baseline}: not promoted: {'; '.join(unready)}; let it hold more nights "
                         "(rl-autotest history promote-ready), or pass --force REASON after review")
    text = baseline.read_text(encoding="utf-8")
    spans = _severity_spans(text, [by_id[c] for c in check_ids])
    for start, end in sorted(spans.values(), reverse=True):
        text = text[:start] + "gate" + text[end:]
    when = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    evidence = "; ".join(f"{c} ({standing.get(c, 'not judged')})" for c in check_ids)
    forced = f"; forced: {force}" if unready and force else ""
    note = comment_line(f"shadow promoted to gate {when} (rl-autotest baseline promote --shadow): {evidence}{forced}")
    backup = _install(baseline, note + text.encode("utf-8"), backup=True)
    promoted = load_baseline(baseline)  # what was written reads back, each named check a gate
    assert all(promoted.checks[by_id[c]].severity == "gate" for c in check_ids)
    return Promotion(baseline, backup, tuple(f"shadow -> gate: {c}" for c in check_ids),
                     force if unready else None)


def promote_to_shadow(baseline: Path, *, force: str | None = None) -> Promotion:
    """Put ``baseline``'s reviewed candidate in shadow beside it (``<case>.shadow.yaml``) instead of replacing it:
    the same checks as :func:`promote`, the baseline untouched; every run then judges the candidate's checks as
    shadow gates until :func:`promote_from_shadow`. A candidate already in shadow is refused unless ``force`` (a
    reason, recorded): replacing it restarts its nights (a new file is a new ``candidate@<hash>`` in the history)."""
    baseline = Path(baseline)
    candidate_path, report_path = candidate_files(baseline)
    if not candidate_path.is_file():
        raise UsageError(f"{candidate_path}: no candidate to put in shadow; run `rl-autotest calibrate` for this case "
                         "first")
    candidate = load_baseline(candidate_path)
    current = load_baseline(baseline) if baseline.is_file() else None
    if current is None:
        raise UsageError(f"{baseline}: no baseline to shadow; a first baseline is promoted directly "
                         "(rl-autotest baseline promote CASE)")
    hard, soft = _refusals(candidate, current.name)
    if hard or (soft and not force):
        fix = "fix the candidate" if hard else "recalibrate, or pass --force REASON after review"
        raise UsageError(f"{candidate_path}: not put in shadow: {'; '.join(hard + soft)}; {fix}")
    target = shadow_candidate_path(baseline)
    replaced = candidate_label(target) if target.is_file() else None
    if replaced is not None and not force:
        raise UsageError(f"{target}: a candidate is already in shadow ({replaced}); not replaced: promote it "
                         "(baseline promote CASE --from-shadow) or remove that file, or pass --force REASON to replace "
                         "it (its nights restart)")
    data = candidate_path.read_bytes()
    if force and (soft or replaced):
        skipped = [f"skipped: {'; '.join(soft)}"] if soft else []
        skipped += [f"replaced {replaced}, its nights restart"] if replaced else []
        data = comment_line(f"put in shadow with --force: {force} ({'; '.join(skipped)})") + data
    _install(target, data, backup=False)
    candidate_path.unlink()
    review = None
    if report_path.is_file():
        review = target.with_name(target.name.rsplit(".", 1)[0] + ".md")
        os.replace(report_path, review)
    changes = (f"in shadow as {candidate_label(target)}: its checks are judged beside the baseline's, never failing "
               "a run", *diff_lines(current, candidate))
    return Promotion(target, None, changes, force if soft or replaced else None, review)


def promote_from_shadow(baseline: Path, standing: Mapping[str, str], *, force: str | None = None) -> Promotion:
    """Replace ``baseline`` with the candidate in shadow beside it once each of its gates held (``standing``: check id
    as recorded, ``candidate@<hash>:<id>``, -> ``yes`` or ``no: <why>``); not ready is refused unless ``force``."""
    baseline = Path(baseline)
    shadow = shadow_candidate_path(baseline)
    if not shadow.is_file():
        raise UsageError(f"{shadow}: no candidate in shadow; put one there with rl-autotest baseline promote CASE "
                         "--to-shadow")
    label = candidate_label(shadow)
    candidate = load_baseline(shadow)
    current = load_baseline(baseline) if baseline.is_file() else None
    gates = [f"{label}:{c.check_id}" for c in candidate.checks if c.gating]
    unready = [f"{g} {standing.get(g, 'no: never judged in the history')}" for g in gates if standing.get(g) != "yes"]
    if unready and not force:
        raise UsageError(f"{shadow}: not promoted: {'; '.join(unready)}; let it hold more nights "
                         "(rl-autotest history promote-ready), or pass --force REASON after review")
    when = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    forced = f"; forced: {force}" if unready and force else ""
    note = comment_line(f"promoted from shadow {when} ({label}, {len(gates)} gate(s) held){forced}")
    changes = tuple(diff_lines(current, candidate))
    backup = _install(baseline, note + shadow.read_bytes(), backup=current is not None)
    shadow.unlink()
    review = None
    shadow_review = shadow.with_name(shadow.name.rsplit(".", 1)[0] + ".md")
    if shadow_review.is_file():
        review = baseline.with_name(f"{baseline.name.rsplit('.', 1)[0]}.review.md")
        os.replace(shadow_review, review)
    return Promotion(baseline, backup, changes, force if unready else None, review)
