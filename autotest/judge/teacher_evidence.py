"""The teachers reading (issue 30: per-teacher KL at every step): does a teacher's distillation KL point at that
teacher, or did the scores fall with it, as a student that learns less moves them both?

Read per teacher (``distill_kl/<teacher>`` roles with per-step noise) against the golden, in noise sds:

- a KL off the golden at once: 3 sd at its first logged step, or 2 sd for several steps in a row from one of its
  first steps. Before any update the student is the golden's, and a few updates move it little, so the difference
  is in what a teacher answered (its weights, scoring, temperature) or which teacher answered (routing);
- teachers that moved apart: over the run's second half one teacher's KL above the golden and another's below it (a
  domain's share of the data or of the routing changed). One teacher moving while the others stay is what a slower
  student does too (the harder domain moves first), so that alone is not read as a teacher;
- the KL above the golden over the second half while no score (reward, eval) fell: the student does the task as well
  and sits further from its teachers, so what they answer or who answers changed (a fifth of the samples routed to
  the other teacher moves the KL at step 1 by about one sd only, then steadily);
- otherwise, when the scores fell with the KL, the student learns less of the task and of its teachers alike: its step
  size, mini-batches or loss, and each teacher is scoring what it always did (``student``).

The reading holds when a teacher points at itself (the first three); ``teacher-path`` reads it. A reading that names
the student leaves the breach to the training-loop rules; one that names neither leaves it to the order of the
breaches.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from autotest.inputs.baseline import Baseline
from autotest.inputs.roles import RoleMap
from autotest.judge.model import FAIL, CheckResult, Measured
from autotest.judge.per_step_noise import ONSET_RUN, ONSET_Z, z_onset, z_scores
from autotest.judge.trace import Trace

TEACHERS = "teachers"
#: noise sds off the golden at the first logged step that say a teacher's KL differed before any update
FIRST_STEP_Z = 3.0
#: mean noise sds over the second half of the run that count as a teacher's KL above (below) the golden
LATE_Z = 1.5
_PER_TEACHER = "distill_kl/"


def _second_half(z: dict[int, float]) -> float | None:
    """Mean z over the second half of the steps (the last point alone for fewer than 2)."""
    steps = list(z)
    late = [z[s] for s in steps[len(steps) // 2:]]
    return math.fsum(late) / len(late) if late else None


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
            found = z_onset(z)
            readings.append(_Teacher(metric, steps, z[steps[0]], found, _second_half(z) or 0.0))
    if not readings:
        return None
    scores = {m: late for m in sorted(noise_table) if roles.group_of(m) in ("reward", "eval")
              and (late := _second_half(z_scores(m, golden, current, noise_table[m]))) is not None}
    measured = (f"each teacher's KL per step against the golden's noise: off at its first logged step ({FIRST_STEP_Z:g} "
                f"sd), where it first left the golden ({ONSET_RUN} steps in a row at {ONSET_Z:g} sd, one way) and its "
                "mean over the run's second half, against the scores' (rewards, eval) second half")
    # at once: far off at the first step, or leaving the golden within the first few steps, before updates add up
    at_once = [t for t in readings if abs(t.first_z) >= FIRST_STEP_Z
               or (t.onset is not None and t.onset[0] in t.steps[:ONSET_RUN])]
    # apart: a domain's KL above the golden and another's below (or its eval above and another's below)
    above = [t.metric for t in readings if t.late >= LATE_Z]
    below = [t.metric for t in readings if t.late <= -LATE_Z]
    evals_up = [m for m, late in scores.items() if roles.group_of(m) == "eval" and late >= LATE_Z]
    evals_down = [m for m, late in scores.items() if roles.group_of(m) == "eval" and late <= -LATE_Z]
    apart = bool(above and below) or bool(evals_up and evals_down)
    fell = [m for m, late in scores.items() if late <= -LATE_Z]
    described = "; ".join(t.describe() for t in readings)
    if scores:
        described += "; scores over the second half: " + ", ".join(f"{m} {v:+.2g} sd" for m, v in scores.items())
    student = not at_once and not apart and bool(fell)
    values = {"at_once": ",".join(t.metric for t in at_once), "above": ",".join(above), "below": ",".join(below),
              "scores_fell": ",".join(fell), "student": "yes" if student else "no"}
    if at_once:
        why = (f"{', '.join(t.metric for t in at_once)} off the golden from the first steps, before updates add up: what "
               "a teacher answered, or which teacher answered, changed")
    elif apart:
        pairs = (above, below) if above and below else (evals_up, evals_down)
        why = (f"over the second half {', '.join(pairs[0])} above the golden and {', '.join(pairs[1])} below it: the "
               "domains moved apart (a teacher's routing or its domain's share of the data), not the whole student")
    elif student:
        why = (f"the scores fell with the KL ({', '.join(fell)} below the golden over the second half): the student "
               "learns less of the task and of its teachers alike, a training-loop change, not a teacher")
    elif above:
        why = (f"{', '.join(above)} above the golden over the second half while no score fell: the student does the task "
               "as well and sits further from its teachers, so what they answer (or who answers) changed")
    else:
        why = "no teacher's KL left its per-step noise and no score fell: the readings do not tell the teacher from the loop"
    holds = bool(at_once or apart or (above and not fell))
    return Measured(TEACHERS, measured, holds, f"{described}: {why}", values)


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
