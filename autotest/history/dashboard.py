"""A static HTML dashboard of the history: one self-contained page, no server, no network.

Above the cases, one banner per recorded fleet finding (several cases changed at once, one cause named: see
:mod:`autotest.history.fleet`), each case it explains marked "caused by". Per case: the latest verdicts, shadow gates
that would have failed, what each night's runs cost beside the MDEs they reached (and, above the cases, the cost
of every case per night), drift and noise lines, and per gated statistic an inline SVG trend over
runs with the allowed band (up to the threshold, run by run), detected change points
marked, the first bad commit a nightly bisect named (history ``bisect_findings``) marked between the last
PASS and the first FAIL, and each point linking to its results folder's report.md. Rendering only: the
numbers come from the store and the change points from :mod:`autotest.history.drift`.
"""

from __future__ import annotations

import contextlib
import os
from datetime import datetime, timezone
from html import escape as escape_markup
from pathlib import Path
from typing import TYPE_CHECKING

from autotest.errors import UsageError
from autotest.history.database import describe
from autotest.history.fleet import FleetFinding
from autotest.history.frame import NightCost, export_rows, nightly_costs
from autotest.judge.model import COST_UNITS
from autotest.history.fleet_store import recorded_fleet_findings
from autotest.history.drift import (
    LOWER_IS_BETTER,
    StatisticHistory,
    all_change_points,
    drift_in,
    render_drift_lines,
    spread_in,
    statistic_histories,
)
from autotest.terminal import printable

if TYPE_CHECKING:
    from autotest.history.store import BisectFinding, HistoryStore, RunRow


def escape(value: str) -> str:
    """A stored value as HTML text: markup escaped, control characters shown as ``\\x1b`` (never raw bytes in the
    page: a terminal showing the file, or a browser's view-source, would act on them)."""
    return escape_markup(printable(str(value)))


LATEST_VERDICTS = 10
WIDTH, HEIGHT = 560, 210
LEFT, RIGHT, TOP, BOTTOM = 58, 12, 14, 30

STYLE = """
body { font: 14px/1.4 system-ui, sans-serif; margin: 24px; color: #1b1f24; }
h1 { margin-top: 0; } h2 { border-bottom: 1px solid #d0d7de; padding-bottom: 4px; margin-top: 32px; }
table.verdicts { border-collapse: collapse; margin-bottom: 12px; }
table.verdicts td, table.verdicts th { border: 1px solid #d0d7de; padding: 2px 8px; text-align: left; }
.PASS { color: #1a7f37; font-weight: 600; } .FAIL { color: #cf222e; font-weight: 600; }
.ERROR { color: #9a6700; font-weight: 600; }
.drift { background: #fff8c5; border: 1px solid #d4a72c; padding: 6px 10px; margin: 8px 0; }
.noise { background: #fbefff; border-color: #bf8700; }
.fleet { background: #ddf4ff; border: 1px solid #54aeff; padding: 8px 12px; margin: 8px 0; font-weight: 600; }
.fleet-cause { background: #ddf4ff; border: 1px solid #54aeff; padding: 6px 10px; margin: 8px 0; }
.culprit { background: #ffebe9; border: 1px solid #ff8182; padding: 6px 10px; margin: 8px 0; }
svg text.culprit { fill: #cf222e; }
.plots { display: flex; flex-wrap: wrap; gap: 16px; }
figure.trend { margin: 0; border: 1px solid #d0d7de; padding: 6px; }
figcaption { font-family: ui-monospace, monospace; font-size: 12px; }
svg text { font: 10px ui-monospace, monospace; fill: #57606a; }
tr.untrusted td { color: #8c959f; font-style: italic; }
circle.PASS { fill: #1a7f37; } circle.FAIL { fill: #cf222e; } circle.ERROR { fill: #9a6700; }
"""


def _href(results_dir: str, out_dir: Path, name: str = "report.md") -> str:
    target = Path(results_dir) / name
    try:
        return escape(os.path.relpath(target, out_dir).replace(os.sep, "/"))
    except ValueError:  # another drive (Windows): an absolute link still works
        return escape(target.as_uri())


def _fmt(value: float) -> str:
    return f"{value:.3g}"


def culprit_index(history: StatisticHistory, finding: "BisectFinding") -> int | None:
    """The point a finding marks: the first run at the flip's bad framework commit after one at its good commit."""
    seen_good = False
    for i, p in enumerate(history.points):
        sha = p.run.framework_sha or ""
        if sha == finding.good_sha:
            seen_good = True
        elif seen_good and sha == finding.bad_sha:
            return i
    return None


