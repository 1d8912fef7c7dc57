"""Render a verdict: results.json, report.md and the CI step summary. Renderers never recompute.

Results folder layout::

    results.json   schema-versioned verdict (every check, its parameters, points and triage)
    report.md      verdict → metric table → failing points → paths → commit → next step
    plots/*.png    one per checked metric (see autotest.report.plots)
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from autotest.errors import WriteFailed
from autotest.files import append_text, portable, write_atomic
from autotest.inputs.roles import ROLES, base_role
from autotest.judge.checks import fmt
from autotest.judge.model import ERROR, FAIL, INFO, PASS, CheckResult, Measured, TriageFinding, Verdict
from autotest.judge.power import cost_and_power_phrase
from autotest.judge.shadow import shadow_alarms, shadow_line
from autotest.redaction import mask_known
from autotest.report.md_safe import md_code, md_text
from autotest.report.power_table import cost_and_power_section
from autotest.report.spec_section import spec_lines
from autotest.scopes import find

STATUS_MARK = {PASS: "✅ PASS", FAIL: "❌ FAIL", ERROR: "⚠️ ERROR", INFO: "ℹ️ INFO"}


def relaunches_of(context: dict[str, Any]) -> list[str]:
    """One "kind (signature)" per relaunch in the verdict's retry trail; empty for a first attempt's verdict."""
    return [f"{a['infra']['kind']} ({a['infra']['signature']})"
            for a in context.get("retries") or () if a["decision"]["retry"]]


def relaunch_phrase(relaunches: Sequence[str]) -> str:
    """" after 1 relaunch (port_in_use (Address already in use))", said wherever a verdict is shown."""
    n = len(relaunches)
    return f" after {n} relaunch{'es' if n > 1 else ''} ({', '.join(relaunches)})" if n else ""


def kind_phrase(verdict: Verdict) -> str:
    """" (performance gate)", " (environment: the runner was busy; exit 75, retry)": which kind of gate decided."""
    kind = verdict.deciding_kind()
    if not kind:
        return ""
    if verdict.environment_only:
        return " (environment: a performance gate the runner's contention explains; exit 75, retry on a quiet runner)"
    return f" ({kind} gate{'s' if ' and ' in kind else ''})"


def machine_lines(machine: dict[str, Any] | None) -> list[str]:
    """The report's "Runner contention" section: the run's wait for a CPU, the load and the probe, before, during
    and after the run (the full series: logs/contention.json)."""
    if not machine:
        return []
    during = machine.get("during") or {}
    rows = ["", "## Runner contention", "", "| when | load per core | other processes' CPU share | CPU steal | "
            "run's wait for a CPU | probe (CPU s / wall s) | GPUs |", "|---|---|---|---|---|---|---|"]

    def share(value: Any) -> str:
        return "-" if value is None else f"{value:.0%}"

    for when in ("before", "after"):
        snap = machine.get(when) or {}
        probe = snap.get("probe") or {}
        gpu = snap.get("gpu") or {}
        gpus = "-"
        if gpu:
            throttled = sorted({r for g in gpu.get("gpus", []) for r in g.get("slowing_throttle_reasons", [])})
            gpus = (f"{len(gpu.get('other_processes', []))} other process(es)"
                    + (f", throttled: {', '.join(throttled)}" if throttled else ""))
        shown_probe = (f"{probe.get('cpu_s')} / {probe.get('wall_s')}" if probe.get("wall_s") is not None
                       else probe.get("error", "-"))
        rows.append(f"| {when} | {snap.get('load_per_core', '-')} | {share(snap.get('others_cpu_share'))} | "
                    f"{share(snap.get('steal_share'))} | - | {shown_probe} | {gpus} |")
    if during:
        rows.insert(-1, f"| during ({during.get('span_s')} s, {machine.get('samples')} samples) | "
                        f"{during.get('load_per_core_mean')} (max {during.get('load_per_core_max')}) | "
                        f"{share(during.get('others_cpu_share_mean'))} | - | "
                        f"{share(during.get('run_delay_share'))} ({during.get('run_delay_s')} s) | - | - |")
    if machine.get("unmeasured"):
        rows += ["", f"- the run's own threads were not measured: {machine['unmeasured']}"]
    return rows


def write_results_json(verdict: Verdict, out_dir: Path, extra: dict[str, Any] | None = None) -> Path:
    """results.json; paths inside ``out_dir`` are written relative to it, so the folder can move."""
    data = verdict.to_dict()
    if extra:
        data.update(extra)
    data = portable(data, Path(out_dir).resolve())
    path = out_dir / "results.json"
    # no indent: the C encoder is ~10x faster on checks with thousands of points
    write_atomic(path, json.dumps(data, ensure_ascii=False) + "\n")
    return path


def _golden_and_current(result: CheckResult) -> tuple[str, str, str]:
    """Show the point that decided the check: first breach, else the worst point, else the last."""
    step = result.first_breach_step if result.first_breach_step is not None else result.worst_step
    point = result.points.at(step) or (result.points[-1] if len(result.points) else None)
    if point is None:
        return "-", "-", "-"
    return fmt(point.baseline), fmt(point.current), str(point.step)


def _table(verdict: Verdict) -> list[str]:
    lines = ["| check | status | step | golden | current | error | threshold | severity |",
             "|---|---|---|---|---|---|---|---|"]
    for r in verdict.results:
        if r.kind == "structural":
            lines.append(f"| {r.check_id} | {STATUS_MARK[r.status]} | - | - | {fmt(r.observed)} | - | - | "
                         f"{r.severity} |")
            continue
        golden, current, step = _golden_and_current(r)
        threshold = f"{r.method} {r.operator} {r.threshold:g}" if r.threshold is not None else "-"
        # the point shown is the first breach or the worst step; a reduced check compares its statistic
        error = fmt(r.observed)
        kind = find(r.scope)
        if kind is not None and r.observed is not None:
            error, threshold, step = kind.table_cells(r, error, threshold, step)
        severity = r.severity if r.blocking else f"{r.severity} (non-blocking)"
        lines.append(f"| {r.check_id} | {STATUS_MARK[r.status]} | {step} | {golden} | {current} | "
                     f"{error} | {threshold} | {severity} |")
    return lines


def _headline(verdict: Verdict) -> str:
    """``✅ PASS``, with "after 1 relaunch (…)" and "(mean of K replicates)" where they apply."""
    mean = f" (mean of {len(verdict.replicates)} replicates)" if verdict.replicates else ""
    return f"{STATUS_MARK[verdict.status]}{relaunch_phrase(relaunches_of(verdict.context))}{mean}"


def _replicates(verdict: Verdict, link: Callable[[object], str]) -> list[str]:
    """Every replicate: its seed, exit, own verdict and own value of each check, beside the mean's."""
    if not verdict.replicates:
        return []
    averaged = [r for r in verdict.replicates if r.averaged]
    scale = verdict.pooled_threshold_scale
    scaled = (f"Pooled thresholds are the calibrated ones x {scale:.3f} = sqrt((1/K + 1/N) / (1 + 1/N)) for "
              f"K = {len(averaged)} (N = calibration runs; see each check's derivation in results.json), which "
              "keeps the calibrated false-alarm rate; other thresholds are kept. ") if scale is not None else ""
    about = (f"The checks above judge the mean of {len(averaged)} complete replicate(s) of {len(verdict.replicates)}, "
             "per step at the steps all of them logged (timing metrics `time/*`: the median replicate, since their "
             f"noise is the machine's). {scaled}Each replicate's own verdict (one run, thresholds unscaled) is in "
             "its folder.")
    lines = ["## Replicates", "", about, "",
             "| replicate | seed | exit | wall s | own verdict | in the mean | folder |",
             "|---|---|---|---|---|---|---|"]
    for r in verdict.replicates:
        lines.append(f"| {r.label} | {r.seed} | {r.exit} | {fmt(r.wall_s)} | {STATUS_MARK.get(r.status, r.status)} "
                     f"| {'yes' if r.averaged else 'no'} | {link(r.folder)} |")
    metric_checks = [c for c in verdict.results if c.kind == "metric"]
    if metric_checks:
        lines += ["", "Observed value of each check (what its threshold bounds): the mean's, then each replicate's.",
                  "",
                  "| check | mean | " + " | ".join(r.label for r in verdict.replicates) + " |",
                  "|---|---|" + "---|" * len(verdict.replicates)]
        for c in metric_checks:
            own = " | ".join(fmt(r.observed.get(c.check_id)) for r in verdict.replicates)
            lines.append(f"| {c.check_id} | {fmt(c.observed)} {STATUS_MARK[c.status]} | {own} |")
    return lines + [""]


