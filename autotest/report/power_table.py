"""The power table of a baseline: each gate's minimum detectable effect by replicates and calibration runs.

Printed by ``rl-autotest power CASE`` and written into the calibration review and the baseline's provenance;
the numbers come from :mod:`autotest.judge.power`; ``power`` also prints the design per ``detect:`` target
(:func:`design_rows`, from :mod:`autotest.judge.power_design`). A verdict's report.md states the same MDEs at the
replicates it judged, with the steps each holds over, beside what the verdict cost (:func:`cost_and_power_section`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from autotest.inputs.baseline_model import Baseline, PairedSpec
from autotest.judge.paired import paired_mde, paired_threshold
from autotest.judge.model import Verdict
from autotest.judge.power_steps import full_run, prefix_gates, prefix_rows, table_steps
from autotest.judge.power_design import TargetAdvice
from autotest.judge.power import MORE_RUNS, REPLICATES, GatePower, describe_mde, span_words, target_misses


def power_rows(powers: Sequence[GatePower]) -> list[str]:
    """A markdown table: gate, the steps its MDE's shift must hold over, MDE at K = 1, 2, 4, 8 replicates, and one
    run's MDE with N, 10, 20 calibration runs."""
    if not powers:
        return ["(no gate has a minimum detectable effect: bounds and uncalibrated gates only)"]
    n = powers[0].calibration_runs
    runs = sorted({n, *MORE_RUNS})
    head = ["gate", "a shift held", *(f"K={k}" for k in REPLICATES),
            *(f"N={m}" + (" (now)" if m == n else "") for m in runs)]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for p in powers:
        cells = [f"`{p.check_id}`", span_words(p.steps) or "—", describe_mde(p, 1),
                 *(f"±{p.mde(k):.3g}" for k in REPLICATES[1:]),
                 *(f"±{p.by_runs.get(m, p.mde(1)):.3g}" for m in runs)]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def power_report(powers: Sequence[GatePower], targets: Mapping[str, float], replicates: int = 1) -> list[str]:
    """The table, how it was computed, and whether the case's ``detect:`` targets are reached."""
    lines = ["Minimum detectable effect of each gate (the smallest constant change caught with 80% power at the "
             "case's false-alarm rate), in the metric's units, for a change held over the steps named (one acting "
             "on fewer of them is diluted: read the gate of its window); K = replicates per verdict, N = "
             "calibration runs.", ""]
    lines += power_rows(powers)
    lines += ["", *(f"- `{p.check_id}`: {p.basis}" for p in powers)]
    if targets:
        misses = target_misses(powers, targets, replicates)
        lines += ["", "Targets (`detect:`):"]
        lines += [f"- MISSED {line}" for line in misses] or [
            f"- reached: {', '.join(f'{m} {e:g}' for m, e in targets.items())}"]
    return lines


def power_by_steps_report(baseline: Baseline, targets: Mapping[str, float], replicates: int = 1) -> list[str]:
    """``power CASE --steps``: each gate's MDE at each prefix of the run where another gate can be judged
    (:mod:`autotest.judge.power_steps`), and whether the ``detect:`` targets are reached there."""
    gates = prefix_gates(baseline)
    if not gates:
        return ["(no gate: nothing is judged at any run length)"]
    full = full_run(baseline)
    return ["Minimum detectable effect by run length (K = %d): a run stopped after the first S steps judges the "
            "gates whose steps it holds (a points gate the points it holds), each at the full run's MDE; a window or "
            "a whole-run statistic cut short is not judged (its noise is calibrated over its whole span)."
            % replicates, "",
            *prefix_rows(gates, table_steps(gates, full), full, replicates, targets)]


def power_provenance(powers: Sequence[GatePower]) -> list[dict[str, Any]]:
    """What the baseline's provenance records: per gate, the MDE by K and by N (rounded)."""
    return [{"check": p.check_id, "mde_by_replicates": {k: float(f"{v:.3g}") for k, v in p.by_replicates.items()},
             "mde_by_calibration_runs": {k: float(f"{v:.3g}") for k, v in p.by_runs.items()},
             **({"share_of_golden": float(f"{p.share(1):.3g}")} if p.share(1) is not None else {})}
            for p in powers]


def paired_power_rows(spec: PairedSpec | None, seeds: Sequence[int] = REPLICATES) -> list[str]:
    """The A/B gates' minimum detectable effect (head minus base, same seeds) by seeds per side, beside the golden
    gates' (``paired:``, measured on A/A pairs); a line saying how to get one when the baseline has none."""
    if spec is None:
        return ["Paired (A/B) gates: none: the baseline has no `paired:` section; measure one with "
                "`rl-autotest calibrate CASE --paired`."]
    lines = [f"Paired (A/B) gates: head minus base on the same seeds, from {spec.pairs} A/A pairs "
             f"({spec.perturbation}); minimum detectable effect of the window mean by seeds per side (threshold in "
             "brackets).", "",
             "| gate | noise (one seed) | " + " | ".join(f"seeds={k}" for k in seeds) + " |",
             "|" + "---|" * (len(seeds) + 2)]
    for window in spec.windows:
        cells = [f"±{paired_mde(spec, window, k):.3g} ({paired_threshold(spec, window, k):.3g})" for k in seeds]
        lines.append(f"| `{window.gate_id}` | {window.noise:.3g} | " + " | ".join(cells) + " |")
    return lines


