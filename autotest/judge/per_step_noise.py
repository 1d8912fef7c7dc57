"""A run's metric read step by step against the golden, in the baseline's per-step noise sds (``golden.noise``): where
it first left the golden, one way, for several steps in a row. The hypothesis readings (:mod:`.evidence`,
:mod:`.teacher_evidence`) are made of these."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from autotest.judge.trace import Trace

#: a step counts as moved when the current value is this many per-step noise sds from the golden
ONSET_Z = 2.0
#: consecutive moved steps, all on one side of the golden, that make an onset (one noisy step is not one)
ONSET_RUN = 3


def run_onset(cur: Mapping[int, float], gold: Mapping[int, float], noise: Mapping[int, float],
          steps: Sequence[int]) -> tuple[int, int] | None:
    """(first step, sign) of the first ``ONSET_RUN`` consecutive logged steps that are all ``ONSET_Z`` noise sds off the
    golden on the same side; None if there is none."""
    signs = []
    for step in steps:
        z = (cur[step] - gold[step]) / noise[step]
        signs.append((step, (z > 0) - (z < 0) if abs(z) >= ONSET_Z else 0))
    for i in range(len(signs) - ONSET_RUN + 1):
        window = {sign for _, sign in signs[i:i + ONSET_RUN]}
        if len(window) == 1 and 0 not in window:
            return signs[i][0], signs[i][1]
    return None


def z_onset(z: Mapping[int, float]) -> tuple[int, int] | None:
    """:func:`run_onset` of scores already in noise sds (:func:`z_scores`)."""
    steps = list(z)
    return run_onset(z, dict.fromkeys(steps, 0.0), dict.fromkeys(steps, 1.0), steps)


def z_scores(metric: str, golden: Trace, current: Trace, noise: Mapping[int, float]) -> dict[int, float]:
    """``metric``'s (current - golden) / noise at every step both logged with a positive noise, finite values only."""
    cur, gold = current.get(metric) or {}, golden.get(metric) or {}
    return {s: (cur[s] - gold[s]) / noise[s] for s in sorted(set(cur) & set(gold) & set(noise))
            if noise[s] > 0 and math.isfinite(cur[s]) and math.isfinite(gold[s])}


def mean_noise_scale(replicates: int, calibration_runs: int) -> float:
    """The noise of the mean of ``replicates`` runs against the golden (the mean of ``calibration_runs``), as a share of
    one run's: sqrt((1/K + 1/N) / (1 + 1/N)); 1 for one run."""
    assert replicates >= 1 and calibration_runs >= 1
    k, n = replicates, calibration_runs
    return math.sqrt((1 / k + 1 / n) / (1 + 1 / n))


#: the fewest logged steps a roughness is read from
MIN_ROUGHNESS_STEPS = 10


def roughness(z: Mapping[int, float]) -> float | None:
    """How much a run's deviation from the golden changes from one logged step to the next: the rms of the
    consecutive differences of its z scores (:func:`z_scores`); None under ``MIN_ROUGHNESS_STEPS`` steps.

    A trend the run and the golden share cancels; a slower or faster learner's smooth deviation adds little; the
    run's own step-to-step noise is what is left. A logger that smooths what it writes takes most of that away."""
    if len(z) < MIN_ROUGHNESS_STEPS:
        return None
    values = [z[s] for s in sorted(z)]
    jumps = [b - a for a, b in zip(values, values[1:])]
    return math.sqrt(math.fsum(j * j for j in jumps) / len(jumps))


#: noise sds off the golden at one step that no clean seed reaches (a two-sided 4 sd step is ~6e-5 per step): "within
#: its noise at every step" means no step this far off and no onset (:func:`run_onset`)
STEP_Z = 4.0


def left_noise(cur: Mapping[int, float], gold: Mapping[int, float], noise: Mapping[int, float],
               steps: Sequence[int] | None = None) -> str | None:
    """Where ``cur`` left its per-step noise around ``gold``: the first step ``STEP_Z`` sds off, or the first onset
    (``ONSET_RUN`` steps at ``ONSET_Z`` sd on one side); None when it stayed within its noise at every common step
    (finite values with a positive noise; ``steps`` default: all of them)."""
    if steps is None:
        steps = [s for s in sorted(set(cur) & set(gold) & set(noise))
                 if noise[s] > 0 and math.isfinite(cur[s]) and math.isfinite(gold[s])]
    far = next((s for s in steps if abs(cur[s] - gold[s]) >= STEP_Z * noise[s]), None)
    if far is not None:
        return f"{(cur[far] - gold[far]) / noise[far]:+.2g} sd at step {far}"
    onset = run_onset(cur, gold, noise, steps)
    if onset is not None:
        return f"{ONSET_RUN} steps at {ONSET_Z:g} sd {'above' if onset[1] > 0 else 'below'} from step {onset[0]}"
    return None