def _failing_points(verdict: Verdict) -> list[str]:
    rows = [(r, p) for r in verdict.results if r.status == FAIL for p in r.points.breaches()]
    if not rows:
        return []
    lines = ["", "### Breaching points (only the rows that differ)", "",
             "| metric | step | golden | current | error | threshold |", "|---|---|---|---|---|---|"]
    for r, p in rows[:50]:
        lines.append(f"| {r.metric} | {p.step} | {fmt(p.baseline)} | {fmt(p.current)} | {fmt(p.error)} | "
                     f"{r.method} {r.operator} {r.threshold:g} |")
    if len(rows) > 50:
        lines.append(f"| ... {len(rows) - 50} more in results.json | | | | | |")
    return lines


def _by_role(verdict: Verdict) -> Callable[[tuple[str, str]], tuple[int, str]]:
    """Plots in the order of the role vocabulary (reward first, time last); metrics without a role after."""
    order = list(ROLES)

    def key(item: tuple[str, str]) -> tuple[int, str]:
        role = verdict.metric_roles.get(item[0])
        return (order.index(base_role(role)) if role else len(order), item[0])
    return key


def _plot_label(verdict: Verdict, metric: str) -> str:
    role = verdict.metric_roles.get(metric)
    return f"{metric} ({role})" if role else metric


