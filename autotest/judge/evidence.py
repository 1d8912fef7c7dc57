"""The evidence triage reads: per metric role, over the whole run, which gates stayed in bounds and which did not.

One :class:`RoleEvidence` row per role (``distill_kl/<teacher>`` per teacher; metrics without a role
under ``other``), built from the verdict's gate check results and the baseline's roles
(:mod:`autotest.inputs.roles`). "Within bounds at every step" means every gate check of that role
passed over its scope (stepwise, pooled, final, ...); a role with no gate check is "not checked" and
counts as evidence for nothing. report.md prints the rows as the triage evidence table.

Some causes look alike in those rows and differ in what can be measured: :func:`hypothesis_evidence` takes those
readings (:class:`Measured`) from the traces themselves: a unit change (one metric a constant factor or offset
from the golden at every step, every other one in bounds) and a changed run shape (a clean exit after another
number of steps, the steps it did within bounds) and a loss term (one training role moving away from the golden,
one way, from the first update on, steps before the scores do, under its own gate's threshold or not) and the first
step (which metrics were off the golden before any update: the initial policy, the data or the sampler) and the
teachers (:mod:`.teacher_evidence`: a teacher's KL that points at that teacher, or the scores falling with it)
and the training scores against the eval's (:mod:`.data_evidence`: opposite directions are other training data) and
a smoothed log (:mod:`.smoothing_evidence`: every metric calmer than any calibration run, an average undone passing).
report.md prints them as the hypothesis evidence table.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import replace
from types import MappingProxyType
from typing import Iterable, Sequence

from autotest.inputs.baseline import Baseline
from autotest.inputs.roles import GROUPS, RoleMap
from autotest.judge.checks import evaluate_check
from autotest.judge.data_evidence import train_eval_evidence
from autotest.judge.model import ERROR, FAIL, PASS, CheckResult, Measured, RoleEvidence, decide_status
from autotest.judge.per_step_noise import ONSET_RUN, ONSET_Z, run_onset
from autotest.judge.smoothing_evidence import EMA_WEIGHTS, smoothing_evidence
from autotest.judge.teacher_evidence import teacher_evidence
from autotest.judge.trace import Trace

OTHER = "other"
#: groups whose breach is an accuracy breach (consistency, performance and memory have rules of their own)
ACCURACY_GROUPS = ("reward", "eval", "rollout", "dynamics", "teacher", OTHER)
#: groups that measure the training itself (not its evaluation)
TRAINING_GROUPS = ("reward", "rollout", "dynamics", "teacher", OTHER)


def _breach_key(result: CheckResult) -> float:
    return result.first_breach_step if result.first_breach_step is not None else math.inf


def is_non_finite(result: CheckResult) -> bool:
    return result.observed is not None and not math.isfinite(result.observed)


def role_evidence(results: Iterable[CheckResult], roles: RoleMap) -> tuple[RoleEvidence, ...]:
    """One row per role over the gate metric checks of ``results``, in :data:`GROUPS` order."""
    by_role: dict[str, list[CheckResult]] = {}
    for r in results:
        if r.kind != "metric" or not r.is_gate or not r.metric:
            continue
        by_role.setdefault(roles.role_of(r.metric) or OTHER, []).append(r)
    rows = []
    for role, checks in by_role.items():
        failed = sorted((r for r in checks if r.status == FAIL), key=_breach_key)
        first = failed[0].first_breach_step if failed else None
        rows.append(RoleEvidence(
            role=role, group=roles.group_of(None if role == OTHER else checks[0].metric) or OTHER,
            metrics=tuple(sorted({r.metric for r in checks if r.metric})),
            gates=sum(r.status in (PASS, FAIL) for r in checks), breached=tuple(r.check_id for r in failed),
            first_breach_step=first, non_finite=any(is_non_finite(r) for r in failed),
            undecided=sum(r.status == ERROR for r in checks)))
    order = (*GROUPS, OTHER)
    return tuple(sorted(rows, key=lambda e: (order.index(e.group) if e.group in order else len(order), e.role)))


def first_points(current: Trace | None) -> set[int]:
    """The run's first training step and first eval point (what initialisation shows in)."""
    if current is None:
        return {0, 1}
    firsts = set()
    if current.train_steps:
        firsts.add(current.train_steps[0])
    if current.eval_steps:
        firsts.add(current.eval_steps[0])
    return firsts


# --- readings for hypotheses the role rows cannot tell apart (issue 30: evidence before rules) ---------------------

