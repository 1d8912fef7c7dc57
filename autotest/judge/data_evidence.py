"""The data readings: did what the trainer is fed change (``data composition``), and did the training scores and
the eval scores leave the golden in opposite directions (``train against eval``)?

``data composition`` reads what the log says the steps' prompts were made of, where it says it (the data roles of
:mod:`autotest.inputs.roles`: distinct prompts, repeated prompts, prompts per source). Each metric is held per step
against a reference: the golden's series where the golden has it; else, for repeated prompts, none (a sampler over
dataset rows hands each row once per step), and for the prompts per source, the run's own first
``REFERENCE_STEPS`` steps (a mix that changed within the run). A step differs when its count is off the reference by
one prompt or more, by ``MIN_SHARE`` of the step's prompts or more, and, for a source's count, by ``ONSET_Z``
binomial sds of the reference share (draws of a mixture vary by that much); the reading holds when one metric
differs at ``ONSET_RUN`` steps in a row or more, all one way. It names that metric, the reference and both values.

``train against eval``: most changes to how the policy learns (learning rate, mini-batches, weight sync) move what
it scores on its training prompts and on the eval set the same way: a policy that learns slower scores lower on
both. A policy that scores better on its training prompts and worse on the eval set (or the reverse) was trained on
other prompts than the golden's: a sampler that repeats one shard, a filter that drops part of the data, a changed
data mix. Other prompts change what is scored first and how the policy samples after; a policy its update sharpens
too fast (a learning rate x 10, an entropy penalty) also scores higher on its training prompts and lower on eval,
but its entropy leaves the golden first, so a training role (entropy, length) that moved before the training scores
keeps the reading from holding. A judger that grades training answers leniently does the same from the first step;
its own rules come first.

Its training scores are read per step against the golden's per-step noise (their first onset,
:mod:`.per_step_noise`); eval scores, logged at a few points, from their failed gates (the mean of current - golden
over the gate's points).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from autotest.inputs.baseline import Baseline
from autotest.inputs.roles import RoleMap
from autotest.judge.model import FAIL, CheckResult, Measured
from autotest.judge.per_step_noise import ONSET_RUN, ONSET_Z, z_onset, z_scores
from autotest.judge.trace import Trace

TRAIN_EVAL = "train against eval"
COMPOSITION = "data composition"
#: the roles a composition reading holds against a reference (autotest.inputs.roles, group "data")
COMPOSITION_ROLES = ("repeated_prompts", "distinct_prompts", "source_prompts")
#: a composition change smaller than this share of the step's prompts is not read
MIN_SHARE = 0.05
#: steps at the start of a run that are the reference of a source's count when the golden has none
REFERENCE_STEPS = 3
GOLDEN = "the golden's"


def _step_total(current: Trace, roles: RoleMap, step: int) -> float | None:
    """The step's prompts: the sum of its per-source counts, else its distinct plus repeated prompts."""
    by_role: dict[str, list[float]] = {}
    for metric in current.metrics:
        role = roles.base_role_of(metric)
        value = (current.get(metric) or {}).get(step)
        if role in COMPOSITION_ROLES and value is not None and math.isfinite(value):
            by_role.setdefault(role, []).append(value)
    if by_role.get("source_prompts"):
        return math.fsum(by_role["source_prompts"])
    if by_role.get("distinct_prompts") and by_role.get("repeated_prompts"):
        return by_role["distinct_prompts"][0] + by_role["repeated_prompts"][0]
    return None


def _reference(metric: str, role: str, golden: Trace, current: Trace) -> tuple[dict[int, float], str] | None:
    """(reference per step, what it is) for one composition metric; None when there is none to hold it against."""
    steps = [s for s in current.train_steps if s in (current.get(metric) or {})]
    gold = golden.get(metric) or {}
    if any(s in gold for s in steps):
        return {s: gold[s] for s in steps if s in gold}, GOLDEN
    if role == "repeated_prompts":
        return dict.fromkeys(steps, 0.0), "none repeated, as a sampler over dataset rows hands each once per step"
    train = list(current.train_steps)
    if role == "source_prompts" and len(train) >= REFERENCE_STEPS + ONSET_RUN:
        # a source absent from a step had no prompt there: a source mixed in later starts from 0
        values = current.get(metric) or {}
        first = train[:REFERENCE_STEPS]
        mean = math.fsum(values.get(s, 0.0) for s in first) / len(first)
        return {s: mean for s in train[REFERENCE_STEPS:]}, f"the run's own first {REFERENCE_STEPS} steps"
    return None


def _differs(metric: str, role: str, ref: dict[int, float], current: Trace,
             roles: RoleMap) -> list[tuple[int, float, float]]:
    """(step, current, reference) where ``metric`` differs from its reference (module docstring), in step order."""
    values = current.get(metric) or {}
    out = []
    for step in sorted(ref):
        have, want = values.get(step, 0.0 if role == "source_prompts" else None), ref[step]
        if have is None or not (math.isfinite(have) and math.isfinite(want)):
            continue
        # the step's prompts; a log with no other data metric: the larger of the two counts
        total = _step_total(current, roles, step) or max(have, want)
        sd = 0.0
        if role == "source_prompts":
            share = min(max(want / total, 0.0), 1.0)
            sd = math.sqrt(total * share * (1 - share))
        if abs(have - want) >= max(1.0, MIN_SHARE * total, ONSET_Z * sd):
            out.append((step, have, want))
    return out


def _run_of(differing: list[tuple[int, float, float]], steps: list[int]) -> list[tuple[int, float, float]]:
    """The first ``ONSET_RUN`` or more consecutive logged steps that differ one way; [] when none."""
    at = {s: (h, w) for s, h, w in differing}
    run: list[tuple[int, float, float]] = []
    for step in steps:
        hit = at.get(step)
        if hit is not None and (not run or (hit[0] > hit[1]) == (run[-1][1] > run[-1][2])):
            run.append((step, *hit))
        elif len(run) >= ONSET_RUN:
            return run
        else:
            run = [(step, *hit)] if hit is not None else []
    return run if len(run) >= ONSET_RUN else []