def _evidence_table(verdict: Verdict) -> list[str]:
    """What triage read, per metric role over the whole run (rendered as is from the verdict)."""
    if not verdict.evidence:
        return []
    lines = ["", "## Triage evidence (per metric role, whole run)", ""]
    if verdict.roles_note:
        lines += [f"{verdict.roles_note}.", ""]
    lines += ["| role | group | metrics | gate checks | over the whole run |", "|---|---|---|---|---|"]
    for e in verdict.evidence:
        if e.breached:
            step = f" from step {e.first_breach_step}" if e.first_breach_step is not None else ""
            state = f"breached{step} (`{e.breached[0]}`{', non-finite' if e.non_finite else ''})"
        elif e.in_bounds:
            state = "within bounds at every step"
        else:
            state = f"undecided ({e.undecided} could not decide)" if e.undecided else "not checked"
        metrics = ", ".join(f"`{m}`" for m in e.metrics)
        lines.append(f"| {e.role} | {e.group} | {metrics} | {e.gates} | {state} |")
    return lines


def hypothesis_table(measured: Sequence[Measured]) -> list[str]:
    """What was measured for each hypothesis beyond the role rows (rendered as is; a golden or a paired verdict's)."""
    if not measured:
        return []
    lines = ["", "## Triage evidence (per hypothesis, measured)", "",
             "| hypothesis | what was measured | holds | found |", "|---|---|---|---|"]
    for m in measured:
        lines.append(f"| {m.hypothesis} | {m.measured} | {'yes' if m.holds else 'no'} | {md_text(m.finding)} |")
    return lines


def finding_lines(findings: Sequence[TriageFinding]) -> list[str]:
    """The ranked next steps, each with its rule and evidence (rendered as is; a golden or a paired verdict's)."""
    lines = []
    for f in findings:
        marker = "**" if f.primary else ""
        ranked = f"; ranked below: {f.why_ranked}" if f.why_ranked else ""
        ranked += f"; uncertain: as likely as `{f.uncertain_with}` ({f.to_tell})" if f.uncertain_with else ""
        lines.append(f"{f.rank}. {marker}{f.suggestion}{marker} — rule `{f.rule}`; evidence: {f.evidence}{ranked}")
    return lines