#: the hypotheses measured here (``Measured.hypothesis``; the rules that read them name the same)
UNITS, SHAPE, LOSS_TERM, FIRST_STEP = "logging/units", "run shape", "loss term", "first step"
#: the fewest common steps a constant factor or offset is read from: "at every step", never from a few eval points
MIN_SCALED_POINTS = 5
#: factors a change of units produces; one within ``UNIT_NEAR`` of the measured factor (or its inverse) is tried first
UNIT_FACTORS = (2.0, 4.0, 8.0, 10.0, 60.0, 100.0, 1000.0, 1024.0, 3600.0, 1e6)
UNIT_NEAR = 0.15
#: role groups whose gates say whether anything else moved (performance and memory have rules of their own)
_MOVED_GROUPS = (*ACCURACY_GROUPS, "consistency")


def hypothesis_evidence(baseline: Baseline, golden: Trace, current: Trace, results: Sequence[CheckResult],
                        roles: RoleMap, noise_scale: float = 1.0) -> tuple[Measured, ...]:
    """What was measured for the hypotheses the role rows cannot tell apart, where the results make them a question.

    ``noise_scale``: the current trace's per-step noise as a share of one run's (a mean of K replicates,
    :func:`.per_step_noise.mean_noise_scale`); the readings in noise sds use the noise table scaled by it, the gates
    checked again use the baseline as it is (its pooled thresholds are scaled for the mean already)."""
    if decide_status(results) == PASS:
        return ()
    per_step = baseline
    if noise_scale != 1.0 and baseline.noise_table:
        per_step = replace(baseline, noise_table=MappingProxyType({
            m: MappingProxyType({s: v * noise_scale for s, v in series.items()})
            for m, series in baseline.noise_table.items()}))
    readings = (units_evidence(baseline, golden, current, results, roles),
                shape_evidence(baseline, golden, current, results, roles),
                onset_evidence(per_step, golden, current, results, roles),
                first_step_evidence(per_step, golden, current, results, roles),
                teacher_evidence(per_step, golden, current, results, roles),
                train_eval_evidence(per_step, golden, current, results, roles),
                smoothing_evidence(baseline, golden, current, results, roles, noise_scale))
    return tuple(m for m in readings if m is not None)


def _gates(results: Sequence[CheckResult], roles: RoleMap) -> list[CheckResult]:
    return [r for r in results if r.kind == "metric" and r.is_gate and r.metric
            and (roles.group_of(r.metric) or OTHER) in _MOVED_GROUPS]


