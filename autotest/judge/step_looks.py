"""Sequential decisions over steps: a pooled gate looked at before its window ends, its false-alarm budget spent
over the looks, so stopping a run early (``--fail-fast``) never raises the false-alarm rate.

Without looks a pooled gate is decided once, when its window's last step is logged (a window that ends before the run
does is decided there: the statistic is then final, and costs no budget). With ``--fail-fast``
(:func:`with_step_looks`) each pooled *mean* gate is also looked at when ``LOOK_FRACTIONS`` of its window's steps are
logged. Alpha spending with a Bonferroni split, as the adaptive replicates spend theirs (:mod:`autotest.judge.
sequential`): the gate's budget alpha_g (the case's ``false_alarm_budget`` over its m pooled gates) is shared out,
``EARLY_SHARE`` equally over the early looks and the rest (``FINAL_SHARE``) to the window's end, so over every look a
clean run false-alarms with chance at most alpha_g, whatever the correlation between looks.

A look's bound assumes nothing of how the steps' deviations are correlated (a seed's offset shared by the first
steps, wandering later: the window's spread calibration measured says nothing about its prefixes). The mean of the
first j of z can pass c only if one of those j steps does, and one step's z of a fresh clean run is about Student's t
with N-1 dof scaled by sqrt(1 + 1/N) (its distance from the mean of N calibration runs, in units of their sd; the
stored noise is pooled over neighbouring steps and floored, which the simulation keeps), so

    P(|mean of z over j steps| >= c) <= j x P(|z_s| >= c)      c = sqrt(1 + 1/N) x t(1 - alpha_k / (2 j), N-1)

keeps look k within alpha_k = alpha_g x share_k (a union bound over the steps; :func:`look_bound`). The bound is
wide (5.7-9.1 x noise on the embedded cases, for 1 to 36 steps), so an early look catches a change far outside the noise (a grader
bug, a broken sampler) within a few steps and leaves a subtle one to the window's end. A replicate mean is looked
at with one run's bound (wider than the mean's: conservative). The end's threshold moves from the t quantile at
alpha_g to the one at alpha_g x FINAL_SHARE (the derivation says so). A trend statistic has no look; per-step
gates (stepwise, points, percentile) decide on any prefix, as before: a breach on a prefix is a breach of the run.
``tests/unit/judge/test_step_looks.py`` measures the false-alarm rate with the looks on simulated clean runs.
"""

from __future__ import annotations

import math
from dataclasses import replace

from autotest.inputs.baseline import Baseline
from autotest.judge.power import calibration_runs, pooled_gates, t_quantile

#: the early looks: when these shares of a pooled gate's window steps are logged
LOOK_FRACTIONS = (0.2, 0.4, 0.6, 0.8)
#: the share of each gate's false-alarm budget spent on the early looks (equally), the rest at the window's end
EARLY_SHARE = 0.2
FINAL_SHARE = 1.0 - EARLY_SHARE


def look_shares() -> tuple[float, ...]:
    """Each early look's share of a gate's budget (they and ``FINAL_SHARE`` sum to 1)."""
    return tuple(EARLY_SHARE / len(LOOK_FRACTIONS) for _ in LOOK_FRACTIONS)


def look_bound(alpha: float, steps: int, runs: int) -> float:
    """The bound on |mean of z over ``steps`` steps| that a clean run passes with chance at most ``alpha``, whatever
    the correlation between the steps (module doc); ``runs``: the calibration runs behind golden and noise."""
    return math.sqrt(1 + 1 / runs) * t_quantile(1 - alpha / (2 * steps), runs - 1)


def with_step_looks(baseline: Baseline) -> Baseline:
    """``baseline`` with early looks at its pooled mean gates and their end-of-window thresholds at
    ``FINAL_SHARE`` of the budget (unchanged when it has no pooled gate or fewer than two calibration runs; applied
    once: a baseline that has looks is returned as it is)."""
    gates = [c for c in pooled_gates(baseline) if c.statistic == "mean"]
    n = calibration_runs(baseline)
    if baseline.step_looks or not gates or n < 2:
        return baseline
    budget = baseline.calibration.false_alarm_budget if baseline.calibration is not None else 0.05
    alpha = budget / max(1, len(pooled_gates(baseline)))
    factor = t_quantile(1 - alpha * FINAL_SHARE / 2, n - 1) / t_quantile(1 - alpha / 2, n - 1)
    looks = tuple((fraction, alpha * share) for fraction, share in zip(LOOK_FRACTIONS, look_shares()))
    note = (f"; sequential looks (--fail-fast): {len(looks)} early looks at "
            f"{', '.join(f'{f:.0%}' for f in LOOK_FRACTIONS)} of the window spend {EARLY_SHARE:.0%} of the budget, "
            f"the window's end {FINAL_SHARE:.0%}: x {factor:.3f} = t quantile at {FINAL_SHARE:g} of the budget")
    checks = tuple(replace(c, threshold=c.threshold * factor, derivation=c.derivation + note)
                   if c in gates else c for c in baseline.checks)
    return replace(baseline, checks=checks, step_looks=looks)