def trend_svg(history: StatisticHistory, out_dir: Path, findings: "list[BisectFinding] | None" = None) -> str:
    """An inline SVG of one statistic over runs: allowed band, points (linked), change points and the culprit
    commits bisects named (between the last good and the first bad run)."""
    points = history.points
    n = len(points)
    observed = [p.observed for p in points]
    thresholds = [p.threshold for p in points]
    lower_is_better = history.operator in LOWER_IS_BETTER or history.operator is None
    y_lo = min(0.0, *observed)
    y_hi = max(*observed, *thresholds) * 1.15 if max(*observed, *thresholds) > 0 else 1.0
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM

    def x(i: float) -> float:
        return LEFT + (plot_w * (i + 0.5) / n)

    def y(v: float) -> float:
        return TOP + plot_h * (1 - (v - y_lo) / ((y_hi - y_lo) or 1.0))

    edge = y_lo if lower_is_better else y_hi
    band = [f"{x(-0.5):.1f},{y(edge):.1f}"]
    for i, t in enumerate(thresholds):
        band += [f"{x(i - 0.5):.1f},{y(t):.1f}", f"{x(i + 0.5):.1f},{y(t):.1f}"]
    band.append(f"{x(n - 0.5):.1f},{y(edge):.1f}")
    threshold_line = " ".join(band[1:-1])
    parts = [f'<svg class="trend" xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" '
             f'viewBox="0 0 {WIDTH} {HEIGHT}" role="img" aria-label="{escape(history.check_id)}">',
             f'<rect x="{LEFT}" y="{TOP}" width="{plot_w}" height="{plot_h}" fill="#ffffff" stroke="#d0d7de"/>',
             f'<polygon class="band" points="{" ".join(band)}" fill="#dafbe1" stroke="none"/>',
             f'<polyline class="threshold" points="{threshold_line}" fill="none" stroke="#cf222e" '
             'stroke-dasharray="4 3"/>']
    for v in (y_lo, (y_lo + y_hi) / 2, y_hi):
        parts.append(f'<text x="{LEFT - 4}" y="{y(v) + 3:.1f}" text-anchor="end">{_fmt(v)}</text>')
    parts.append(f'<text x="{LEFT}" y="{HEIGHT - 8}">{escape(points[0].run.started_at[:10])}</text>')
    parts.append(f'<text x="{WIDTH - RIGHT}" y="{HEIGHT - 8}" text-anchor="end">'
                 f'{escape(points[-1].run.started_at[:10])} ({n} runs)</text>')
    for change in all_change_points(history):
        cx = x(change.index - 0.5)
        parts.append(f'<line class="change" x1="{cx:.1f}" x2="{cx:.1f}" y1="{TOP}" y2="{TOP + plot_h}" '
                     'stroke="#bf8700" stroke-width="2" stroke-dasharray="6 3"/>')
        parts.append(f'<text x="{cx + 3:.1f}" y="{TOP + 10}">change {change.shift:+.2f}x thr, '
                     f'p={change.p_value:.2g}</text>')
    for finding in findings or []:
        index = culprit_index(history, finding)
        if index is None:
            continue
        cx = x(index - 0.5)
        tip = (f"bisect: first bad commit {finding.first_bad_sha[:12]} {finding.subject} ({finding.author}), "
               f"confidence {finding.confidence}")
        parts.append(f'<line class="culprit" x1="{cx:.1f}" x2="{cx:.1f}" y1="{TOP}" y2="{TOP + plot_h}" '
                     f'stroke="#cf222e" stroke-width="2"><title>{escape(tip)}</title></line>')
        parts.append(f'<text class="culprit" x="{cx + 3:.1f}" y="{TOP + plot_h - 4}">culprit '
                     f'{escape(finding.first_bad_sha[:10])}</text>')
    path = " ".join(f"{'M' if i == 0 else 'L'}{x(i):.1f},{y(v):.1f}" for i, v in enumerate(observed))
    parts.append(f'<path d="{path}" fill="none" stroke="#8c959f"/>')
    for i, p in enumerate(points):
        tip = (f"{p.run.started_at} {p.status}: observed {_fmt(p.observed)} (threshold {_fmt(p.threshold)}), "
               f"commit {(p.run.framework_sha or '-')[:10]}")
        parts.append(f'<a href="{_href(p.run.results_dir, out_dir)}"><circle class="point {escape(p.status)}" '
                     f'cx="{x(i):.1f}" cy="{y(p.observed):.1f}" r="3.5"><title>{escape(tip)}</title></circle></a>')
    parts.append("</svg>")
    return "".join(parts)