def _recheck(baseline: Baseline, golden: Trace, current: Trace, check_ids: set[str]) -> list[CheckResult]:
    """The checks ``check_ids`` of ``baseline`` evaluated again on ``current`` against ``golden``."""
    return [evaluate_check(spec, baseline, golden, current, baseline.golden_table is not None)
            for spec in baseline.checks if spec.check_id in check_ids]


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
    gates = _gates(results, roles)
    failed = {r.metric for r in gates if r.status == FAIL and not is_non_finite(r)}
    # a teacher's KL is the teacher path's; a mismatch metric the mismatch rule's (its fp32 golden is ~1e-14, so any
    # change is some "factor" of it)
    if len(failed) != 1 or roles.group_of(next(iter(failed))) in ("teacher", "consistency"):
        return None
    metric = next(iter(failed))
    measured = ("an exact constant factor (or offset) at every step on the one breached metric, every other one in "
                "bounds")
    others = [r for r in gates if r.metric != metric]
    moved = [r.check_id for r in others if r.status != PASS]
    if moved:
        return Measured(UNITS, measured, False, f"other gates did not pass: {', '.join(moved)}")
    cur, gold = current.get(metric) or {}, golden.get(metric) or {}
    steps = [s for s in sorted(set(cur) & set(gold)) if math.isfinite(cur[s]) and math.isfinite(gold[s])]
    ratio_steps = [s for s in steps if gold[s] != 0]
    if len(steps) < MIN_SCALED_POINTS:
        return Measured(UNITS, measured, False, f"{metric} has {len(steps)} common steps with the golden; "
                                                f"a constant factor needs {MIN_SCALED_POINTS} or more")
    own = {r.check_id for r in gates if r.metric == metric}
    ratios = [cur[s] / gold[s] for s in ratio_steps]
    readings = []
    if len(ratio_steps) >= MIN_SCALED_POINTS:
        spread = (f"{len(ratio_steps)} steps, current / golden {min(ratios):.4g} to {max(ratios):.4g}, median "
                  f"{statistics.median(ratios):.4g}")
        readings += [("factor", factor, f"{metric} is {factor:.4g} x golden at every step ({spread})",
                      f"divided by {factor:.4g}") for factor in _factors(statistics.median(ratios))]
    offset = statistics.median(cur[s] - gold[s] for s in steps)
    readings.append(("offset", offset, f"{metric} is golden {offset:+.4g} at every step ({len(steps)} steps)",
                     f"less {offset:+.4g}"))
    for kind, amount, finding, undone in readings:
        undo = (lambda v, a=amount: v / a) if kind == "factor" else (lambda v, a=amount: v - a)
        series = {**current.series, metric: MappingProxyType({s: undo(v) for s, v in cur.items()})}
        rechecked = _recheck(baseline, golden, replace(current, series=MappingProxyType(series)), own)
        if rechecked and all(r.status == PASS for r in rechecked):
            return Measured(UNITS, measured, True,
                            f"{finding}; {undone} it passes its {len(rechecked)} gate check"
                            f"{'s' * (len(rechecked) > 1)}; every other checked metric within bounds "
                            f"({len(others)} gate checks)",
                            {"metric": metric, "kind": kind, "amount": f"{amount:.4g}",
                             "relation": f"{amount:.4g} x golden" if kind == "factor" else f"golden {amount:+.4g}"})
    noise = (baseline.noise_table or {}).get(metric) or {}
    for weight in EMA_WEIGHTS if noise else ():  # a logger that smooths at write time: the golden's moving average
        ema = _ema(gold, weight)
        # within its per-step noise at every step, not only its gates: a trend's lag looks like an offset otherwise
        common = [s for s in steps if noise.get(s, 0) > 0]
        if len(common) < MIN_SCALED_POINTS or run_onset(cur, ema, noise, common) is not None:
            continue
        smoothed = {**golden.series, metric: MappingProxyType(ema)}
        rechecked = _recheck(baseline, replace(golden, series=MappingProxyType(smoothed)), current, own)
        if rechecked and all(r.status == PASS for r in rechecked):
            return Measured(UNITS, measured, True,
                            f"{metric} is the golden smoothed (an exponential moving average, weight {weight:g} on the "
                            f"previous logged value): against it the metric passes its {len(rechecked)} gate check"
                            f"{'s' * (len(rechecked) > 1)}; every other checked metric within bounds "
                            f"({len(others)} gate checks)",
                            {"metric": metric, "kind": "smoothing", "amount": f"{weight:g}",
                             "relation": f"the golden smoothed (an EMA, weight {weight:g} on the previous logged value)"})
    alone = _moved_alone(metric, baseline, golden, current)
    if alone is not None:
        return Measured(UNITS, measured, True, f"{metric} is {alone}; every other checked metric within bounds "
                        f"({len(others)} gate checks)",
                        {"metric": metric, "kind": "computed", "amount": "",
                         "relation": "off the golden from its first logged step, while every other metric stays within "
                                     "its per-step noise (not a constant factor, offset or smoothing)"})
    return Measured(UNITS, measured, False,
                    f"{readings[0][2]}; neither divided by a constant factor, less a constant offset nor against the "
                    "golden smoothed does it pass its gates, and the training moved too: the change is not one of "
                    "units")


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
        if not o_steps or run_onset(o_cur, o_gold, o_noise, o_steps) is not None:
            return None
    return (f"off the golden from its first logged step ({first_z:+.2g} sd at step {steps[0]}, before any update) while "
            f"{', '.join(sorted(others))} never left their per-step noise ({ONSET_RUN} steps at {ONSET_Z:g} sd): "
            "the training did not change, what is logged did")


def _within(trace: Trace, steps: set[int], last: int) -> Trace:
    """``trace`` restricted to ``steps`` up to ``last``."""
    series = {m: MappingProxyType({s: v for s, v in values.items() if s in steps and s <= last})
              for m, values in trace.series.items()}
    return replace(trace, series=MappingProxyType(series),
                   train_steps=tuple(s for s in trace.train_steps if s in steps and s <= last),
                   eval_steps=tuple(s for s in trace.eval_steps if s in steps and s <= last))


