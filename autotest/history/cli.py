"""``rl-autotest history ingest|show|drift|dashboard|export|untrust|trust|promote-ready``: a thin shell over the history
functions.

Exit codes as everywhere: 0 fine, 1 drift found (``drift``), 2 bad input (one line, no traceback),
and 2 for ``show``/``drift``/``dashboard`` on a history with no runs ("no runs in <url>": nothing to judge).
``show``, ``drift`` and ``dashboard`` open the history read-only; the default results root is ``run``'s.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Callable, Mapping, Sequence

from autotest.errors import UsageError
from autotest.history import HISTORY_ENV
from autotest.history.database import SQLITE_NAME, describe, resolve_url, sqlite_url
from autotest.run.results_dir import DEFAULT_ROOT_HELP, default_results_root
from autotest.terminal import echo, printable

# The store, drift, dashboard and trust modules (SQLAlchemy, NumPy, the judge) are imported inside the action
# that needs them: `rl-autotest --help` and every other command build this parser.

EXIT_OK, EXIT_DRIFT = 0, 1


def _ingest(args: argparse.Namespace) -> int:
    from autotest.history.store import ingest

    outcome = ingest(args.paths, args.history or (sqlite_url(args.results_dir / SQLITE_NAME)
                                                  if args.results_dir else None))
    for warning in outcome.warnings:
        echo(f"warning: {warning}", file=sys.stderr)

    echo(f"history {describe(outcome.url)}: recorded {len(outcome.recorded)} run(s), "
          f"{len(outcome.already_recorded)} already recorded")
    return EXIT_OK


def _positive(text: str) -> int:
    try:  # argparse would name this function ("invalid _positive value") for a bare ValueError
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number; give how many runs, e.g. 10") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def _root(args: argparse.Namespace) -> Path:
    """--results-dir, else the root ``run`` writes to (``$RL_AUTOTEST_RESULTS``, the project's, the demo's)."""
    return args.results_dir or default_results_root()


def _open(args: argparse.Namespace):
    from autotest.history.store import open_for_reading

    return open_for_reading(args.history, _root(args))


def _check_case(store, case: str) -> None:
    cases = store.cases()
    if case not in cases:
        raise UsageError(f"no runs of case {case!r} in the history (cases: {', '.join(cases) or 'none yet'})")


def _only_case(args: argparse.Namespace) -> str | None:
    """``--case``: None when not given (every case); an empty name is refused, never read as "every case"."""
    if args.case is not None and not args.case.strip():
        raise UsageError(f"--case: {args.case!r} is not a case name; give one (history show lists them), or leave "
                         "--case out for every case")
    return args.case


def _cell(value: object) -> str:
    """One table cell: floats to 6 significant digits, nothing as '-', control characters escaped (a
    ``--why`` or a path is user text: a terminal escape in it must be shown, never obeyed)."""
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.6g}"
    return printable(str(value))


def render_table(rows: Sequence[Mapping[str, object]]) -> list[str]:
    """Rows of one shape as aligned text lines, a header first; numbers right-aligned."""
    columns = list(rows[0]) if rows else []
    header = [printable(str(c)) for c in columns]  # a column may be a recorded check id: user text too
    cells = [[_cell(row.get(c)) for c in columns] for row in rows]
    numeric = [all(isinstance(row.get(c), (int, float)) and not isinstance(row.get(c), bool)
                   for row in rows if row.get(c) is not None) for c in columns]
    widths = [max([len(c), *(len(line[i]) for line in cells)]) for i, c in enumerate(header)]

    def line(values: Sequence[str]) -> str:
        return "  ".join(v.rjust(w) if num else v.ljust(w) for v, w, num in zip(values, widths, numeric)).rstrip()
    return [line(header), *(line(values) for values in cells)]


def _show(args: argparse.Namespace) -> int:
    with _open(args) as store:
        _check_case(store, args.case)
        if args.metric:
            summaries = store.metric_rows(args.case, args.metric)
            if not summaries:
                raise UsageError(f"no summaries of metric {args.metric!r} for {args.case!r} in the history")
            points = [p for p in store.check_points(args.case) if p.metric == args.metric]
            trust = {r.run_id: "yes" if r.trusted else f"no: {r.why_untrusted}" for r in store.runs(args.case)}
            observed: dict[str, dict[int, float | None]] = {}
            for p in points:
                observed.setdefault(p.check_id, {})[p.run.run_id] = p.observed
            rows = []
            for summary in summaries:
                row = dict(summary)
                items = list(row.items())
                items.insert(3, ("trusted", trust.get(row["run_id"])))
                row = {k: v for k, v in items if k not in ("metric", "run_id")}
                row.update({check_id: by_run.get(summary["run_id"]) for check_id, by_run in sorted(observed.items())})
                rows.append(row)
        else:
            runs = store.runs(args.case)
            failing: dict[int, list[str]] = {}
            for p in store.check_points(args.case):
                if p.status != "PASS":
                    failing.setdefault(p.run.run_id, []).append(p.check_id)
            rows = [{
                "run": r.run_id, "started_at": r.started_at, "status": r.status,
                "trusted": "yes" if r.trusted else f"no: {r.why_untrusted}",
                "framework": (r.framework_sha or "-")[:10],
                "harness": (r.harness_sha or "-")[:10], "hardware": r.hardware,
                "not passing": ", ".join(failing.get(r.run_id, [])) or "-", "results": r.results_dir}
                for r in runs]
    if args.last:
        rows = rows[-args.last:]
    echo(*render_table(rows))
    return EXIT_OK


def _drift(args: argparse.Namespace) -> int:
    from autotest.history.drift import drift_in, render_drift_lines, spread_in, statistic_histories
    from autotest.history.fleet_store import recorded_fleet_findings

    only = _only_case(args)
    with _open(args) as store:
        cases = [only] if only is not None else store.cases()
        if only is not None:
            _check_case(store, only)
        found = False
        fleet = recorded_fleet_findings(store)
        for case in cases:
            findings = [*drift_in(store, case), *spread_in(store, case)]
            echo(*render_drift_lines(findings))
            for cause in (f for f in fleet if findings and any(c.case == case for c in f.cases)):
                # the same change in many cases is one finding: this case's drift is explained there
                echo(f"  {case}: caused by fleet finding {cause.finding_id} ({cause.kind}, "
                      f"{cause.window_start[:10]} .. {cause.window_end[:10]}); history fleet shows it")
            if not findings:
                histories = statistic_histories(store, case)
                runs = max((len(h.points) for h in histories), default=0)
                untrusted = sum(not r.trusted for r in store.runs(case))
                left_out = f" ({untrusted} untrusted run(s) left out; history show {case} lists them)" \
                    if untrusted else ""
                echo(f"no drift: {case}, {len(histories)} gated statistics over {runs} runs{left_out}")
            found = found or bool(findings)
    return EXIT_DRIFT if found else EXIT_OK


def _dashboard(args: argparse.Namespace) -> int:
    out = args.out.expanduser()
    if out.exists() and not out.is_dir():
        raise UsageError(f"--out {out}: is not a folder (the dashboard is a folder holding index.html); "
                         "give a folder")
    from autotest.history.dashboard import write_dashboard

    with _open(args) as store:
        page = write_dashboard(store, args.out)
    echo(f"dashboard: {page}")
    return EXIT_OK


def _export(args: argparse.Namespace) -> int:
    from autotest.history.frame import export_rows, write_export

    only = _only_case(args)
    with _open(args) as store:
        if only is not None:
            _check_case(store, only)
        rows = export_rows(store, only)
    out = write_export(rows, args.format, args.out.expanduser())
    runs = len({r["run_id"] for r in rows})
    echo(f"history export: {len(rows)} row(s) of {runs} run(s) (one per gate check, cost and MDE beside) to {out}")
    return EXIT_OK


def count_option(text: str, flag: str, minimum: int) -> int:
    """A whole number >= ``minimum`` given to ``flag``; anything else is one line (exit 2)."""
    try:
        value = int(text)
    except ValueError:
        raise UsageError(f"{flag}: {text!r} is not a whole number; give e.g. {flag} {max(minimum, 7)}") from None
    if value < minimum:
        raise UsageError(f"{flag}: must be at least {minimum}, got {value}")
    return value


def _promote_ready(args: argparse.Namespace) -> int:
    from autotest.history.shadow_ready import shadow_standings

    nights = count_option(args.nights, "--nights", 1)
    allowed = count_option(args.allowed, "--allowed", 0)
    only = _only_case(args)
    with _open(args) as store:
        if only is not None:
            _check_case(store, only)
        standings = [s for case in ([only] if only is not None else store.cases())
                     for s in shadow_standings(store, case, nights, allowed)]
    if not standings:
        where = f"case {only!r}" if only is not None else "any case"
        echo(f"no shadow gates in the last {nights} trusted gate run(s) of {where}")
        return EXIT_OK
    echo(*render_table([s.row() for s in standings]))
    ready = sum(s.ready for s in standings)
    echo(f"{ready} of {len(standings)} shadow gate(s) ready to block (held {nights} trusted night(s), at most "
          f"{allowed} false alarm(s)); promote with rl-autotest baseline promote CASE --shadow CHECK")
    return EXIT_OK


def _mark(args: argparse.Namespace, trusted: bool) -> int:
    from autotest.history.trust import mark_run

    marked = mark_run(resolve_url(args.history, _root(args)), args.run, trusted=trusted, why=args.why)
    echo(marked.message)  # the reason is user text: its terminal escapes are shown, not obeyed
    return EXIT_OK


def _untrust(args: argparse.Namespace) -> int:
    return _mark(args, trusted=False)


def _trust(args: argparse.Namespace) -> int:
    return _mark(args, trusted=True)


def add_history_parser(subparsers: argparse._SubParsersAction,
                       commands: dict[str, Callable[[argparse.Namespace], int]]) -> None:
    """Register ``history`` and its actions; store the dispatcher in ``commands``."""
    h = subparsers.add_parser("history", help="record verdicts, show them, detect drift, build the dashboard")
    sub = h.add_subparsers(dest="history_command", required=True, metavar="ACTION")

    def common(p: argparse.ArgumentParser, root_help: str) -> None:
        p.add_argument("--history", metavar="URL",
                       help=f"history database: sqlite:///PATH or postgresql://USER@HOST/DB (default: ${HISTORY_ENV}, "
                            "else <results root>/history.sqlite)")
        p.add_argument("--results-dir", type=Path, help=root_help)

    p = sub.add_parser("ingest", help="record results folders (idempotent; a results root is walked)")
    p.add_argument("paths", nargs="+", type=Path, metavar="RESULTS_DIR", help="results folder or results root")
    common(p, "results root whose history.sqlite to use (default: the root ingested)")

    p = sub.add_parser("show", help="a case's runs as a table (or one metric's summaries with --metric)")
    p.add_argument("case", help="case name")
    p.add_argument("--metric", help="show this metric's per-run summaries and check statistics")
    p.add_argument("--last", type=_positive, help="only the latest N runs")
    common(p, f"results root holding history.sqlite (default: {DEFAULT_ROOT_HELP})")

    p = sub.add_parser("drift", help="exit 1 when a gated statistic changed persistently in the latest runs")
    p.add_argument("--case", help="only this case (default: every case in the history)")
    common(p, f"results root holding history.sqlite (default: {DEFAULT_ROOT_HELP})")

    p = sub.add_parser("dashboard", help="write a static HTML dashboard (no server needed)")
    p.add_argument("--out", type=Path, required=True, help="folder to write index.html into")
    common(p, f"results root holding history.sqlite (default: {DEFAULT_ROOT_HELP})")

    p = sub.add_parser("export", help="every run's gates with its cost and MDE, as CSV or parquet for a notebook")
    p.add_argument("--format", choices=("csv", "parquet"), default="csv",
                   help="csv (no extra needed) or parquet (needs pyarrow: pip install 'rl-autotest[notebook]')")
    p.add_argument("--out", type=Path, required=True, help="file to write")
    p.add_argument("--case", help="only this case (default: every case in the history)")
    common(p, f"results root holding history.sqlite (default: {DEFAULT_ROOT_HELP})")

    p = sub.add_parser("promote-ready", help="shadow gates that held for K trusted nights, with their observed "
                       "false-alarm rate (docs/history.md)")
    p.add_argument("--nights", default="7", metavar="K",
                   help="the last K trusted gate runs a shadow gate must have held (default 7)")
    p.add_argument("--allowed", default="0", metavar="N",
                   help="false alarms (a shadow FAIL on a night the run passed) a ready gate may have had (default 0)")
    p.add_argument("--case", help="only this case (default: every case in the history)")
    common(p, f"results root holding history.sqlite (default: {DEFAULT_ROOT_HELP})")

    p = sub.add_parser("untrust", help="keep a run out of calibrate --from-history, drift and the dashboard's bands")
    p.add_argument("run", metavar="RUN", help="run id (history show lists them) or its results folder")
    p.add_argument("--why", required=True, help="why the run is not to be trusted (recorded with when and who)")
    common(p, f"results root holding history.sqlite (default: {DEFAULT_ROOT_HELP})")

    p = sub.add_parser("trust", help="revoke an untrust mark: the run feeds calibration, drift and bands again")
    p.add_argument("run", metavar="RUN", help="run id (history show lists them) or its results folder")
    p.add_argument("--why", help="why it is trusted again (recorded with the mark)")
    common(p, f"results root holding history.sqlite (default: {DEFAULT_ROOT_HELP})")

    actions = {"ingest": _ingest, "show": _show, "drift": _drift, "dashboard": _dashboard, "export": _export,
               "untrust": _untrust, "trust": _trust, "promote-ready": _promote_ready}
    from autotest.history.fleet_cli import add_fleet_parser

    actions["fleet"] = add_fleet_parser(sub, common)
    commands["history"] = lambda args: actions[args.history_command](args)
