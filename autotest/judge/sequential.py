"""Adaptive replicates: one run first, more only when its statistics sit near a threshold.

A fixed K spends K runs on every verdict, although most runs are far from any threshold. A sequential design
looks after one run and again after K_max (``LOOKS``); the case's false-alarm budget alpha for each pooled gate is
spent over the looks (alpha spending with a Bonferroni split: look k may raise a false alarm with chance at most
alpha x ``ALPHA_SHARE[k]``, so over both looks at most alpha, whatever the correlation between them):

- look 1 (one run): the pooled thresholds are the calibrated ones re-quantiled to alpha/2; a gate above it FAILs
  and the verdict stops; when every pooled statistic is below ``CONTINUE_BELOW`` of its threshold the run PASSes
  and stops; otherwise (the grey zone) K_max - 1 more seeds run;
- look 2 (the mean of K_max runs): the pooled thresholds scaled for the mean (``replicate_mean``) and
  re-quantiled to alpha/2 decide.

Per-step gates (max deviation x margin) keep their thresholds at both looks: they have no declared alpha to
spend, and a FAIL of one at look 1 stops the verdict as for a single run. ``benchmarks/bench_adaptive.py``
measures the design's false-alarm rate, power and expected runs against fixed K.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Sequence

from autotest.inputs.baseline import Baseline
from autotest.judge.model import ERROR, FAIL, CheckResult
from autotest.judge.power import calibration_runs, pooled_gates, t_quantile
from autotest.scopes import find, scope_kind

LOOKS = 2
ALPHA_SHARE = (0.5, 0.5)
#: a look-1 pooled statistic below this share of its look-1 threshold is decided PASS without more runs
CONTINUE_BELOW = 0.5
STOP, MORE = "stop", "more"


def requantile(baseline: Baseline, share: float) -> Baseline:
    """``baseline`` with each pooled gate's threshold moved from its budget's quantile to ``share`` of the budget."""
    n = calibration_runs(baseline)
    budget = baseline.calibration.false_alarm_budget if baseline.calibration is not None else 0.05
    alpha = budget / max(1, len(pooled_gates(baseline)))
    if n < 2:
        return baseline
    factor = t_quantile(1 - alpha * share / 2, n - 1) / t_quantile(1 - alpha / 2, n - 1)
    note = f"; adaptive replicates: x {factor:.3f} = t quantile at {share:g} of the budget (alpha spending)"
    checks = tuple(replace(c, threshold=c.threshold * factor, derivation=c.derivation + note)
                   if scope_kind(c.scope).uses_noise and c.gating else c for c in baseline.checks)
    return replace(baseline, checks=checks)


def decide_first_look(results: Sequence[CheckResult]) -> str:
    """After one run: stop (a gate failed or could not be decided, or every pooled statistic is well inside its
    threshold: the one run's verdict stands) or more (a pooled statistic in the grey zone below its threshold)."""
    gates = [r for r in results if r.is_gate]
    if any(r.status in (FAIL, ERROR) for r in gates):
        return STOP
    for r in gates:
        kind = find(r.scope)
        if kind is not None and kind.uses_noise and r.observed is not None and r.threshold:
            if abs(r.observed) >= CONTINUE_BELOW * abs(r.threshold):
                return MORE
    return STOP
