"""Which cause a failed resume match points at, told apart by the evidence the two logs carry (issue 44):

- one metric differs at a resumed step while every other compared metric is bitwise equal at every resumed step,
  one step after it at least (an update that differed would show there), or its value there is bitwise the
  uninterrupted run's at another step (a value moved in time, whichever direction: no training difference makes a
  float equal to another step's): how that metric is logged, not the training (a logger that writes the previous or
  the next step's value, its state not in the checkpoint);
- the first resumed step sampled differently: with a digest of the step's prompts logged (role ``prompt_digest``,
  :mod:`autotest.workloads.data_metrics`), a digest that differs there is the prompt order (the data sampler's state:
  other prompts, so the samples differ whatever the sampling RNG did); a digest equal there is the same prompts
  sampled otherwise: the rollout engine's weights when a train–inference mismatch metric left its level there
  (``MISMATCH_JUMP`` times the largest the uninterrupted run logged at any step: the engine does not hold what the
  trainer resumed with; other samples of the same weights move it within its level), the sampling RNG when it did
  not. Without
  a digest, prompt order and sampling RNG are named together and the finding says which evidence is missing; without
  a mismatch metric, the RNG and the weights are.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

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
#: a mismatch metric at the first resumed step this many times the largest |value| the uninterrupted run logged is a
#: rollout engine that holds other weights (other samples of the same weights stay within the run's own range)
MISMATCH_JUMP = 10.0
#: what would tell prompt order from the sampling RNG, named where the log lacks it
PROMPTS_MISSING = ("the log has no per-step digest of the prompts drawn (a metric with the prompt_digest role, e.g. "
                   "data/prompt_digest) to tell prompt order from the sampling RNG; log one")


def logged_alone(resume: Resume, failed: Sequence[CheckResult], compared: Sequence[str],
                 uninterrupted: Trace | None, resumed: Trace | None) -> str:
    """The logging finding when one metric alone differs and the training provably continued; "" otherwise."""
    if resume.match != "bitwise" or len(failed) != 1 or len(compared) < MIN_EQUAL_OTHERS + 1:
        return ""
    only = failed[0]
    steps = list(only.points.steps) if only.points is not None else []
    differing = [s for s, b in zip(steps, only.points.breached) if b]
    if not differing:
        return ""
    found = None
    if uninterrupted is not None and resumed is not None:
        found = exact_shift(resumed.get(only.metric) or {}, uninterrupted.get(only.metric) or {}, differing)
    after = any(s > differing[0] for s in steps)
    if not after and (found is None or not _unique(uninterrupted.get(only.metric) or {}, differing, found[0])):
        return ""  # nothing resumed after it, and no value moved in time: an update that differed would not show yet
    others = len(compared) - 1
    where = f"step{'s' * (len(differing) > 1)} {', '.join(map(str, differing))}"
    shift = ""
    if found is not None:
        k = found[0]
        shift = (f"; its resumed value there is bitwise the uninterrupted run's {abs(k)} step{'s' * (abs(k) > 1)} "
                 f"{'earlier' if k > 0 else 'later'}: one run logs it a step off (a logger that writes another "
                 "step's value)")
    if not after:
        equal = "the last resumed step (no later update shows whether training differed there)"
    elif differing[-1] < steps[-1]:
        equal = "the steps after it included"
    else:
        equal = "a step after its first included"
    return (f"{LOGGED_PREFIX}{only.metric} is logged, not the training: it differs at {where} of the resumed steps "
            f"while the {others} other compared metrics are bitwise equal at every resumed step, {equal}"
            f"{shift}; check how that metric is computed or logged across a resume (a logger's state, such as the "
            "last or a running value, or rows held for the next step, not saved in the checkpoint)")


def _unique(before: Mapping[int, float], steps: Sequence[int], k: int) -> bool:
    """Whether the uninterrupted run's value ``k`` steps before each of ``steps`` is logged at that step alone: a
    metric of few distinct values (a count, a mean of 0/1 rewards) equals another step's by chance."""
    values = list(before.values())
    return all(values.count(before[s - k]) == 1 for s in steps if s - k in before)


