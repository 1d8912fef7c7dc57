"""The train-against-eval reading: did the training scores and the eval scores leave the golden in opposite
directions?

Most changes to how the policy learns (learning rate, mini-batches, weight sync) move what it scores on its training
prompts and on the eval set the same way: a policy that learns slower scores lower on both. A policy that scores
better on its training prompts and worse on the eval set (or the reverse) was trained on other prompts than the
golden's: a sampler that repeats one shard, a filter that drops part of the data, a changed data mix. Other prompts
change what is scored first and how the policy samples after; a policy its update sharpens too fast (a learning rate
x 10, an entropy penalty) also scores higher on its training prompts and lower on eval, but its entropy leaves the
golden first, so a training role (entropy, length) that moved before the training scores keeps the reading from
holding. A judger that grades training answers leniently does the same from the first step; its own rules come first.

Training scores are read per step against the golden's per-step noise (their first onset, :mod:`.per_step_noise`);
eval scores, logged at a few points, from their failed gates (the mean of current - golden over the gate's points).
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
