"""The teachers reading (issue 30: per-teacher KL at every step): does a teacher's distillation KL point at that
teacher, or did every teacher's KL move together as the student's update moves them?

Read per teacher (``distill_kl/<teacher>`` roles with per-step noise) against the golden, in noise sds:

- a KL off the golden at its first logged step: before any update the student is the golden's, so the difference is
  in what a teacher answered (its weights, scoring, temperature) or which teacher answered (routing);
- teachers that moved apart: one left the golden and another did not, or they left it in opposite directions (a
  domain's data or routing changed);
- otherwise every teacher's KL left the golden together, one way, after a first step that was the golden's: the
  student learns another way (its step size, mini-batches, loss), and each teacher is scoring what it always did.

The reading holds when a teacher points at itself (the first two); ``teacher-path`` reads it, and a reading that does
not hold leaves the breach to the training-loop rules.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from autotest.inputs.baseline import Baseline
from autotest.inputs.roles import RoleMap
from autotest.judge.model import FAIL, CheckResult, Measured
from autotest.judge.per_step_noise import ONSET_RUN, ONSET_Z, run_onset, z_scores
from autotest.judge.trace import Trace

TEACHERS = "teachers"
#: noise sds off the golden at the first logged step that say a teacher's KL differed before any update
FIRST_STEP_Z = 3.0
_PER_TEACHER = "distill_kl/"


def teacher_evidence(baseline: Baseline, golden: Trace, current: Trace, results: Sequence[CheckResult],
                     roles: RoleMap) -> Measured | None:
    """The teachers reading, where a teacher gate breached and per-teacher KL has per-step noise; else None."""
    if not any(r.kind == "metric" and r.is_gate and r.status == FAIL and r.metric and roles.group_of(r.metric) == "teacher"
               and r.observed is not None and math.isfinite(r.observed) for r in results):
        return None
    noise_table = baseline.noise_table or {}
    teachers = sorted(m for m in noise_table if (roles.role_of(m) or "").startswith(_PER_TEACHER))
    readings = []
    for metric in teachers:
        z = z_scores(metric, golden, current, noise_table[metric])
        if len(z) > ONSET_RUN:
            steps = list(z)
            found = run_onset({s: z[s] for s in steps}, dict.fromkeys(steps, 0.0), dict.fromkeys(steps, 1.0), steps)
            readings.append((metric, z[steps[0]], steps[0], found))
    if not readings:
        return None
    measured = (f"each teacher's KL per step against the golden's noise: off at its first logged step ({FIRST_STEP_Z:g} "
                f"sd), and where it first left the golden ({ONSET_RUN} steps in a row at {ONSET_Z:g} sd, one way)")
    at_first = [(m, z0) for m, z0, _, _ in readings if abs(z0) >= FIRST_STEP_Z]
    moved = {m: found for m, _, _, found in readings if found is not None}
    directions = {sign for _, sign in moved.values()}
    apart = bool(moved) and (len(moved) < len(readings) or len(directions) > 1)
    described = "; ".join(
        f"{m} {z0:+.2g} sd at step {s0}, " + (f"{'above' if f[1] > 0 else 'below'} the golden from step {f[0]}"
                                               if f else "never left it")
        for m, z0, s0, f in readings)
    values = {"first_step": ",".join(m for m, _ in at_first), "moved": ",".join(moved),
              "together": "no" if apart or at_first else "yes"}
    if at_first:
        why = (f"{', '.join(m for m, _ in at_first)} off the golden at the first logged step, before any update: what a "
               "teacher answered, or which teacher answered, changed")
    elif apart:
        why = "the teachers' KL moved apart: a teacher's path (its domain's data or routing), not the whole student"
    elif moved:
        why = ("every teacher's KL left the golden together, one way, after a first step that was the golden's: the "
               "student learns another way, not a teacher")
    else:
        why = "no teacher's KL left its per-step noise"
    return Measured(TEACHERS, measured, bool(at_first or apart), f"{described}: {why}", values)