def shape_evidence(baseline: Baseline, golden: Trace, current: Trace, results: Sequence[CheckResult],
                   roles: RoleMap) -> Measured | None:
    """The step count differs from the case's: did the run end of its own accord, with the steps it did the golden's?

    Read from the exit status the pipeline recorded (``run[completion]``), the tracker (no cut line, no infrastructure
    failure) and the gates checked again over the steps both runs have."""
    count = next((r for r in results if r.check_id == "steps[count]" and r.status in (FAIL, ERROR)), None)
    if count is None:
        return None
    expected, steps = count.parameters.get("expected"), len(current.train_steps)
    measured = "the exit status, the log's end and the steps both runs did, checked again against the golden"
    values = {"steps": str(steps), "expected": str(expected), "last": str(current.last_train_step)}
    completion = next((r for r in results if r.check_id == "run[completion]"), None)
    if completion is None:
        return Measured(SHAPE, measured, False, "no exit status recorded (an existing log was compared)", values)
    if not completion.parameters.get("clean_exit"):
        return Measured(SHAPE, measured, False, f"the run did not end cleanly: {completion.message}", values)
    cut = [w for w in current.warnings if "truncated" in w]
    broken = [r.check_id for r in results if r.check_id in ("run[tracker]", "run[infra]") and r.status == ERROR]
    if cut or broken:
        return Measured(SHAPE, measured, False, f"exit 0, but the log says otherwise: {(cut or broken)[0]}", values)
    logged = set(current.train_steps) | set(current.eval_steps)
    last = min(current.last_train_step or 0, golden.last_train_step or 0)
    both = logged & (set(golden.train_steps) | set(golden.eval_steps))
    gates = _gates(results, roles)
    undecided = {r.check_id for r in gates if r.status == ERROR}
    rechecked = _recheck(baseline, _within(golden, both, last), _within(current, both, last),
                         {r.check_id for r in gates})
    # a gate that could not decide on the run and cannot on the common steps either covers none of them (a window
    # past the shorter run's end): it says nothing about the steps both runs did
    unreached = [r.check_id for r in rechecked if r.status == ERROR and r.check_id in undecided]
    decided = [r for r in rechecked if r.check_id not in unreached]
    moved = [r.check_id for r in decided if r.status != PASS]
    prefix = f"steps 1-{last} (the steps both runs did)"
    if not decided or moved:
        return Measured(SHAPE, measured, False, f"exit 0 after {steps} steps, but over {prefix} "
                        f"{', '.join(moved) or 'no gate'} did not pass: the steps it did differ too", values)
    beyond = f" ({len(unreached)} more cover none of them)" if unreached else ""
    return Measured(SHAPE, measured, True, f"exit 0 after {steps} training steps (the case expects {expected}), the "
                    f"log ends on a whole row, and over {prefix} all {len(decided)} gate checks that cover them "
                    f"pass{beyond}", values)


#: steps a training role's onset must lead the scores' by to read as a loss term rather than the whole update
ONSET_LEAD = 5
#: rms of the leading role's step-to-step change in z (noise sds) up to the scores' onset, at most, for a steady drift:
#: a redirected objective moves what it regularises steadily; a larger step size moves it in jumps. Set on tiny-grpo
#: seeds 0/11/12 (entropy-sign:0.1 1.2-1.4; lr-x10 3.7, 2.3), then held out on seeds 13/14 (entropy-sign 0.96, 1.5) and
#: 12/13 (lr-x10 2.2, 3.0): a thin margin, which is why the two rules are named together (triage.TIES)
STEADY_RMS = 1.6
_SCORES = ("reward", "eval")


