"""The A/B report: ab.md (the paired verdict per gate, each run's golden verdict beside it) and one plot per
paired metric: both sides' curves per seed, and below them the head - base difference with its paired band."""

from __future__ import annotations

import io
import math
from pathlib import Path
from typing import TYPE_CHECKING

from autotest.files import write_bytes_atomic
from autotest.inputs.baseline_model import Baseline
from autotest.judge.replay_split import describe_moved
from autotest.report.markdown import finding_lines, hypothesis_table
from autotest.report.md_safe import md_code, md_text
from autotest.report.plots import plot_name

if TYPE_CHECKING:
    from autotest.ab.interleave import AbOutcome
    from autotest.ab.split import SplitOutcome
    from autotest.judge.trace import Trace

_NEXT = {
    "FAIL": "the head changed training beyond what the A/A pairs vary by: look at the failing windows' metrics "
            "first (the earliest window is where the pair parted first); confirm with more seeds if only one "
            "window of one metric moved",
    "PASS": "no paired gate moved beyond the A/A noise; the MDE column says how large a change could still hide",
    "ERROR": "nothing was judged: fix what the reason names, then run the A/B again",
}


def render_ab_report(outcome: AbOutcome, baseline: Baseline, plots: list[Path]) -> str:
    verdict = outcome.verdict
    lines = [f"# A/B {md_text(outcome.case)}: {verdict.status}", "",
             f"- base: {md_code(outcome.base.ref)}; head: {md_code(outcome.head.ref)}",
             f"- seeds: {', '.join(map(str, verdict.seeds)) or '-'} (each side on each seed, interleaved)"]
    spec = baseline.paired
    if spec is not None:
        lines.append(f"- paired noise: {spec.pairs} A/A pairs ({md_code(spec.perturbation)}), false-alarm budget "
                     f"{spec.false_alarm_budget:g} over {len(spec.windows)} windows")
    if verdict.reason:
        lines.append(f"- **not judged**: {md_text(verdict.reason)}")
    lines += [f"- next: {md_text(verdict.next_step) if verdict.next_step else _NEXT.get(verdict.status, '')}", ""]
    for warning in verdict.warnings:
        lines.append(f"> warning: {md_text(warning)}")
    if verdict.results:
        lines += ["| gate | status | head - base | threshold | MDE | per seed |", "|---|---|---|---|---|---|"]
        for r in verdict.results:
            per_seed = ", ".join(f"{s}: {d:+.3g}" for s, d in sorted(r.differences.items()))
            lines.append(f"| {md_code(r.gate_id)} | {r.status} | {_num(r.mean_difference)} | {_num(r.threshold)} | "
                         f"{_num(r.mde)} | {per_seed or '-'} |")
        lines.append("")
    if verdict.triage:
        lines += ["## Next steps (the golden triage's rules on head - base)", "",
                  "Read on the mean over the seeds that pair: \"the golden\" below is the base, the per-step noise the "
                  "A/A noise, never under the golden's noise of the pair (docs/ab.md).", "",
                  *finding_lines(verdict.triage), *hypothesis_table(verdict.measured), ""]
    if outcome.aa_check is not None:
        guard = outcome.aa_check
        moved = describe_moved(guard.failed)
        lines += [f"- A/A guard (the base again, as the A/A pairs were run): {guard.status}"
                  + (f"; moved: {md_text(moved)}" if guard.failed else ""), ""]
    if outcome.split is not None:
        lines += _split_lines(outcome.split)
    lines += ["## Runs", "", "| side | seed | verdict against the golden | results |", "|---|---|---|---|"]
    for run in outcome.runs:
        lines.append(f"| {run.side} | {run.seed} | {run.status}{_note(run.reason)} | {_where(run.results_dir)} |")
    if outcome.split is not None:
        for run in outcome.split.runs:
            lines.append(f"| {run.trainer}'s trainer on the {run.batches}'s batches | {run.seed} | "
                         f"{run.status}{_note(run.reason)} | {_where(run.results_dir)} |")
    lines += ["", "The golden column is each run judged alone against the baseline (what a plain `run` says); the "
              "A/B verdict above is the paired one."]
    if plots:
        lines += ["", "## Plots", ""] + [f"![{p.stem}]({p.name})" for p in plots]
    return "\n".join(lines) + "\n"