def _cost(seconds: float | None, unit: str) -> str:
    return "-" if seconds is None else f"{seconds:.1f} {unit}"


def _costs_table(costs: list[NightCost]) -> str:
    """Nights (rows) by cases (columns): what each case's runs of the night cost, and the night's total."""
    cases = sorted({c.case for c in costs})
    cells = {(c.night, c.case): c for c in costs}
    rows = ["<tr><th>night (UTC)</th>" + "".join(f"<th>{escape(c)}</th>" for c in cases) + "<th>total</th></tr>"]
    for night in sorted({c.night for c in costs}, reverse=True)[:LATEST_VERDICTS]:
        mine = [cells[(night, c)] for c in cases if (night, c) in cells]
        units = {c.unit for c in mine if c.device_seconds is not None}
        # GPU- and CPU-seconds are not one currency: a night with both has no total
        total = sum(c.device_seconds for c in mine if c.device_seconds is not None) if len(units) == 1 else None
        rows.append(f"<tr><td>{escape(night)}</td>" + "".join(
            f"<td>{escape(_cost(cells[(night, c)].device_seconds, cells[(night, c)].unit))}</td>"
            if (night, c) in cells else "<td></td>" for c in cases)
            + f"<td>{escape(_cost(total, units.pop()) if len(units) == 1 else 'mixed units' if units else '-')}"
            "</td></tr>")
    return f'<table class="costs">{"".join(rows)}</table>'


def _night_costs(costs: list[NightCost]) -> str:
    """One case's nights: runs, their cost, and the MDE each gate reached in the night's latest run."""
    rows = ["<tr><th>night (UTC)</th><th>runs</th><th>cost</th><th>could have caught (MDE, latest run)</th></tr>"]
    for c in reversed(costs[-LATEST_VERDICTS:]):
        mdes = ", ".join(f"{check} ±{mde:.3g}" for check, mde in c.mdes.items()) or "-"
        rows.append(f"<tr><td>{escape(c.night)}</td><td>{c.runs}</td><td>{escape(_cost(c.device_seconds, c.unit))}"
                    f"</td><td>{escape(mdes)}</td></tr>")
    return f'<table class="night-costs">{"".join(rows)}</table>'


def _verdicts_table(runs: list["RunRow"], out_dir: Path) -> str:
    rows = ["<tr><th>run</th><th>started (UTC)</th><th>verdict</th><th>trusted</th><th>framework</th><th>harness</th>"
            "<th>hardware</th><th>cost</th><th>report</th></tr>"]
    for r in reversed(runs[-LATEST_VERDICTS:]):
        trust = "yes" if r.trusted else f"no: {r.why_untrusted}"
        rows.append(f"<tr class=\"{'trusted' if r.trusted else 'untrusted'}\"><td>{r.run_id}</td>"
                    f"<td>{escape(r.started_at)}</td><td class=\"{escape(r.status)}\">{escape(r.status)}</td>"
                    f"<td>{escape(trust)}</td><td>{escape((r.framework_sha or '-')[:10])}</td>"
                    f"<td>{escape((r.harness_sha or '-')[:10])}</td><td>{escape(r.hardware)}</td>"
                    f"<td>{escape(_cost(r.device_seconds, COST_UNITS.get(r.cost_basis or '', 'device-s')))}</td>"
                    f"<td><a href=\"{_href(r.results_dir, out_dir)}\">report.md</a></td></tr>")
    return f'<table class="verdicts">{"".join(rows)}</table>'


def _findings_lines(findings: "list[BisectFinding]", out_dir: Path) -> list[str]:
    lines = []
    for f in findings:
        report = _href(f.bisect_dir, out_dir, "bisect.md")
        lines.append(f'<div class="culprit">bisect ({escape(f.found_at[:10])}): first bad commit '
                     f"<code>{escape(f.first_bad_sha[:12])}</code> {escape(f.subject)} ({escape(f.author)}), "
                     f"confidence {escape(f.confidence)}, between <code>{escape(f.good_sha[:12])}</code> (PASS) and "
                     f'<code>{escape(f.bad_sha[:12])}</code> (FAIL); <a href="{report}">bisect.md</a></div>')
    return lines


def _shadow_lines(store: "HistoryStore", case: str, runs: list["RunRow"]) -> list[str]:
    """The shadow gates that would have failed in the latest runs (judged like gates, they decided no verdict)."""
    latest = {r.run_id for r in runs[-LATEST_VERDICTS:]}
    failed = [p for p in store.check_points(case, severity="shadow") if p.status == "FAIL" and p.run.run_id in latest]
    shown = lambda value: "-" if value is None else _fmt(value)  # noqa: E731
    return [f'<div class="shadow">shadow: {escape(p.check_id)} would have failed in run {p.run.run_id} '
            f"({escape(p.run.started_at)}, verdict {escape(p.run.status)}; observed {shown(p.observed)}, threshold "
            f"{shown(p.threshold)})</div>" for p in reversed(failed)]


