"""``rl-autotest history fleet``: cases that changed at the same nightly, triaged once for the fleet.

Exit codes: 0 no fleet finding, 1 at least one, 2 bad input. The history is read-only unless ``--record``.
The store, the drift detector and the calibration proposal are imported when the command runs.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Callable

from autotest.errors import UsageError
from autotest.terminal import echo

EXIT_OK, EXIT_FOUND = 0, 1


def add_fleet_parser(sub: argparse._SubParsersAction,
                     common: Callable[[argparse.ArgumentParser, str], None]) -> Callable[[argparse.Namespace], int]:
    """Register ``history fleet``; returns its action."""
    from autotest.run.results_dir import DEFAULT_ROOT_HELP

    p = sub.add_parser("fleet", help="cases that changed at the same nightly: one finding naming an environment "
                       "change (one batch recalibration) or one bisect for a code change (docs/history.md)")
    p.add_argument("--nights", type=int, default=7, metavar="N",
                   help="look at changes within the latest N nights of the history (default 7)")
    p.add_argument("--min-cases", type=int, default=2, metavar="K",
                   help="cases changing in one window that make a fleet event (default 2)")
    p.add_argument("--record", action="store_true",
                   help="record the findings in the history and mark each case's change as caused by its finding")
    p.add_argument("--batch-out", type=Path, metavar="DIR",
                   help="write each environment finding's batch recalibration (review.md, recalibrate.sh) "
                        "under DIR/fleet-<id>/")
    p.add_argument("--runs", type=int, default=3, metavar="N",
                   help="runs per case in the batch recalibration (default 3)")
    common(p, f"results root holding history.sqlite (default: {DEFAULT_ROOT_HELP})")
    return _fleet


def _fleet(args: argparse.Namespace) -> int:
    from autotest.history.database import resolve_url
    from autotest.history.fleet import ENVIRONMENT, FleetParams, triage
    from autotest.history.fleet_store import record_fleet_findings
    from autotest.history.store import HistoryStore, open_for_reading
    from autotest.run.results_dir import default_results_root

    root = args.results_dir or default_results_root()

    for flag, value, least in (("--nights", args.nights, 1), ("--min-cases", args.min_cases, 2),
                               ("--runs", args.runs, 2)):
        if value < least:
            raise UsageError(f"{flag}: must be at least {least}, got {value}")
    if args.batch_out is not None and args.batch_out.exists() and not args.batch_out.is_dir():
        raise UsageError(f"--batch-out {args.batch_out}: is not a folder; give a folder")
    params = FleetParams(min_cases=args.min_cases, nights=args.nights)
    with open_for_reading(args.history, root) as reader:  # a missing or empty history is "no runs", never created
        findings = triage(reader, params=params)
    if args.record and findings:
        with HistoryStore.open(resolve_url(args.history, root)) as store:
            findings = record_fleet_findings(store, findings)
    if not findings:
        echo(f"no fleet finding: no {args.min_cases} or more cases changed in one window of the latest "
              f"{args.nights} night(s)")
        return EXIT_OK
    for finding in findings:
        echo(finding.describe())  # recorded values (an image, a package version) are shown, never obeyed
        for cause in finding.cases:
            checks = f" ({', '.join(cause.check_ids)})" if cause.check_ids else ""
            echo(f"  {cause.case}: {cause.event}{checks} between runs {cause.good_run_id} and {cause.bad_run_id}: "
                  f"caused by this finding" + (f"; its changes: {'; '.join(cause.changes)}" if cause.changes else ""))
        if finding.kind == ENVIRONMENT and args.batch_out is not None:
            from autotest.calibration.batch import batch_proposal, write_batch

            with open_for_reading(args.history, root) as reader:
                proposal = batch_proposal(reader, finding, args.runs)
            name = f"fleet-{finding.finding_id}" if finding.finding_id is not None else \
                f"fleet-{finding.window_end[:10]}-{finding.key[:8]}"
            review, script = write_batch(proposal, args.batch_out / name)
            echo(f"  batch recalibration ({len(proposal.candidates)} candidate(s)): review {review}, "
                  f"commands {script}")
    return EXIT_FOUND
