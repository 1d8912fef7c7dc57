"""The logging/units reading: one metric breached and nothing else moved; is it the golden moved by whole steps (logged
from the previous step, :mod:`.shift_evidence`), times a constant factor, plus an offset, the golden smoothed, or off
from its first logged step while every other metric stays in its noise?
A change in how a metric is computed or logged, not in the training."""

from __future__ import annotations

import math
import statistics
from dataclasses import replace
from types import MappingProxyType
from typing import Sequence

from autotest.inputs.baseline import Baseline
from autotest.inputs.roles import RoleMap
from autotest.judge.evidence import is_non_finite, moved_gates, recheck
from autotest.judge.model import FAIL, PASS, CheckResult, Measured
from autotest.judge.per_step_noise import ONSET_RUN, ONSET_Z, STEP_Z, left_noise
from autotest.judge.shift_evidence import noise_shift, shift_words
from autotest.judge.smoothing_evidence import EMA_WEIGHTS
from autotest.judge.trace import Trace

UNITS = "logging/units"
#: the fewest common steps a constant factor or offset is read from: "at every step", never from a few eval points
MIN_SCALED_POINTS = 5
#: factors a change of units produces; one within ``UNIT_NEAR`` of the measured factor (or its inverse) is tried first
UNIT_FACTORS = (2.0, 4.0, 8.0, 10.0, 60.0, 100.0, 1000.0, 1024.0, 3600.0, 1e6)
UNIT_NEAR = 0.15
#: without a per-step noise for the metric, "a constant factor (offset) at every step" means every step's ratio
#: (difference) within this share of the factor (offset)
CONSTANT_SHARE = 0.1


def _factors(measured: float) -> list[float]:
    """The unit factors within ``UNIT_NEAR`` of ``measured`` (nearest first), then ``measured`` itself: a seed's own
    noise moves the median ratio a little off the factor the logger applies."""
    candidates = [c for unit in UNIT_FACTORS for c in (unit, -unit, 1 / unit, -1 / unit)]
    near = [c for c in candidates if abs(measured / c - 1) <= UNIT_NEAR]
    return [*sorted(near, key=lambda c: abs(measured / c - 1)), measured]


