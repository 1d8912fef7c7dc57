"""Checks that cannot fire: a gate whose minimum detectable effect (MDE) exceeds the metric's whole range.

Calibration sets a per-step check's threshold at the largest seed deviation x margin. On a noisy trainer that
can be so wide that the smallest shift the gate sees with 80% power (:mod:`autotest.judge.power`) is larger
than everything the metric does over the run: not even a run that stops learning is caught. Such a gate is
**useless**: it cannot fire, so it must not pretend to gate. The rule, applied to every calibrated gate:

- the **range** is the metric's natural range where it is known (an eval metric with a known eval-set size is a
  share of items: [0, 1]), else the span of its golden over the calibrated steps (max - min) for the roles whose
  regressions move the curve within that span (reward, eval, response length, entropy). Level metrics
  (mismatch, KL, step time, memory) are never judged so: a bug moves them far past their own span; nor is a
  curve flat within its seed noise (a golden span under twice what the noise of an N-run mean alone spans over
  those steps): a change moves it past a span that small, so the span says nothing about what the check sees;
- the **MDE** is the gate's at one run in the metric's units (a relative check's share x mean |golden| over its
  steps); a slope's MDE is a growth per step and is not compared;
- a gate whose MDE exceeds the range is kept in the candidate as ``severity: reference`` (it informs, never
  fails), its derivation saying why, and calibration prints one line per such check and lists it in the review
  report, with the way out: drop it, or gate the metric with a pooled check (``scope: pooled``), whose MDE
  shrinks with the steps it pools (for a pooled check itself: calibrate from more runs).

At the next calibration a check demoted by this rule is judged as a gate again (more runs, a quieter trainer
may give it power); one demoted by hand stays as written.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, replace
from types import MappingProxyType
from typing import Mapping, Sequence

from autotest.inputs.baseline import Baseline, CheckSpec
from autotest.inputs.baseline_model import SHADOW
from autotest.inputs.roles import base_role
from autotest.judge.power import GatePower, baseline_power, range_factor
from autotest.judge.trace import Trace
from autotest.scopes import scope_kind

#: roles whose regressions move the metric within the span its golden curve covers
CURVE_ROLES = ("reward", "eval", "response_length", "entropy")
#: a curve whose golden spans less than this many times what seed noise alone would span is flat: its span says
#: nothing about what a check on it can see (tiny-mopd's response length, about 3 tokens throughout, is caught moving under
#: lr x 0.5 by a per-step check whose MDE is four times that span: docs/detection-power.md)
FLAT_NOISE_MULTIPLE = 2.0
#: the derivation of a check this rule demoted starts its note with this (how recalibration finds it)
DEMOTED = "reference only: cannot fire"


@dataclass(frozen=True)
class UselessCheck:
    """A gate whose MDE exceeds its metric's range, and the range it was held against."""

    check_id: str
    metric: str
    mde: float
    low: float
    high: float
    #: where the range comes from: the natural range's reason, or "golden over steps a-b"
    source: str
    #: a pooled check already pools its steps: what is left is more calibration runs
    pooled: bool = False

    @property
    def span(self) -> float:
        return self.high - self.low

    def why(self) -> str:
        return (f"its minimum detectable effect ±{self.mde:.3g} exceeds the metric's whole range {self.span:.3g} "
                f"({self.source} [{self.low:.3g}, {self.high:.3g}]), so it cannot fire; kept as severity: "
                f"reference; drop it, or {self.way_out}")

    @property
    def way_out(self) -> str:
        if self.pooled:
            return "calibrate from more runs (a pooled MDE shrinks with them)"
        return "gate the metric with a pooled check (scope: pooled)"

    def line(self) -> str:
        """The calibration output's line."""
        return f"useless: {self.check_id}: {self.why()}"


def metric_range(baseline: Baseline, metric: str, eval_set_size: Mapping[str, int],
                 runs: Sequence[Trace] = ()) -> tuple[float, float, str] | None:
    """(low, high, source) of ``metric``'s range, or None where the rule does not judge it (a level metric, or a
    curve flat within its seed noise: ``runs`` are the calibration runs the noise is read from)."""
    if eval_set_size.get(metric):
        return 0.0, 1.0, "natural range of a share of eval items"
    role = baseline.role_map.role_of(metric)
    golden = (baseline.golden_table or {}).get(metric) or {}
    first, last = baseline.calibrated_range or (min(golden, default=0), max(golden, default=0))
    steps = sorted(s for s, v in golden.items() if first <= s <= last and math.isfinite(v))
    if role is None or base_role(role) not in CURVE_ROLES or not steps:
        return None
    values = [golden[s] for s in steps]
    # what seed noise alone spans: the expected range of len(steps) draws of the N-run mean's noise
    noise_span = range_factor(len(steps)) * _seed_sd(runs, metric, steps) / math.sqrt(max(1, len(runs)))
    if max(values) - min(values) < FLAT_NOISE_MULTIPLE * noise_span:
        return None
    return min(values), max(values), f"golden over steps {steps[0]}-{steps[-1]}"


def _seed_sd(runs: Sequence[Trace], metric: str, steps: Sequence[int]) -> float:
    """The median over ``steps`` of the runs' seed-to-seed standard deviation (0 with fewer than two runs)."""
    series = [r.get(metric) or {} for r in runs]
    spreads = [statistics.stdev([s[step] for s in series]) for step in steps
               if len(series) >= 2 and all(step in s for s in series)]
    return statistics.median(spreads) if spreads else 0.0


def _mde_in_units(power: GatePower) -> float:
    mde = power.mde(1)
    return mde * (power.golden_scale or 0.0) if power.relative else mde


def useless_checks(baseline: Baseline, runs: Sequence[Trace], eval_set_size: Mapping[str, int] | None = None
                   ) -> list[UselessCheck]:
    """The gates of ``baseline``, calibrated from ``runs``, whose MDE exceeds their metric's range."""
    sizes = dict(eval_set_size or {})
    counted = replace(baseline, provenance=MappingProxyType({**baseline.provenance, "runs": len(runs)}))
    checks = {c.check_id: c for c in baseline.checks}
    found = []
    for power in baseline_power(counted):
        kind = scope_kind(checks[power.check_id].scope)
        if kind.per_step_growth:
            continue
        bounds = metric_range(baseline, power.metric, sizes, runs)
        mde = _mde_in_units(power)
        if bounds is not None and math.isfinite(mde) and mde > bounds[1] - bounds[0]:
            found.append(UselessCheck(power.check_id, power.metric, mde, *bounds, pooled=kind.uses_noise))
    return found


def demote(check: CheckSpec, useless: UselessCheck) -> CheckSpec:
    """``check`` as reference only, its derivation saying why."""
    was = f" (was {SHADOW})" if check.severity == SHADOW else ""  # restored as what it was
    note = (f"{DEMOTED}{was}: MDE {useless.mde:.3g} > the metric's range {useless.span:.3g} ({useless.source}); "
            f"drop it, or {useless.way_out}")
    return replace(check, severity="reference", derivation=f"{note}; {check.derivation}")


def restored(checks: Sequence[CheckSpec]) -> tuple[CheckSpec, ...]:
    """The spec's checks with those this rule demoted at the last calibration judged as gates again."""
    return tuple(replace(c, severity=SHADOW if c.derivation.startswith(f"{DEMOTED} (was {SHADOW})") else "gate")
                 if c.severity == "reference" and c.derivation.startswith(DEMOTED)
                 else c for c in checks)
