"""A tier's run (``--tier NAME``, ``tiers:`` in the case): the case shortened, the baseline cut to the gates the
shorter run can judge, and the verdict's statement of what it gave up against the full run.

The gates judged are those whose steps the prefix holds (:mod:`autotest.judge.power_steps`), each with its
calibrated threshold: a shorter run is never judged on a window or a whole-run statistic it cut short. Pure logic.
"""

from __future__ import annotations

import shlex
from dataclasses import replace
from typing import Any

from autotest.errors import UsageError
from autotest.inputs.baseline import Baseline
from autotest.inputs.baseline_model import StepPolicy
from autotest.inputs.case_model import Case
from autotest.judge.model import INFO, CheckResult
from autotest.judge.power_steps import full_run, given_up, judged_from, prefix_gates
from autotest.judge.verdict import Comparison


def tier_case(case: Case, name: str) -> Case:
    """``case`` as its tier ``name`` runs: the tier's args appended to the launch, its steps expected."""
    tier = case.tiers.get(name)
    if tier is None:
        declared = ", ".join(sorted(case.tiers)) or "none"
        raise UsageError(f"{case.source}: --tier {name}: the case declares no tier {name!r} (declared: {declared}); "
                         "add tiers: {" + name + ": {steps: N, args: [...]}} to the case (docs/cases.md)")
    command = case.launch.command
    command = (f"{command} {shlex.join(tier.args)}" if isinstance(command, str) else (*command, *tier.args))
    return replace(case, launch=replace(case.launch, command=command),
                   expected=replace(case.expected, steps=tier.steps))


def tier_baseline(baseline: Baseline, steps: int) -> Baseline:
    """``baseline`` with only the checks a run of ``steps`` can judge (a points check at the points it holds), and
    that many steps expected."""
    golden, full = baseline.golden_table or {}, full_run(baseline)
    kept = []
    for check in baseline.checks:
        first = judged_from(check, list(golden.get(check.metric, {})), full)
        if first is not None and first <= steps:
            # a points gate judges the points the run holds, each at its calibrated threshold (power_steps)
            kept.append(replace(check, points=tuple(p for p in check.points if p <= steps)) if check.points else
                        check)
    return replace(baseline, checks=tuple(kept), steps=StepPolicy(expected=steps, exact=baseline.steps.exact))


def tier_record(name: str, baseline: Baseline, steps: int, replicates: int = 1) -> dict[str, Any]:
    """What a tier's verdict records (results.json ``context.tier``) and states: its steps against the full run's
    and what it gave up (``pr tier, 30 of 45 steps: eval/accuracy[final] not judged; ...``)."""
    full = full_run(baseline)
    lost = given_up(prefix_gates(baseline), steps, full, replicates)
    unjudged = [line.removesuffix(" not judged") for line in lost if line.endswith(" not judged")]
    rest = [line for line in lost if not line.endswith(" not judged")]
    parts = ([f"not judged: {', '.join(unjudged)}"] if unjudged else []) + rest
    statement = f"{name} tier, {steps} of {full} steps: " + ("; ".join(parts) if parts else "nothing given up")
    return {"name": name, "steps": steps, "full_steps": full, "given_up": lost, "statement": statement}


def with_tier(comparison: Comparison, record: dict[str, Any] | None) -> Comparison:
    """``comparison`` whose verdict states the tier's statement as an INFO line (None: left as it is)."""
    if not record:
        return comparison
    result = CheckResult(f"tier[{record['name']}]", INFO, record["statement"], kind="structural",
                         severity="reference", parameters={"steps": record["steps"],
                                                           "full_steps": record["full_steps"]})
    verdict = comparison.verdict
    return replace(comparison, verdict=replace(verdict, results=(*verdict.results, result)))


def tier_lines(verdict: Any) -> list[str]:
    """The console lines of a tier's verdict: its statement of what it gave up (none for a full run)."""
    return [f"tier: {r.message}" for r in getattr(verdict, "results", ()) if r.check_id.startswith("tier[")]