def units_evidence(baseline: Baseline, golden: Trace, current: Trace, results: Sequence[CheckResult],
                   roles: RoleMap) -> Measured | None:
    """One metric breached, nothing else: is it the golden times a constant factor (or plus an offset) at every step?

    The factor is the median of current / golden over their common steps (read as a unit factor when close to one);
    the metric divided by it is checked again by its own gates. A change of units (or of how a metric is computed
    for the log) moves that one metric by the same factor at every step and nothing the training does. A teacher's
    distillation KL is left to ``teacher-path``: a wrong teacher moves it alone too, by a factor that can look
    constant."""
    gates = moved_gates(results, roles)
    failed = {r.metric for r in gates if r.status == FAIL and not is_non_finite(r)}
    # a teacher's KL is the teacher path's; a mismatch metric the mismatch rule's (its fp32 golden is ~1e-14, so any
    # change is some "factor" of it)
    if len(failed) != 1 or roles.group_of(next(iter(failed))) in ("teacher", "consistency"):
        return None
    metric = next(iter(failed))
    measured = ("one breached metric with a constant factor or offset taken away (or against the golden smoothed): "
                f"within its per-step noise at every step (else each step within {CONSTANT_SHARE:.0%} of it) and "
                "through its gates; every other gated metric within its per-step noise against the golden at every "
                "step (else its gates)")
    others = [r for r in gates if r.metric != metric]
    moved = [r.check_id for r in others if r.status != PASS]
    if moved:
        return Measured(UNITS, measured, False, f"other gates did not pass: {', '.join(moved)}")
    still, others_said, others_line = _others_still(metric, {r.metric for r in others if r.metric}, baseline, golden,
                                                    current)
    if still is not None:
        return Measured(UNITS, measured, False, f"every other gate passed, but {still}: the training moved too, not "
                        f"only how {metric} is logged")
    cur, gold = current.get(metric) or {}, golden.get(metric) or {}
    steps = [s for s in sorted(set(cur) & set(gold)) if math.isfinite(cur[s]) and math.isfinite(gold[s])]
    ratio_steps = [s for s in steps if gold[s] != 0]
    if len(steps) < MIN_SCALED_POINTS:
        return Measured(UNITS, measured, False, f"{metric} has {len(steps)} common steps with the golden; "
                                                f"a constant factor needs {MIN_SCALED_POINTS} or more")
    own = {r.check_id for r in gates if r.metric == metric}
    noise = (baseline.noise_table or {}).get(metric) or {}
    shifted = noise_shift(cur, gold, noise) if noise else None
    if shifted is not None:  # before a factor or an offset: a trend moved by a step looks like an offset too
        k, count, unshifted = shifted
        words = shift_words(k)
        return Measured(UNITS, measured, True,
                        f"{metric} is the golden moved {k:+d} step{'s' * (abs(k) > 1)} ({words}): against it "
                        f"{count} steps within its per-step noise at every step, against the golden itself "
                        f"{unshifted}; {others_said}",
                        {"metric": metric, "kind": "shifted", "amount": f"{k:+d}", "others": others_line,
                         "relation": f"the golden's series moved {k:+d} step{'s' * (abs(k) > 1)} ({words}; "
                                     "which step's value the logger writes)"})
    ratios = [cur[s] / gold[s] for s in ratio_steps]
    readings = []
    if len(ratio_steps) >= MIN_SCALED_POINTS:
        spread = (f"{len(ratio_steps)} steps, current / golden {min(ratios):.4g} to {max(ratios):.4g}, median "
                  f"{statistics.median(ratios):.4g}")
        readings += [("factor", factor, f"{metric} is {factor:.4g} x golden at every step ({spread})",
                      f"divided by {factor:.4g}") for factor in _factors(statistics.median(ratios))]
    diffs = [cur[s] - gold[s] for s in steps]
    offset = statistics.median(diffs)
    readings.append(("offset", offset, f"{metric} is golden {offset:+.4g} at every step ({len(steps)} steps, "
                     f"current - golden {min(diffs):+.4g} to {max(diffs):+.4g})", f"less {offset:+.4g}"))
    not_constant = []
    for kind, amount, finding, undone in readings:
        undo = (lambda v, a=amount: v / a) if kind == "factor" else (lambda v, a=amount: v - a)
        undone_series = {s: undo(v) for s, v in cur.items()}
        off = _not_constant(kind, amount, undone_series, gold, noise, ratio_steps if kind == "factor" else steps)
        if off is not None:
            not_constant.append(f"{undone} {off}")
            continue
        series = {**current.series, metric: MappingProxyType(undone_series)}
        rechecked = recheck(baseline, golden, replace(current, series=MappingProxyType(series)), own)
        if rechecked and all(r.status == PASS for r in rechecked):
            within = ("stays within its per-step noise at every step and " if noise else
                      f"is within {CONSTANT_SHARE:.0%} of the golden at every step and ")
            return Measured(UNITS, measured, True,
                            f"{finding}; {undone} it {within}passes its {len(rechecked)} gate check"
                            f"{'s' * (len(rechecked) > 1)}; {others_said}",
                            {"metric": metric, "kind": kind, "amount": f"{amount:.4g}", "others": others_line,
                             "relation": f"{amount:.4g} x golden" if kind == "factor" else f"golden {amount:+.4g}"})
    for weight in EMA_WEIGHTS if noise else ():  # a logger that smooths at write time: the golden's moving average
        ema = _ema(gold, weight)
        # within its per-step noise at every step, not only its gates: a trend's lag looks like an offset otherwise
        common = [s for s in steps if noise.get(s, 0) > 0]
        if len(common) < MIN_SCALED_POINTS or left_noise(cur, ema, noise, common) is not None:
            continue
        smoothed = {**golden.series, metric: MappingProxyType(ema)}
        rechecked = recheck(baseline, replace(golden, series=MappingProxyType(smoothed)), current, own)
        if rechecked and all(r.status == PASS for r in rechecked):
            return Measured(UNITS, measured, True,
                            f"{metric} is the golden smoothed (an exponential moving average, weight {weight:g} on the "
                            f"previous logged value): against it the metric passes its {len(rechecked)} gate check"
                            f"{'s' * (len(rechecked) > 1)}; {others_said}",
                            {"metric": metric, "kind": "smoothing", "amount": f"{weight:g}", "others": others_line,
                             "relation": f"the golden smoothed (an EMA, weight {weight:g} on the previous logged value)"})
    alone = _moved_alone(metric, baseline, golden, current)
    if alone is not None:
        return Measured(UNITS, measured, True, f"{metric} is {alone}; {others_said}",
                        {"metric": metric, "kind": "computed", "amount": "", "others": others_line,
                         "relation": "off the golden from its first logged step, before any update (not a constant "
                                     "factor, offset or smoothing)"})
    return Measured(UNITS, measured, False,
                    f"{readings[0][2]}; neither divided by a constant factor, less a constant offset nor against the "
                    "golden smoothed does it stay within its noise and pass its gates at every step "
                    f"({'; '.join(not_constant) or 'its gates fail'}): the change is not one of units")