def render_markdown(verdict: Verdict, plots: dict[str, str] | None = None, history: Sequence[str] = (),
                    folder: Path | None = None) -> str:
    """report.md; ``history`` lines (drift across earlier runs) sit right under the verdict.

    With ``folder`` (where report.md is written) the files inside it are relative links, so the report
    still resolves them once the folder is downloaded elsewhere.
    """
    ctx = verdict.context

    def link(path: object) -> str:
        shown = portable(str(path), folder) if folder is not None else str(path)
        return f"[{shown}]({shown})" if not Path(shown).is_absolute() and shown != str(path) else f"`{shown}`"
    lines = [f"# {verdict.case}: {_headline(verdict)}", ""]
    if kind_phrase(verdict):
        lines += [f"Decided by: {kind_phrase(verdict).strip()[1:-1]}", ""]
    problems = [r for r in verdict.results if r.status in (FAIL, ERROR) and r.is_gate]
    for r in problems:
        lines.append(f"- **{r.status}** {r.message}")
    shadows = shadow_alarms(verdict.results)  # judged like gates, never deciding the run
    lines += [f"- {shadow_line(r)}" for r in shadows]
    if problems or shadows:
        lines.append("")
    if history:
        lines += ["## History (earlier runs of this case)", "", *[f"- {line}" for line in history], ""]
    lines += ["## Checks (measured)", "", *_table(verdict), *_failing_points(verdict), ""]
    lines += cost_and_power_section(verdict)
    lines += _replicates(verdict, link)
    lines += ["## Messages", ""] + [f"- `{r.check_id}` {r.status}: {r.message}" for r in verdict.results] + [""]
    lines += ["## Suggested next step (inferred from the breach pattern)", ""]
    if verdict.triage:
        lines += finding_lines(verdict.triage)
    elif verdict.status == PASS:
        lines.append("- none: every gate passed")
    else:
        lines.append("- no rule matched; read the failing checks above and the run's logs")
    lines += _evidence_table(verdict)
    lines += hypothesis_table(verdict.measured)
    lines += ["", "## Sources", "",
              f"- current run metric log: {link(verdict.current_source)}",
              f"- golden values: {link(verdict.baseline_source)}",
              f"- baseline file: {link(verdict.baseline_file)}"]
    for key in ("results_dir", "work_dir", "stdout_log", "stderr_log", "card"):
        if ctx.get(key):
            lines.append(f"- {key.replace('_', ' ')}: {link(ctx[key])}")
    if ctx.get("consistency_report"):
        lines.append(f"- consistency root-cause report: {link(ctx['consistency_report'])}")
    elif ctx.get("consistency_request"):
        lines.append(f"- consistency dump requested: {link(ctx['consistency_request'])} "
                     "(run `rl-autotest consistency` on this results folder)")
    commit = ctx.get("commit")
    lines += ["", "## Commit under test", ""]
    if isinstance(commit, dict):
        lines.append(f"- `{commit.get('sha', 'unknown')}` ({commit.get('repo', '')})"
                     + (" — dirty tree" if commit.get("dirty") else ""))
        if commit.get("diff_stat"):
            lines += ["", "```", str(commit["diff_stat"]).rstrip(), "```"]
    else:
        lines.append(f"- {commit or 'not recorded (compare of an existing log)'}")
    framework = ctx.get("framework")
    if isinstance(framework, dict):
        lines.append(f"- framework under test: {framework_line(framework)}")
    lines += spec_lines(verdict.framework_spec)
    lines += machine_lines(ctx.get("machine"))
    if ctx.get("hardware_thresholds"):
        lines += ["", "## Per-hardware thresholds applied", "", *[f"- {line}" for line in ctx["hardware_thresholds"]]]
    decided = ctx.get("decided")
    if isinstance(decided, dict) and decided.get("fraction") is not None:
        lines += ["", "## Decided early", "", f"- FAIL decided at step {decided.get('step')} of {decided.get('of')} "
                  f"({decided['fraction']:.0%} of the run's steps) by fail-fast; the run was stopped there: "
                  f"{md_text(str(decided.get('reason')))}"]
    for key in ("launch", "retries", "time_to_verdict_s", "recipe"):
        if ctx.get(key):
            shown = portable(ctx[key], folder) if folder is not None else ctx[key]
            lines += ["", f"## {key.replace('_', ' ').capitalize()}", "", "```json",
                      json.dumps(shown, indent=2, default=str), "```"]
    if plots:
        lines += ["", "## Plots", ""] + [f"![{_plot_label(verdict, metric)}]({rel})"
                                         for metric, rel in sorted(plots.items(), key=_by_role(verdict))]
    if ctx.get("unsaved"):
        lines += ["", "## Not saved", ""] + [f"- {line}" for line in ctx["unsaved"]]
    lines += left_out_lines(ctx.get("left_out"))
    if ctx.get("plots_error"):
        lines += ["", "## Plots", "", f"- {ctx['plots_error']}"]
    if verdict.warnings:
        lines += ["", "## Reader warnings", ""] + [f"- {w}" for w in verdict.warnings]
    return "\n".join(lines) + "\n"


