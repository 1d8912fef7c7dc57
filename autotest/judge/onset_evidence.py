"""Per-step onset readings against the baseline's per-step noise: the loss term (one training role leaving the golden
one way, steps before the scores, after a golden first step) and the first step (which metrics were off the golden
before any update: the initial policy, the data or the sampler)."""

from __future__ import annotations

import math
from typing import Sequence

from autotest.inputs.baseline import Baseline
from autotest.inputs.roles import RoleMap
from autotest.judge.evidence import is_non_finite, moved_gates
from autotest.judge.model import FAIL, CheckResult, Measured
from autotest.judge.per_step_noise import ONSET_RUN, ONSET_Z, run_onset
from autotest.judge.trace import Trace

LOSS_TERM, FIRST_STEP = "loss term", "first step"


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
    scores = [r for r in moved_gates(results, roles) if r.status == FAIL and roles.group_of(r.metric) in _SCORES
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
    if not noise_table or not any(r.status == FAIL for r in moved_gates(results, roles)):
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