def _ema(series, weight: float) -> dict[int, float]:
    """The exponential moving average of ``series`` over its logged steps: the first as it is."""
    out, previous = {}, None
    for step in sorted(series):
        previous = series[step] if previous is None else weight * previous + (1 - weight) * series[step]
        out[step] = previous
    return out


def _moved_alone(metric: str, baseline: Baseline, golden: Trace, current: Trace) -> str | None:
    """Why ``metric`` moved alone: off the golden from its first logged step (before any update could move it) while
    no other metric with per-step noise ever left its noise (no onset); None when that is not so or not measurable."""
    noise_table = baseline.noise_table or {}
    others = [m for m in noise_table if m != metric]
    noise = noise_table.get(metric) or {}
    cur, gold = current.get(metric) or {}, golden.get(metric) or {}
    steps = [s for s in sorted(set(cur) & set(gold) & set(noise)) if noise[s] > 0]
    if not steps or not others or not (math.isfinite(cur[steps[0]]) and math.isfinite(gold[steps[0]])):
        return None
    first_z = (cur[steps[0]] - gold[steps[0]]) / noise[steps[0]]
    if abs(first_z) < ONSET_Z:
        return None
    for other in others:
        o_cur, o_gold, o_noise = current.get(other) or {}, golden.get(other) or {}, noise_table[other]
        o_steps = [s for s in sorted(set(o_cur) & set(o_gold) & set(o_noise))
                   if o_noise[s] > 0 and math.isfinite(o_cur[s]) and math.isfinite(o_gold[s])]
        if not o_steps or left_noise(o_cur, o_gold, o_noise, o_steps) is not None:
            return None
    return (f"off the golden from its first logged step ({first_z:+.2g} sd at step {steps[0]}, before any update) while "
            f"{', '.join(sorted(others))} never left their per-step noise (no step at {STEP_Z:g} sd, no {ONSET_RUN} "
            f"steps at {ONSET_Z:g} sd): "
            "the training did not change, what is logged did")


def _others_still(metric: str, others: set[str], baseline: Baseline, golden: Trace,
                  current: Trace) -> tuple[str | None, str, str]:
    """(which other gated metric left its per-step noise against the golden, and where; or None), what was tested of
    the others (for the finding) and what the suggestion may say of them: "nothing else moved" only when every other
    gated metric was read against its per-step noise; a metric without one is read by its gates alone, and said so."""
    noise_table = baseline.noise_table or {}
    read, gates_only = [], []
    for other in sorted(others):
        noise = noise_table.get(other)
        if not noise:
            gates_only.append(other)
            continue
        where = left_noise(current.get(other) or {}, golden.get(other) or {}, noise)
        if where is not None:
            return f"{other} left its per-step noise ({where})", "", ""
        read.append(other)
    said = []
    if read:
        said.append(f"every other gated metric with a per-step noise ({', '.join(read)}) within it against the golden "
                    f"at every step (no step at {STEP_Z:g} sd, no {ONSET_RUN} steps at {ONSET_Z:g} sd)")
    if gates_only:
        said.append(f"{', '.join(gates_only)} read by {'their' if len(gates_only) > 1 else 'its'} gates only (no "
                    "per-step noise), which passed")
    line = "no other gate breached (not read step by step: no per-step noise)"
    if read:
        their = "their" if len(gates_only) > 1 else "its"
        beside = f"; {', '.join(gates_only)} within {their} gates, no per-step noise"
        line = ("nothing else moved (every other gated metric within its per-step noise against the golden at every "
                f"step{beside if gates_only else ''})")
    return None, "; ".join(said) or f"no other gated metric ({metric} alone is checked)", line


def _not_constant(kind: str, amount: float, undone: dict[int, float], gold, noise, steps) -> str | None:
    """Where ``undone`` (the metric with the factor or offset taken away) is not the golden: against its per-step
    noise where the baseline has one, else each step within ``CONSTANT_SHARE`` of the factor (offset); None at every
    step."""
    if noise:
        common = [s for s in steps if noise.get(s, 0) > 0 and math.isfinite(undone[s])]
        if len(common) < MIN_SCALED_POINTS:
            return f"has {len(common)} steps with a per-step noise (needs {MIN_SCALED_POINTS})"
        where = left_noise(undone, gold, noise, common)
        return f"leaves its per-step noise ({where})" if where is not None else None
    for s in steps:
        if kind == "factor":
            share = abs(undone[s] / gold[s] - 1)  # the step's ratio against the factor
        else:
            share = abs(undone[s] - gold[s]) / abs(amount) if amount else math.inf
        if share > CONSTANT_SHARE:
            return (f"is {share:.0%} off the golden at step {s} (more than {CONSTANT_SHARE:.0%} of the "
                    f"{'factor' if kind == 'factor' else 'offset'})")
    return None
