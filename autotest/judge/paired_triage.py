"""The next step of a failed A/B (issue 44): the golden triage's readings and rules (:mod:`.readings`, :mod:`.triage`)
run on the paired differences, so an A/B FAIL is told logging, data, sampling, loss term, training loop or mismatch
with its evidence, as a golden FAIL is.

The readings are not written again; their inputs are adapted (:func:`paired_inputs`):

- **the reference** is the base, **the current run** the head: each the mean over the seeds whose base and head both
  logged the step (head mean minus base mean is the mean paired difference the paired gates judge);
- **the per-step noise** is the A/A noise in place of the golden's calibrated noise: at each step of a paired window,
  that window's threshold over its quantile (:func:`.paired.paired_threshold` / q: the A/A noise of a K-seed mean,
  never under the window's floor over q), never under the golden's per-step noise sd of the pair: sqrt(1 / K) x sd
  up to the first training step (before any update a pair differs by the change alone) and sqrt(2 / K) x sd after it
  (a head that changes the training parts from its base at once, and a parted pair differs as two seeds do). The A/A
  pairs, a one-ulp nudge apart, part late, so their noise alone reads every metric as moved a step after the policy
  did, while the readings ask which moved first and by how much in the noise the golden triage reads them in
  (tiny-grpo seed 11: ``entropy-sign`` with the A/A noise alone has the scores 3 steps behind the entropy, the
  ``gradual`` rule; with the floor 8 steps, ``loss-term``);
- **per seed**: with more than one seed, each seed's pair is also read alone and its primary added to the primary's
  evidence (the primary is the mean's, as a golden verdict on replicates reads their mean);
- **the gates** are the paired windows, each a ``window`` check (``|head mean - base mean| <= threshold``) the check
  engine judges again when a reading asks (a factor undone, a shift tried).

One moved metric beside every other paired metric bitwise equal on every seed (:mod:`.paired_causes`) comes first and
alone: a bitwise statement outranks any reading in noise sds, and no rule that reads a changed training stands beside
it. The calibration runs' roughness has no paired counterpart, so the smoothed-log reading is not taken: a head whose
logger smooths every metric is not told as such."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import replace
from types import MappingProxyType

from autotest.inputs.baseline_model import Baseline, CheckSpec, PairedWindow
from autotest.judge.checks import run_checks
from autotest.judge.model import Measured, TriageFinding
from autotest.judge.paired_causes import logged_alone
from autotest.judge.readings import hypothesis_evidence
from autotest.judge.trace import Trace
from autotest.judge.triage import triage

#: what the rule name of the bitwise logging finding is (the golden triage's logging rule: the same next step)
LOGGING_RULE = "logging-units"
PAIRED_SOURCE = "the {side} mean over {k} paired seed{s}"


def mean_trace(traces: Sequence[Trace], partners: Sequence[Trace], side: str) -> Trace:
    """``traces``' mean per metric and step over the seeds whose trace and partner (the other side of the same seed)
    both logged a finite value there: the head mean minus the base mean is then the mean paired difference."""
    series: dict[str, MappingProxyType] = {}
    for metric in sorted({m for t in traces for m in t.series}):
        values: dict[int, list[float]] = {}
        for trace, partner in zip(traces, partners):
            own, other = trace.get(metric) or {}, partner.get(metric) or {}
            for step, value in own.items():
                if step in other and math.isfinite(value) and math.isfinite(other[step]):
                    values.setdefault(step, []).append(value)
        if values:
            series[metric] = MappingProxyType({s: math.fsum(v) / len(v) for s, v in sorted(values.items())})

    def common(steps: Sequence[tuple[int, ...]]) -> tuple[int, ...]:
        return tuple(sorted(set.intersection(*map(set, steps)))) if steps else ()

    k = len(traces)
    return Trace(PAIRED_SOURCE.format(side=side, k=k, s="s" * (k > 1)), MappingProxyType(series),
                 train_steps=common([t.train_steps for t in (*traces, *partners)]),
                 eval_steps=common([t.eval_steps for t in (*traces, *partners)]), format="paired mean")


def paired_inputs(baseline: Baseline, pairs: Sequence[tuple[int, Trace, Trace]],
                  gates: Sequence[tuple[PairedWindow, float]], quantile: float) -> tuple[Baseline, Trace, Trace]:
    """(the baseline as the readings see an A/B, the reference, the current run): the base mean as the golden, the
    head mean as the run, each paired window a ``window`` gate at its ``threshold`` (``gates``: window, threshold at
    these seeds), and the per-step noise of each window's steps its threshold over ``quantile``, never under the
    golden's noise sd of the pair (the module's docstring)."""
    bases, heads = [b for _, b, _ in pairs], [h for _, _, h in pairs]
    base, head = mean_trace(bases, heads, "base"), mean_trace(heads, bases, "head")
    checks, noise = [], {}
    k = len(pairs)
    # before the first update a pair differs by the change alone: one seed's noise (a K-run mean's, as a golden
    # verdict reads it); after it, a head that changed the training has parted and differs as two seeds do
    first = head.train_steps[0] if head.train_steps else -math.inf
    unparted, parted = math.sqrt(1 / k), math.sqrt(2 / k)
    for window, threshold in gates:
        checks.append(CheckSpec(window.metric, "absolute", "<=", threshold, scope="window",
                                window=(window.start, window.end),
                                derivation=f"paired: {window.gate_id}, the A/A noise over {k} seed(s)"))
        per_step, seed_noise = noise.setdefault(window.metric, {}), (baseline.noise_table or {}).get(window.metric, {})
        for step in base.get(window.metric) or {}:
            if window.start <= step <= window.end:
                per_step[step] = max(threshold / quantile,
                                     (unparted if step <= first else parted) * seed_noise.get(step, 0.0))
    table = {m: MappingProxyType(dict(v)) for m, v in base.series.items()}
    paired = replace(baseline, checks=tuple(checks), golden_table=MappingProxyType(table), golden_tracker=None,
                     noise_table=MappingProxyType({m: MappingProxyType(v) for m, v in noise.items() if v}),
                     roughness=None)
    return paired, base, head


def paired_findings(baseline: Baseline, pairs: Sequence[tuple[int, Trace, Trace]], windows: Sequence[PairedWindow],
                    threshold_at: Callable[[PairedWindow, int], float], quantile: float,
                    failed_metrics: Sequence[str]) -> tuple[tuple[TriageFinding, ...], tuple[Measured, ...]]:
    """The ranked next steps of a failed A/B and the readings they rest on, read on the seeds' mean; with more than one
    seed the primary's evidence adds each seed's own primary (its pair alone, its windows at one seed's threshold).
    ``threshold_at(window, k)``: the paired threshold of ``window`` over ``k`` seeds."""
    bitwise = logged_alone(failed_metrics, sorted({w.metric for w in windows}), pairs)
    findings, measured = _read(baseline, pairs, windows, threshold_at, quantile)
    if bitwise:
        # the training is bitwise the base's: no rule that reads a changed training stands beside it
        read = next((f.evidence for f in findings if f.rule == LOGGING_RULE), "")
        return (TriageFinding(LOGGING_RULE, bitwise, "every other paired metric bitwise equal between base and head at "
                              "every step on every seed" + (f"; {read}" if read else ""), primary=True),), measured
    if len(pairs) > 1 and findings:
        seeds = []
        for pair in pairs:
            own = _read(baseline, [pair], windows, threshold_at, quantile)[0]
            seeds.append(f"{pair[0]} {own[0].rule if own else 'no gate moved at one seed'}")
        findings[0] = replace(findings[0], evidence=f"{findings[0].evidence}; each seed's own primary: "
                                                    f"{', '.join(seeds)}")
    return tuple(findings), measured


def _read(baseline: Baseline, pairs: Sequence[tuple[int, Trace, Trace]], windows: Sequence[PairedWindow],
          threshold_at: Callable[[PairedWindow, int], float], quantile: float
          ) -> tuple[list[TriageFinding], tuple[Measured, ...]]:
    """The triage's findings and readings on ``pairs``' paired differences."""
    gates = [(w, threshold_at(w, len(pairs))) for w in windows]
    paired, base, head = paired_inputs(baseline, pairs, gates, quantile)
    results = run_checks(paired, base, head, True)
    roles = baseline.role_map
    measured = hypothesis_evidence(paired, base, head, results, roles)
    return list(triage(results, head, roles, measured)), measured