def _jumped(metric: str, first_step: int, uninterrupted: Trace | None, resumed: Trace | None) -> str:
    """How ``metric`` (a mismatch metric) left its level at the first resumed step; "" when it did not."""
    if uninterrupted is None or resumed is None:
        return ""
    before = [abs(v) for v in (uninterrupted.get(metric) or {}).values() if math.isfinite(v)]
    now = (resumed.get(metric) or {}).get(first_step)
    if not before or now is None or not (math.isnan(now) or abs(now) > MISMATCH_JUMP * max(before)):
        return ""
    return f"{metric} {now:.3g} against at most {max(before):.3g} at any step of the uninterrupted run"


def sampled_differently(first_step: int, sampled: Sequence[CheckResult], at_first: Sequence[CheckResult],
                        compared: Sequence[str], roles: RoleMap, uninterrupted: Trace | None = None,
                        resumed: Trace | None = None) -> str:
    """What the first resumed step sampling differently points at, with the evidence that names it."""
    mismatch = [m for m in compared if roles.group_of(m) == "consistency"]
    digests = [m for m in compared if roles.base_role_of(m) == "prompt_digest"]
    shown = next((r.metric for r in sampled if r.metric not in mismatch), sampled[0].metric)
    if uninterrupted is None or resumed is None:  # no values to read a level from: a mismatch that differs at all
        moved = [r.metric for r in at_first if r.metric in mismatch]
    else:
        moved = [jump for m in mismatch if (jump := _jumped(m, first_step, uninterrupted, resumed))]
    other_prompts = [r.metric for r in at_first if r.metric in digests]
    where = f"step {first_step}, the first resumed step,"
    if other_prompts:
        weights = (f"; the train–inference mismatch left its level there too ({moved[0]}): check the engine's "
                   "weights after loading as well") if moved else ""
        return (f"the prompt order (the data sampler's state): {where} drew other prompts than the uninterrupted run "
                f"({other_prompts[0]} differs there), so it sampled differently ({shown}); check that the checkpoint "
                f"saves and the resume restores the data loader's and sampler's state (its RNG, epoch and position)"
                f"{weights}; whether the sampling RNG was restored cannot be told while the prompts differ")
    same = f" the same prompts as the uninterrupted run ({digests[0]} bitwise equal there) and" if digests else ""
    if moved:
        return (f"the rollout engine's weights: {where}{same} sampled differently ({shown}) and the train–inference "
                f"mismatch left its level there ({moved[0]}): the engine does not hold the weights the trainer "
                "resumed with (check the weight sync after loading the checkpoint)")
    if mismatch and digests:
        return (f"the sampling RNG: {where}{same} sampled differently ({shown}) while the train–inference mismatch "
                f"stayed at its level there ({mismatch[0]}), so the rollout engine holds the trainer's weights; "
                "check that the checkpoint saves and the resume restores the rollout's sampling RNG (its generator or "
                "seed state)")
    if mismatch:
        return (f"the RNG (prompt order or sampling): {where} sampled differently ({shown}) while the "
                f"train–inference mismatch stayed at its level there ({mismatch[0]}), so the rollout engine holds "
                f"the trainer's weights; check the data sampler's and the sampling RNG's saved state; {PROMPTS_MISSING}")
    if digests:
        return (f"the sampling RNG or the rollout engine's weights: {where}{same} sampled differently ({shown}); no "
                "train–inference mismatch metric was compared to tell the weights from the sampling RNG")
    return (f"the RNG (prompt order, sampling) or the rollout engine's weights: {where} already sampled differently "
            f"({shown}); no train–inference mismatch metric was compared to tell the weights from the RNG, and "
            f"{PROMPTS_MISSING}")