def _split_lines(split: SplitOutcome) -> list[str]:
    """Which side the change lives on: the finding, then each pairing's moved gates."""
    finding = split.finding
    lines = ["## Which side: frozen-rollout split", "", f"- **{md_text(finding.summary)}**",
             f"- next: {md_text(finding.next_step)}", "", "| pairing | status | gates that moved | eval moved |",
             "|---|---|---|---|"]
    for p in finding.pairings:
        moved, evals = md_text(describe_moved(p.moved)), md_text(describe_moved(p.eval_moved))
        status = p.verdict.status + (f" ({md_text(p.verdict.reason)})" if p.verdict.reason else "")
        lines.append(f"| {md_text(p.name)} | {status} | {moved} | {evals} |")
    return lines + ["", "Each pairing holds the batches fixed and changes only the trainer; eval is listed apart "
                        "because it generates through each run's own rollout engine.", ""]


def _note(reason: str) -> str:
    return f" ({md_text(reason)})" if reason else ""


def _where(results_dir: Path | None) -> str:
    return md_code(results_dir.name) if results_dir else "-"


def _num(value: float | None) -> str:
    return "-" if value is None else f"{value:+.4g}" if value < 0 else f"{value:.4g}"


def write_ab_plots(folder: Path, outcome: AbOutcome, traces: dict[tuple[str, int], Trace]) -> list[Path]:
    """One PNG per paired metric: the sides' curves, and their difference with each window's threshold."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    verdict = outcome.verdict
    by_metric: dict[str, list] = {}
    for result in verdict.results:
        by_metric.setdefault(result.metric, []).append(result)
    written = []
    for metric, results in by_metric.items():
        fig = Figure(figsize=(7, 5), dpi=90)
        FigureCanvasAgg(fig)
        top, bottom = fig.subplots(2, 1, sharex=True)
        for (label, seed), trace in sorted(traces.items()):
            series = trace.get(metric) or {}
            steps = sorted(s for s, v in series.items() if math.isfinite(v))
            top.plot(steps, [series[s] for s in steps], "-", linewidth=0.8,
                     color="tab:blue" if label == outcome.base.label else "tab:orange",
                     label=f"{label}" if seed == verdict.seeds[0] else None)
        diff_steps, diffs = _mean_difference(traces, metric, outcome.base.label, outcome.head.label, verdict.seeds)
        bottom.plot(diff_steps, diffs, "-", color="tab:red", linewidth=1, label="head - base (mean over seeds)")
        for r in results:
            if r.threshold is not None:
                bottom.fill_between([r.window[0], r.window[1]], [-r.threshold] * 2, [r.threshold] * 2,
                                    color="tab:green" if r.status == "PASS" else "tab:red", alpha=0.15)
            if r.mean_difference is not None:
                bottom.hlines(r.mean_difference, r.window[0], r.window[1], color="black", linewidth=1.5)
        bottom.axhline(0, color="gray", linewidth=0.6)
        top.set_title(f"{metric}: base vs head", fontsize=9)
        bottom.set_title("difference; band: the window's paired threshold, bar: its mean", fontsize=8)
        bottom.set_xlabel("step")
        for ax in (top, bottom):
            ax.grid(alpha=0.3)
            ax.legend(fontsize=7, loc="best")
        fig.tight_layout()
        buffer = io.BytesIO()
        fig.savefig(buffer, format="png")
        path = folder / f"ab-{plot_name(metric)}"
        write_bytes_atomic(path, buffer.getvalue())
        written.append(path)
    return written


def _mean_difference(traces: dict[tuple[str, int], Trace], metric: str, base: str, head: str,
                     seeds: tuple[int, ...]) -> tuple[list[int], list[float]]:
    per_step: dict[int, list[float]] = {}
    for seed in seeds:
        b, h = traces.get((base, seed)), traces.get((head, seed))
        if b is None or h is None:
            continue
        bs, hs = b.get(metric) or {}, h.get(metric) or {}
        for step in bs:
            if step in hs and math.isfinite(bs[step]) and math.isfinite(hs[step]):
                per_step.setdefault(step, []).append(hs[step] - bs[step])
    steps = sorted(per_step)
    return steps, [sum(per_step[s]) / len(per_step[s]) for s in steps]