def cost_and_power_section(verdict: Verdict) -> list[str]:
    """report.md: each gate's minimum detectable effect (what this verdict could have seen, 80% power) and what
    the verdict cost, with the quantity that cost is (GPU-, CPU- or core-seconds)."""
    gates = [r for r in verdict.results if r.is_gate and r.mde is not None]
    cost = verdict.cost
    if not gates and cost is None:
        return []
    k = len([r for r in verdict.replicates if r.averaged]) or 1
    lines = [f"## What this run could have caught (minimum detectable effect, 80% power, K={k}) and its cost"
             if gates else "## What this run cost (no gate with a minimum detectable effect)", ""]
    if cost is not None:
        runs = f" over {cost.runs} runs" if cost.runs > 1 else ""
        lines += [f"Cost: **{cost.short()}**{runs}" + (f" ({cost.quantity})" if cost.quantity else "")]
    if gates:
        # "a shift held": the steps the MDE holds for; a change on fewer of them is diluted (its window's gate says)
        lines += [""] * (cost is not None) + ["| gate | a shift held | MDE | share of golden |", "|---|---|---|---|"]
    for r in gates:
        unit = " of golden" if r.method == "relative" else ""
        share = f"{r.mde_share:.0%}" if r.mde_share is not None and r.mde_share < 10 else "—"
        lines.append(f"| `{r.check_id}` | {span_words(r.mde_steps) or '—'} | ±{r.mde:.3g}{unit} | {share} |")
    target = next((r for r in verdict.results if r.check_id == "power[targets]"), None)
    if target is not None:
        lines += ["", f"- targets (`detect:`): **{target.status}** {target.message}"]
    return lines + [""]


def design_rows(advice: Sequence[TargetAdvice], paired: bool) -> list[str]:
    """``power CASE``: per ``detect:`` target, the cheapest design for a change acting over each span, and the
    one advised for a change wherever it acts (:mod:`autotest.judge.power_design`)."""
    if not advice:
        return ["Design per detection target: none declared; add `detect: {metric: effect}` to the case (the "
                "smallest change of each metric it must catch, in the metric's units) for a design per target."]
    lines = ["Design per detection target (`detect:`): for a change of the target's size acting over the steps "
             "named, the fewest runs per verdict whose gate catches it with 80% power (only a gate whose steps lie "
             "inside the change's counts: a wider one dilutes it). Golden K: K runs judged on their mean; paired: "
             "base and head on K seeds each, 2K runs.", "",
             "| target | acts over | golden | paired | cheapest |", "|---|---|---|---|---|"]
    none_paired = "— (no `paired:` section)" if not paired else "— (beyond 8 seeds per side)"
    for target in advice:
        name = f"{target.metric} {target.effect:g}"
        if not target.spans:
            lines.append(f"| {name} | — | no gate on {target.metric} has a minimum detectable effect | — | — |")
            continue
        for span in target.spans:
            golden = (f"`{span.golden.gate}` K={span.golden.k}: ±{span.golden.mde:.3g}" if span.golden
                      else "— (beyond K=8)")
            pair = (f"`{span.paired.gate}` {span.paired.k}/side: ±{span.paired.mde:.3g}" if span.paired
                    else none_paired)
            best = span.cheapest.describe() if span.cheapest else "out of reach"
            lines.append(f"| {name} | {span_words(span.steps).removeprefix('over ')} | {golden} | {pair} | {best} |")
    lines.append("")
    for target in advice:
        advised, missed = target.advised, target.unreached
        where = "wherever it acts" if not missed else "where it can be reached"
        line = f"- advised for {target.metric} {target.effect:g} {where}: " + (
            f"**{advised.describe()}** a verdict (its hardest gate `{advised.gate}` ±{advised.mde:.3g})" if advised
            else "no design")
        for span in missed:
            closest = (f" (closest: `{span.closest.gate}` ±{span.closest.mde:.3g} at K={span.closest.k})"
                       if span.closest else "")
            line += f"; {span_words(span.steps)} no design up to 8 replicates or seeds per side reaches it{closest}"
        if missed:
            line += ("; more calibration runs narrow the golden gates, `rl-autotest calibrate CASE --paired` "
                     "measures paired ones")
        lines.append(line)
    return lines