def onset_evidence(baseline: Baseline, golden: Trace, current: Trace, results: Sequence[CheckResult],
                   roles: RoleMap) -> Measured | None:
    """A score gate breached: did one training role (entropy, response length, a loss) leave the golden first, one
    way, after a first step that was the golden's, ``ONSET_LEAD`` steps or more before the scores did?

    Read per step against the baseline's per-step noise (``golden.noise``), so a move under the role's own gate
    threshold counts when it is consistent. A changed loss term (a regulariser's sign or weight) moves what it
    regularises from the first update while the scores follow only through what that does to the policy; a learning
    rate or an advantage bug moves the scores as soon as anything."""
    scores = [r for r in _gates(results, roles) if r.status == FAIL and roles.group_of(r.metric) in _SCORES
              and not is_non_finite(r)]
    noise_table = baseline.noise_table or {}
    if not scores or not noise_table:
        return None
    measured = (f"per step against the golden's noise: the first {ONSET_RUN} consecutive steps at {ONSET_Z:g} sd or "
                "more on one side, for each training role and for the scores")

    def onset_of(metric: str) -> tuple[int, int, float] | None:
        cur, gold, noise = current.get(metric) or {}, golden.get(metric) or {}, noise_table.get(metric) or {}
        steps = [s for s in sorted(set(cur) & set(gold) & set(noise))
                 if noise[s] > 0 and math.isfinite(cur[s]) and math.isfinite(gold[s])]
        if not steps:
            return None
        found = run_onset(cur, gold, noise, steps)
        z = {st: (cur[st] - gold[st]) / noise[st] for st in steps}
        return (found[0], found[1], z[steps[0]], z) if found else None

    score_steps = [r.first_breach_step for r in scores if r.first_breach_step is not None]
    for metric in noise_table:
        if roles.group_of(metric) in _SCORES and (found := onset_of(metric)) is not None:
            score_steps.append(found[0])
    training = []
    for metric in sorted(noise_table):
        if roles.group_of(metric) in ("rollout", "dynamics") and (found := onset_of(metric)) is not None:
            training.append((found[0], metric, found[1], found[2], found[3]))
    if not training:
        return Measured(LOSS_TERM, measured, False, "no training role left the golden for "
                        f"{ONSET_RUN} steps in a row (of {', '.join(sorted(noise_table))})")
    onset, metric, sign, first_z, z = min(training, key=lambda t: (t[0], t[1]))
    scores_at = min(score_steps) if score_steps else math.inf
    direction = "above" if sign > 0 else "below"
    lead_z = [z[st] for st in sorted(z) if onset <= st < scores_at]
    jumps = [b - a for a, b in zip(lead_z, lead_z[1:])]
    roughness = math.sqrt(math.fsum(j * j for j in jumps) / len(jumps)) if len(jumps) >= 3 else math.inf
    values = {"metric": metric, "onset": str(onset), "direction": direction,
              "scores": f"{scores_at:g}", "lead": f"{scores_at - onset:g}", "roughness": f"{roughness:.2g}",
              "steady": "yes" if roughness <= STEADY_RMS else "no",
              # moved before the scores, after a golden first step: the policy changed first, whatever the lead
              "led": "yes" if onset < scores_at and abs(first_z) < ONSET_Z else "no"}
    finding = (f"{metric} {direction} the golden from step {onset} ({ONSET_RUN}+ steps at {ONSET_Z:g} sd or more; its "
               f"first step {first_z:+.2g} sd), the scores from step {scores_at:g}")
    if abs(first_z) >= ONSET_Z or onset <= min(current.train_steps or (onset,)):
        return Measured(LOSS_TERM, measured, False, f"{finding}: it moved at the first step, before any update",
                        values)
    if scores_at - onset < ONSET_LEAD:
        return Measured(LOSS_TERM, measured, False, f"{finding}: the scores moved within {ONSET_LEAD} steps of it, "
                        "as the whole update does", values)
    how = (f"steadily (step-to-step change rms {roughness:.2g} sd, at most {STEADY_RMS:g})" if roughness <= STEADY_RMS
           else f"in jumps (step-to-step change rms {roughness:.2g} sd, above {STEADY_RMS:g}: a step-size change moves "
                "it so)")
    return Measured(LOSS_TERM, measured, True, f"{finding}: {scores_at - onset:g} steps ahead of the scores, {how}",
                    values)


#: noise sds off the golden at the first logged step that say a metric differed before any update
FIRST_STEP_Z = 3.0


def first_step_evidence(baseline: Baseline, golden: Trace, current: Trace, results: Sequence[CheckResult],
                        roles: RoleMap) -> Measured | None:
    """Which metrics were off the golden at their first logged step, in per-step noise sds, under their gates or not.

    The first step's rollout comes before any update: a metric off there was changed by the initial policy, the data
    or the sampler, never by the training loop. Its ``values`` name the roles off there (``moved``: length, entropy,
    ...) and whether the entropy was among them (``entropy``: the policy's own distribution)."""
    noise_table = baseline.noise_table or {}
    if not noise_table or not any(r.status == FAIL for r in _gates(results, roles)):
        return None
    measured = f"each metric with per-step noise at its first logged step: {FIRST_STEP_Z:g} sd or more off the golden"
    off, read = [], []
    for metric in sorted(noise_table):
        cur, gold, noise = current.get(metric) or {}, golden.get(metric) or {}, noise_table[metric]
        steps = [s for s in sorted(set(cur) & set(gold) & set(noise)) if noise[s] > 0]
        if not steps or not (math.isfinite(cur[steps[0]]) and math.isfinite(gold[steps[0]])):
            continue
        z = (cur[steps[0]] - gold[steps[0]]) / noise[steps[0]]
        read.append(f"{metric} {z:+.2g}")
        if abs(z) >= FIRST_STEP_Z:
            off.append((metric, z))
    roles_off = sorted({roles.role_of(m) or m for m, _ in off})
    values = {"moved": ",".join(roles_off), "entropy": "yes" if "entropy" in roles_off else "no",
              "metrics": ", ".join(f"{m} ({z:+.2g} sd)" for m, z in off)}
    finding = f"at the first logged step: {'; '.join(read)} (sd)"
    return Measured(FIRST_STEP, measured, bool(off), finding, values)