def composition_evidence(golden: Trace, current: Trace, roles: RoleMap) -> Measured | None:
    """The data composition reading where the run logs a metric of a data role with a reference; else None."""
    candidates = sorted((COMPOSITION_ROLES.index(role), metric) for metric in current.metrics
                        if (role := roles.base_role_of(metric)) in COMPOSITION_ROLES)
    measured = (f"each data composition metric per step against its reference: off by one prompt or more, by "
                f"{MIN_SHARE:.0%} of the step's prompts or more and (a source's count) by {ONSET_Z:g} binomial sds, "
                f"at {ONSET_RUN} steps in a row or more, one way")
    held, seen = None, []
    for _, metric in candidates:
        role = roles.base_role_of(metric) or ""
        found = _reference(metric, role, golden, current)
        if found is None:
            continue
        ref, what = found
        seen.append(metric)
        steps = [s for s in current.train_steps if s in ref]
        differing = _differs(metric, role, ref, current, roles)
        run = _run_of(differing, steps)
        if run and held is None:
            held = (metric, role, what, run, len(differing), len(steps))
    if not seen:
        return None
    if held is None:
        return Measured(COMPOSITION, measured, False, f"{', '.join(seen)}: never {ONSET_RUN} steps in a row off "
                        "the reference", {})
    metric, role, what, run, differing, total = held
    step, have, want = run[0]
    direction = "above" if have > want else "below"
    unlogged = "" if what == GOLDEN else "; the golden does not log it"
    finding = (f"{metric} {direction} its reference from step {step}: {have:g} against {want:g} ({what}{unlogged}), "
               f"{differing} of {total} steps differ")
    values = {"metric": metric, "role": role, "onset": str(step), "current": f"{have:g}", "reference": f"{want:g}",
              "reference_kind": what, "direction": direction, "steps": f"{differing} of {total}"}
    return Measured(COMPOSITION, measured, True, finding, values)


def _eval_shift(results: Sequence[CheckResult], roles: RoleMap) -> tuple[str, float] | None:
    """(metric, mean current - golden over its points) of the first failed eval gate with finite points."""
    for r in results:
        if not (r.kind == "metric" and r.is_gate and r.status == FAIL and r.metric and roles.group_of(r.metric) == "eval"):
            continue
        diffs = [p.current - p.baseline for p in r.points if p.current is not None and p.baseline is not None
                 and math.isfinite(p.current) and math.isfinite(p.baseline)]
        if diffs:
            return r.metric, math.fsum(diffs) / len(diffs)
    return None


def _onset_of(metric: str, golden: Trace, current: Trace, noise_table) -> tuple[int, int] | None:
    """(step, sign) where ``metric`` first left the golden in its per-step noise (:func:`.per_step_noise.run_onset`)."""
    return z_onset(z_scores(metric, golden, current, noise_table.get(metric) or {}))


def train_eval_evidence(baseline: Baseline, golden: Trace, current: Trace, results: Sequence[CheckResult],
                        roles: RoleMap) -> Measured | None:
    """The reading where an eval gate failed and a training score has per-step noise; else None."""
    shift = _eval_shift(results, roles)
    noise_table = baseline.noise_table or {}
    rewards = sorted(m for m in noise_table if roles.group_of(m) == "reward")
    if shift is None or not rewards:
        return None
    measured = (f"the training scores per step against the golden's noise ({ONSET_RUN} steps in a row at {ONSET_Z:g} sd, "
                "one way) against the direction of the failed eval gate")
    eval_metric, eval_shift = shift
    eval_side = "above" if eval_shift > 0 else "below"
    found = [(metric, onset) for metric in rewards
             if (onset := _onset_of(metric, golden, current, noise_table)) is not None]
    values = {"eval": eval_metric, "eval_direction": eval_side}
    if not found:
        return Measured(TRAIN_EVAL, measured, False, f"{eval_metric} {eval_side} the golden ({eval_shift:+.3g} on "
                        f"average over its gate's points) while {', '.join(rewards)} never left the per-step noise",
                        values)
    metric, (step, sign) = found[0]
    train_side = "above" if sign > 0 else "below"
    values.update(train=metric, train_direction=train_side, onset=str(step))
    finding = (f"{metric} {train_side} the golden from step {step} ({ONSET_RUN}+ steps at {ONSET_Z:g} sd or more) while "
               f"{eval_metric} is {eval_side} it ({eval_shift:+.3g} on average over its gate's points)")
    if train_side == eval_side:
        return Measured(TRAIN_EVAL, measured, False, f"{finding}: both one way, as any change to the learning moves "
                        "them", values)
    # other prompts change what is scored before they change how the policy samples; a policy sharpened by its
    # update (a larger step, an entropy penalty) also fits its training prompts and fails eval, its entropy first
    led = sorted((found[0], m) for m in noise_table if roles.group_of(m) in ("rollout", "dynamics")
                 and (found := _onset_of(m, golden, current, noise_table)) is not None and found[0] < step)
    if led:
        first, role_metric = led[0]
        return Measured(TRAIN_EVAL, measured, False, f"{finding}, but {role_metric} left the golden first (step "
                        f"{first}): the policy's own distribution moved before what it scores, as a change to how it "
                        "learns moves it", values)
    return Measured(TRAIN_EVAL, measured, True, f"{finding}: the policy scores {train_side} on its training prompts and "
                    f"{eval_side} on the eval set, so it was trained on other prompts than the golden run's", values)
