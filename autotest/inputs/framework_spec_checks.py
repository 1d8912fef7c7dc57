"""The framework spec's checks as the harness's checks: what a case that follows the spec gates on.

The mapping, and why (xtuner ``check_rl_result`` at ``b934f462``):

- a check with a percentile (``aggregate``, or the checker's default p80 for rewards and response length) is scope
  ``percentile`` with that percentile: the checker takes that percentile of the per-step errors, as this scope does;
- an ``eval/`` metric without one is scope ``final``: the checker compares the step-summary rows that carry it, and
  the golden tracker records the eval score once, at the last step (seed 003 §1), so per step is the final point;
- any other check is scope ``stepwise``: every step's error against the threshold;
- method and operator are kept as written (the harness has ``value`` and ``slowdown`` too).

Not carried over: the checker rounds each per-step error to 5 decimals before comparing; the harness compares the
unrounded error, so a value within 5e-6 of a threshold can decide differently (stated in docs/gpu-runners.md).
"""

from __future__ import annotations

from autotest.inputs.baseline_model import CheckSpec
from autotest.inputs.framework_spec import FrameworkSpec, SpecCheck

EVAL_PREFIX = "eval/"


def scope_of(check: SpecCheck) -> tuple[str, float | None]:
    """(scope, percentile) of the harness check that judges ``check`` as the framework's checker does."""
    if check.percentile is not None:
        return "percentile", float(check.percentile)
    if check.metric.startswith(EVAL_PREFIX):
        return "final", None
    return "stepwise", None


def as_check(check: SpecCheck, where: str) -> CheckSpec:
    scope, percentile = scope_of(check)
    return CheckSpec(metric=check.metric, method=check.method, operator=check.operator, threshold=check.threshold,
                     scope=scope, percentile=percentile,
                     derivation=f"the framework's spec {where}: {check.describe()}")


def spec_checks(spec: FrameworkSpec) -> tuple[CheckSpec, ...]:
    """Every check of ``spec`` as a harness gate, in the spec's order."""
    return tuple(as_check(c, spec.where) for c in spec.checks)
