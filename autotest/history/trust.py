"""Trusted history: which runs may teach the harness what normal looks like.

A run feeds ``calibrate --from-history``, drift and the dashboard's bands only when it is a gate or
calibration run (not made with ``--fault``, not a dry run or a bisect probe) and no person has marked
it untrusted. ``history untrust RUN --why TEXT`` and ``history trust RUN`` append a mark (when, who,
why) to the run's trail; the latest mark decides, so a mark is revocable and never lost.
"""

from __future__ import annotations

import getpass
import os
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from autotest.errors import UsageError
from autotest.history.database import describe, tables, unwritable
from autotest.history.run_facts import TRUSTED_KINDS
from autotest.history.store import HistoryStore, RunRow


@dataclass(frozen=True)
class Marked:
    run: RunRow
    #: False when the mark changed nothing (trusting a run that is already trusted)
    changed: bool
    message: str


def find_run(store: HistoryStore, ref: str) -> RunRow:
    """A run by its id (``history show`` lists them) or by its results folder."""
    if ref.strip().isdigit():
        row = store.run(int(ref))
        if row is None:
            raise UsageError(f"RUN {ref}: no run with this id in {describe(store.url)}; "
                             "rl-autotest history show CASE lists the ids")
        return row
    folder = str(Path(ref).expanduser().resolve())
    rows = store.run_at(folder)
    if not rows:
        raise UsageError(f"RUN {ref}: no run recorded from results folder {folder} in {describe(store.url)}; "
                         "give a run id (rl-autotest history show CASE) or a recorded results folder")
    if len(rows) > 1:
        raise UsageError(f"RUN {ref}: {len(rows)} runs recorded from {folder} (ids "
                         f"{', '.join(str(r.run_id) for r in rows)}); give one run id")
    return rows[0]


def _who() -> str | None:
    try:
        return os.environ.get("GITHUB_ACTOR") or getpass.getuser()
    except (KeyError, OSError):  # no login name for this uid (containers)
        return None


def mark_run(url: str, ref: str, *, trusted: bool, why: str | None) -> Marked:
    """Append a trust mark to one run; an untrust needs its reason."""
    reason = (why or "").strip()
    if not trusted and not reason:
        raise UsageError("--why: say why the run is untrusted (it is recorded with the mark), "
                         "e.g. --why 'node had a failing GPU'")
    with HistoryStore.open(url, read_only=True) as reader:  # a missing or empty history is "no runs", not created
        run = find_run(reader, ref)
    if trusted and run.kind not in TRUSTED_KINDS:
        raise UsageError(f"RUN {ref}: run {run.run_id} is a {run.kind} run; only gate and calibration runs feed "
                         "calibration, drift and the bands, whatever their mark")
    if trusted and run.marked_trusted:
        return Marked(run, False, f"run {run.run_id} is already trusted; nothing recorded")
    now = datetime.now(timezone.utc).isoformat(timespec="seconds")
    import sqlalchemy as sa

    with HistoryStore.open(url) as store:
        try:
            with store.engine.begin() as conn:
                conn.execute(tables()["trust_marks"].insert().values(
                    run_id=run.run_id, trusted=trusted, reason=reason or "trusted again", marked_at=now,
                    marked_by=_who()))
        except sa.exc.SQLAlchemyError as exc:
            raise unwritable(url, exc) from None
        marked = store.run(run.run_id)
    assert marked is not None
    what = "trusted again" if trusted else f"untrusted ({reason})"
    return Marked(marked, True, f"run {run.run_id} ({run.case}, {run.started_at}, {run.results_dir}): {what}; "
                                f"recorded at {now}")