def _cause_of(finding: FleetFinding) -> str:
    what = "; ".join(finding.changes) if finding.changes else "no recorded change"
    return f"{finding.kind} change between {finding.window_start[:10]} and {finding.window_end[:10]} ({what})"


def _fleet_banner(findings: list[FleetFinding]) -> list[str]:
    """One banner per recorded fleet finding, above every case: one cause, many cases, one next step."""
    return [f'<div class="fleet" id="fleet-{f.finding_id}" data-cases="{escape(" ".join(c.case for c in f.cases))}">'
            f"{escape(f.describe())} — "
            + ", ".join(f'<a href="#case-{escape(c.case)}">{escape(c.case)}</a>' for c in f.cases) + "</div>"
            for f in findings]


def _case_section(store: "HistoryStore", case: str, out_dir: Path, fleet: list[FleetFinding],
                  costs: list[NightCost]) -> str:
    histories = statistic_histories(store, case)
    drift = render_drift_lines([*drift_in(store, case), *spread_in(store, case)])
    findings = store.findings(case)
    runs = store.runs(case)
    parts = [f'<section class="case" id="case-{escape(case)}" data-case="{escape(case)}">',
             f"<h2>{escape(case)}</h2>", _verdicts_table(runs, out_dir), _night_costs(costs),
             *_shadow_lines(store, case, runs)]
    parts += [f'<div class="{"drift noise" if line.startswith("noise:") else "drift"}">{escape(line)}</div>'
              for line in drift]
    parts += [f'<div class="fleet-cause"><a href="#fleet-{f.finding_id}">caused by fleet finding {f.finding_id}'
              f"</a>: {escape(_cause_of(f))}</div>" for f in fleet]
    parts += _findings_lines(findings, out_dir)
    if not histories:
        parts.append("<p>No gated statistic with a threshold recorded yet.</p>")
    parts.append('<div class="plots">')
    for h in histories:
        caption = f"{h.check_id}: observed {h.operator or ''} threshold"
        parts.append(f'<figure class="trend" data-check="{escape(h.check_id)}">'
                     f"<figcaption>{escape(caption)}</figcaption>{trend_svg(h, out_dir, findings)}</figure>")
    parts.append("</div></section>")
    return "\n".join(parts)


def render_dashboard(store: "HistoryStore", out_dir: Path) -> str:

    cases = store.cases()
    generated = datetime.now(timezone.utc).isoformat(timespec="seconds")
    nav = " · ".join(f'<a href="#case-{escape(c)}">{escape(c)}</a>' for c in cases)
    fleet = recorded_fleet_findings(store)
    costs = nightly_costs(export_rows(store))
    sections = [_case_section(store, case, out_dir, [f for f in fleet if any(c.case == case for c in f.cases)],
                              [c for c in costs if c.case == case]) for case in cases]
    return "\n".join([
        "<!doctype html>", '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        "<title>rl-autotest history</title>", f"<style>{STYLE}</style>", "</head><body>",
        "<h1>rl-autotest history</h1>",
        f"<p>{len(cases)} case(s) from {escape(describe(store.url))}; generated {generated}. Green band: allowed "
        "side of the threshold; dashed amber line: a detected change point; solid red line: the first bad commit a "
        "bisect named, between the last PASS and the first FAIL; each point links to its report. "
        "Trends, bands and drift use trusted runs only (gate and calibration runs not marked untrusted); "
        "the others are listed, marked, in the verdicts table.</p>",
        f"<nav>{nav}</nav>", *_fleet_banner(fleet), "<h2>Cost per night</h2>", _costs_table(costs), *sections,
        "</body></html>", ""])


def write_dashboard(store: "HistoryStore", out_dir: str | Path) -> Path:
    """Write ``<out_dir>/index.html``; returns its path."""
    out = Path(out_dir).expanduser().resolve()
    html = render_dashboard(store, out)  # read everything first: a bad history writes nothing
    page = out / "index.html"
    tmp = page.with_suffix(".html.tmp")
    try:
        out.mkdir(parents=True, exist_ok=True)
        tmp.write_text(html, encoding="utf-8")
        tmp.replace(page)
    except OSError as exc:
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)
        raise UsageError(f"--out {out}: cannot write the dashboard ({exc.strerror or exc}); "
                         "give a writable folder") from None
    return page