def render_step_summary(verdict: Verdict, report_path: Path | None = None, history: Sequence[str] = ()) -> str:
    """The verdict in a few lines for $GITHUB_STEP_SUMMARY; every value from outside is made inert markdown."""
    failing = [r for r in verdict.results if r.status in (FAIL, ERROR) and r.is_gate]
    lines = [f"### {md_text(verdict.case)}: {md_text(_headline(verdict))}", ""]
    lines += [f"- {r.status}: {md_text(r.message)}" for r in failing[:10]]
    lines += [f"- {md_text(shadow_line(r))}" for r in shadow_alarms(verdict.results)[:10]]
    lines += [f"- attempt {a['attempt']}: {md_text(a['verdict'])}, {md_text(a['decision']['reason'])}; log "
              f"{md_code(a['log_path'])}" for a in verdict.context.get("retries") or () if a["decision"]["retry"]]
    lines += [f"- {md_text(line)}" for line in history]
    primary = next((f for f in verdict.triage if f.primary), None)
    if primary:
        lines.append(f"- next step: {md_text(primary.next_step)}")
    phrase = cost_and_power_phrase(verdict)
    if phrase:
        lines.append(f"- {md_text(phrase)}")
    lines += [f"- warning: {md_text(r.message)}" for r in verdict.results
              if r.check_id == "power[targets]" and r.status != PASS and not r.is_gate]
    framework = verdict.context.get("framework")
    if isinstance(framework, dict):
        lines.append(f"- framework under test: {md_text(framework_line(framework))}")
    if verdict.framework_spec is not None:
        lines.append(f"- {md_text(verdict.framework_spec.headline())}")
    if report_path:
        lines.append(f"- report: {md_code(report_path)}")
    return "\n".join(lines) + "\n\n"


def left_out_lines(left: Any) -> list[str]:
    """What the results folder does not upload (autotest.run.upload_budget), grouped by why, and what it redacted."""
    if not isinstance(left, dict):
        return []
    lines = ["", "## Left out of the upload", ""]
    lines += [f"- redacted: `{path}` (secret values masked)" for path in left.get("redacted", ())]
    by_why: dict[str, list[dict[str, Any]]] = {}
    for item in left.get("left_out", ()):
        by_why.setdefault(item["why"], []).append(item)
    for why, items in by_why.items():
        shown = ", ".join(f"`{i['path']}`" for i in items[:5]) + (f" and {len(items) - 5} more" if len(items) > 5 else "")
        lines.append(f"- {len(items)} file(s), {sum(i['bytes'] for i in items)} bytes: {why}: {shown}")
    lines += [f"- {line}" for line in left.get("problems", ())]
    return lines + ["", "(every file left out is listed in results.json, context.left_out)"]


def framework_line(framework: dict[str, Any]) -> str:
    """The checked-out framework commit: which ref of which repository resolved to it."""
    return (f"{framework.get('name')} `{framework.get('sha')}` = {framework.get('ref')} of "
            f"{framework.get('repo')} (ref from {framework.get('origin')})")


def append_step_summary(text: str, summary_path: str | None = None) -> bool:
    """Append to $GITHUB_STEP_SUMMARY under a file lock (pytest-xdist workers share the file)."""
    target = summary_path or os.environ.get("GITHUB_STEP_SUMMARY")
    if not target:
        return False
    from filelock import FileLock

    try:
        lock = FileLock(f"{target}.lock", timeout=60)
        lock.acquire()
    except OSError as exc:  # the lock file cannot be made beside it (read-only, full)
        raise WriteFailed(f"{target}.lock", exc) from exc
    try:
        append_text(Path(target), mask_known(text))  # all or nothing: a failed append is cut back
    finally:
        lock.release()
    return True
