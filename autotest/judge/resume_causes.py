"""Which cause a failed resume match points at, told apart by the evidence the two logs carry (issue 44):

- one metric differs at a resumed step while every other compared metric is bitwise equal at every resumed step,
  one step after it at least (an update that differed would show there): how that metric is logged, not the
  training (a logger that writes the previous step's value, its state not in the checkpoint);
- the first resumed step sampled differently: the rollout engine's weights when a train–inference mismatch metric
  differs there too (the engine does not hold what the trainer resumed with), the RNG when the mismatch metrics are
  bitwise equal there; prompt order against the sampling RNG needs the step's prompts, which no role names yet, so
  the finding says that evidence is missing.
"""

from __future__ import annotations

from collections.abc import Sequence

from autotest.inputs.resume_phase import Resume
from autotest.inputs.roles import RoleMap
from autotest.judge.model import CheckResult
from autotest.judge.shift_evidence import exact_shift
from autotest.judge.trace import Trace

#: ``parameters["resume_cause"]`` of a failed resume check that is how one metric is logged (triage's
#: ``resume-logging``), not state the checkpoint lost
LOGGING = "logging"
#: how the logging finding begins
LOGGED_PREFIX = "how "
#: the fewest other compared metrics whose bitwise equality says the training continued
MIN_EQUAL_OTHERS = 2
#: what no log in the harness carries yet, and what would tell prompt order from the sampling RNG
PROMPTS_MISSING = ("the log has no per-step record of the prompts drawn (a digest of the step's prompt ids, or its "
                   "distinct prompts) to tell prompt order from the sampling RNG; log one")


def logged_alone(resume: Resume, failed: Sequence[CheckResult], compared: Sequence[str],
                 uninterrupted: Trace | None, resumed: Trace | None) -> str:
    """The logging finding when one metric alone differs and the training provably continued; "" otherwise."""
    if resume.match != "bitwise" or len(failed) != 1 or len(compared) < MIN_EQUAL_OTHERS + 1:
        return ""
    only = failed[0]
    steps = list(only.points.steps) if only.points is not None else []
    differing = [s for s, b in zip(steps, only.points.breached) if b]
    if not differing or not any(s > differing[0] for s in steps):
        return ""  # nothing resumed after it: an update that differed there would not show yet
    others = len(compared) - 1
    where = f"step{'s' * (len(differing) > 1)} {', '.join(map(str, differing))}"
    shift = ""
    if uninterrupted is not None and resumed is not None:
        found = exact_shift(resumed.get(only.metric) or {}, uninterrupted.get(only.metric) or {}, differing)
        if found is not None:
            k = found[0]
            shift = (f"; its resumed value there is the uninterrupted run's {abs(k)} step{'s' * (abs(k) > 1)} "
                     f"{'earlier' if k > 0 else 'later'}: one run logs it a step off (a logger that writes another "
                     "step's value)")
    return (f"{LOGGED_PREFIX}{only.metric} is logged, not the training: it differs at {where} of the resumed steps "
            f"while the {others} other compared metrics are bitwise equal at every resumed step, "
            f"{'the steps after it included' if differing[-1] < steps[-1] else 'a step after its first included'}"
            f"{shift}; check how that metric is computed or logged across a resume (a logger's state, such as the "
            "last or a running value, not saved in the checkpoint)")


def sampled_differently(first_step: int, sampled: Sequence[CheckResult], at_first: Sequence[CheckResult],
                        compared: Sequence[str], roles: RoleMap) -> str:
    """What the first resumed step sampling differently points at, with the evidence that names it."""
    mismatch = [m for m in compared if roles.group_of(m) == "consistency"]
    shown = next((r.metric for r in sampled if r.metric not in mismatch), sampled[0].metric)
    moved = [r.metric for r in at_first if r.metric in mismatch]
    if moved:
        return (f"the rollout engine's weights: step {first_step}, the first resumed step, sampled differently "
                f"({shown}) and the train–inference mismatch differs there too ({moved[0]}): the engine does not "
                "hold the weights the trainer resumed with (check the weight sync after loading the checkpoint)")
    if mismatch:
        return (f"the RNG (prompt order or sampling): step {first_step}, the first resumed step, sampled differently "
                f"({shown}) while the train–inference mismatch is bitwise equal there ({mismatch[0]}), so the rollout "
                f"engine holds the trainer's weights; check the data sampler's and the sampling RNG's saved state; "
                f"{PROMPTS_MISSING}")
    return (f"the RNG (prompt order, sampling) or the rollout engine's weights: step {first_step}, the first resumed "
            f"step, already sampled differently ({shown}); no train–inference mismatch metric was compared to tell "
            f"the weights from the RNG, and {PROMPTS_MISSING}")
