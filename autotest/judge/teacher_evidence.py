"""The teachers reading (issue 30: per-teacher KL at every step): does a teacher's distillation KL point at that
teacher, or did every teacher's KL move together as the student's update moves them?

Read per teacher (``distill_kl/<teacher>`` roles with per-step noise) against the golden, in noise sds:

- a KL off the golden at once: 3 sd at its first logged step, or 2 sd for several steps in a row from one of its
  first steps. Before any update the student is the golden's, and a few updates move it little, so the difference
  is in what a teacher answered (its weights, scoring, temperature) or which teacher answered (routing);
- teachers that moved apart: over the run's second half one teacher's KL above the golden and another's below it (a
  domain's share of the data or of the routing changed). One teacher moving while the others stay is what a slower
  student does too (the harder domain moves first), so that alone is not read as a teacher;
- otherwise the teachers' KL left the golden later and one way: the student learns another way (its step size,
  mini-batches, loss), and each teacher is scoring what it always did.

The reading holds when a teacher points at itself (the first two); ``teacher-path`` reads it, and a reading that does
not hold leaves the breach to the training-loop rules.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from autotest.inputs.baseline import Baseline
from autotest.inputs.roles import RoleMap
from autotest.judge.model import FAIL, CheckResult, Measured
from autotest.judge.per_step_noise import ONSET_RUN, ONSET_Z, run_onset, z_scores
from autotest.judge.trace import Trace

TEACHERS = "teachers"
#: noise sds off the golden at the first logged step that say a teacher's KL differed before any update
FIRST_STEP_Z = 3.0
#: mean noise sds over the second half of the run that count as a teacher's KL above (below) the golden
LATE_Z = 1.5
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
        if len(z) > 2 * ONSET_RUN:
            steps = list(z)
            found = run_onset(z, dict.fromkeys(steps, 0.0), dict.fromkeys(steps, 1.0), steps)
            late = [z[st] for st in steps[len(steps) // 2:]]
            readings.append(_Teacher(metric, steps, z[steps[0]], found, math.fsum(late) / len(late)))
    if not readings:
        return None
    measured = (f"each teacher's KL per step against the golden's noise: off at its first logged step ({FIRST_STEP_Z:g} "
                f"sd), where it first left the golden ({ONSET_RUN} steps in a row at {ONSET_Z:g} sd, one way) and its "
                "mean over the run's second half")
    # at once: far off at the first step, or leaving the golden within the first few steps, before updates add up
    at_once = [t for t in readings if abs(t.first_z) >= FIRST_STEP_Z
               or (t.onset is not None and t.onset[0] in t.steps[:ONSET_RUN])]
    # apart: one teacher's KL above the golden and another's below over the second half (a domain's share changed)
    above = [t.metric for t in readings if t.late >= LATE_Z]
    below = [t.metric for t in readings if t.late <= -LATE_Z]
    apart = bool(above and below)
    described = "; ".join(t.describe() for t in readings)
    values = {"at_once": ",".join(t.metric for t in at_once), "above": ",".join(above), "below": ",".join(below),
              "together": "no" if apart or at_once else "yes"}
    if at_once:
        why = (f"{', '.join(t.metric for t in at_once)} off the golden from the first steps, before updates add up: what "
               "a teacher answered, or which teacher answered, changed")
    elif apart:
        why = (f"over the second half {', '.join(above)} above the golden and {', '.join(below)} below it: the "
               "domains moved apart (a teacher's path: its routing or its domain's share of the data), not the whole "
               "student")
    elif any(t.onset is not None for t in readings):
        why = ("the teachers' KL left the golden later and one way, after first steps that were the golden's: the "
               "student learns another way, not a teacher")
    else:
        why = "no teacher's KL left its per-step noise"
    return Measured(TEACHERS, measured, bool(at_once or apart), f"{described}: {why}", values)


@dataclass(frozen=True)
class _Teacher:
    """One teacher's KL read per step: its z scores' steps, the first one, its onset and its second half's mean."""

    metric: str
    steps: list[int]
    first_z: float
    onset: tuple[int, int] | None
    late: float

    def describe(self) -> str:
        moved = (f"{'above' if self.onset[1] > 0 else 'below'} the golden from step {self.onset[0]}" if self.onset
                 else "never left it")
        return f"{self.metric} {self.first_z:+.2g} sd at step {self.steps[0]}, {moved}, second half {self.late:+.2g} sd"
