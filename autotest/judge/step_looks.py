"""Sequential decisions over steps: a pooled gate looked at before its window ends, its false-alarm budget spent
over the looks, so stopping a run early (``--fail-fast``) never raises the false-alarm rate.

Without looks a pooled gate is decided once, when its window's last step is logged (a window that ends before the run
does is decided there: the statistic is then final, and costs no budget). With ``--fail-fast``
(:func:`with_step_looks`) each pooled *mean* gate is also looked at when ``LOOK_FRACTIONS`` of its window's steps are
logged. Alpha spending with a Bonferroni split, as the adaptive replicates spend theirs (:mod:`autotest.judge.
sequential`): the gate's budget alpha_g (the case's ``false_alarm_budget`` over its m pooled gates) is shared out,
``EARLY_SHARE`` equally over the early looks and the rest (``FINAL_SHARE``) to the window's end, so over every look a
clean run false-alarms with chance at most alpha_g, whatever the correlation between looks.

Each look's threshold follows from the pooled gate's noise model (:mod:`autotest.scopes.pooled`): calibration
measured the spread s of a clean run's window mean of z; the mean over the first j of the window's n steps spreads
at most s x sqrt(n/j) when the steps' deviations are not negatively correlated (a seed ahead at one step tends to
stay ahead; equality for independent steps, less for correlated ones, since Var(mean_j) = c + v/j <= (n/j)(c + v/n)
for a common part c and an independent part v). Look k's threshold is therefore

    t(1 - alpha_g share_k / 2, N-1) x s x sqrt(n/j) = threshold_end x ratio_k x sqrt(n/j),
    ratio_k = t(1 - alpha_g share_k / 2, N-1) / t(1 - alpha_g FINAL_SHARE / 2, N-1)

and the end's threshold moves from the t quantile at alpha_g to the one at alpha_g x FINAL_SHARE (the derivation
says so). A trend statistic has no look (a partial window's fitted change has no calibrated spread); per-step gates
(stepwise, points, percentile) decide on any prefix, as before: a breach on a prefix is a breach of the run.
``tests/unit/judge/test_step_looks.py`` measures the false-alarm rate with the looks on simulated clean runs.
"""

from __future__ import annotations

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
    end = t_quantile(1 - alpha * FINAL_SHARE / 2, n - 1)
    factor = end / t_quantile(1 - alpha / 2, n - 1)
    looks = tuple((fraction, t_quantile(1 - alpha * share / 2, n - 1) / end)
                  for fraction, share in zip(LOOK_FRACTIONS, look_shares()))
    note = (f"; sequential looks (--fail-fast): {len(looks)} early looks at "
            f"{', '.join(f'{f:.0%}' for f in LOOK_FRACTIONS)} of the window spend {EARLY_SHARE:.0%} of the budget, "
            f"the window's end {FINAL_SHARE:.0%}: x {factor:.3f} = t quantile at {FINAL_SHARE:g} of the budget")
    checks = tuple(replace(c, threshold=c.threshold * factor, derivation=c.derivation + note)
                   if c in gates else c for c in baseline.checks)
    return replace(baseline, checks=checks, step_looks=looks)
