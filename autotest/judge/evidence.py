"""The evidence triage reads: per metric role, over the whole run, which gates stayed in bounds and which did not.

One :class:`RoleEvidence` row per role (``distill_kl/<teacher>`` per teacher; metrics without a role
under ``other``), built from the verdict's gate check results and the baseline's roles
(:mod:`autotest.inputs.roles`). "Within bounds at every step" means every gate check of that role
passed over its scope (stepwise, pooled, final, ...); a role with no gate check is "not checked" and
counts as evidence for nothing. report.md prints the rows as the triage evidence table.

Some causes look alike in those rows and differ in what can be measured: the readings of :mod:`.readings` take those
from the traces themselves, with the helpers here (:func:`moved_gates`, :func:`recheck`).
"""

from __future__ import annotations

import math
from typing import Iterable, Sequence

from autotest.inputs.baseline import Baseline
from autotest.inputs.roles import GROUPS, RoleMap
from autotest.judge.checks import evaluate_check
from autotest.judge.model import ERROR, FAIL, PASS, CheckResult, RoleEvidence
from autotest.judge.trace import Trace

OTHER = "other"
#: groups whose breach is an accuracy breach (consistency, performance and memory have rules of their own)
ACCURACY_GROUPS = ("reward", "eval", "rollout", "dynamics", "teacher", OTHER)
#: groups that measure the training itself (not its evaluation)
TRAINING_GROUPS = ("reward", "rollout", "dynamics", "teacher", OTHER)


def _breach_key(result: CheckResult) -> float:
    return result.first_breach_step if result.first_breach_step is not None else math.inf


def is_non_finite(result: CheckResult) -> bool:
    return result.observed is not None and not math.isfinite(result.observed)


def role_evidence(results: Iterable[CheckResult], roles: RoleMap) -> tuple[RoleEvidence, ...]:
    """One row per role over the gate metric checks of ``results``, in :data:`GROUPS` order."""
    by_role: dict[str, list[CheckResult]] = {}
    for r in results:
        if r.kind != "metric" or not r.is_gate or not r.metric:
            continue
        by_role.setdefault(roles.role_of(r.metric) or OTHER, []).append(r)
    rows = []
    for role, checks in by_role.items():
        failed = sorted((r for r in checks if r.status == FAIL), key=_breach_key)
        first = failed[0].first_breach_step if failed else None
        rows.append(RoleEvidence(
            role=role, group=roles.group_of(None if role == OTHER else checks[0].metric) or OTHER,
            metrics=tuple(sorted({r.metric for r in checks if r.metric})),
            gates=sum(r.status in (PASS, FAIL) for r in checks), breached=tuple(r.check_id for r in failed),
            first_breach_step=first, non_finite=any(is_non_finite(r) for r in failed),
            undecided=sum(r.status == ERROR for r in checks)))
    order = (*GROUPS, OTHER)
    return tuple(sorted(rows, key=lambda e: (order.index(e.group) if e.group in order else len(order), e.role)))


def first_points(current: Trace | None) -> set[int]:
    """The run's first training step and first eval point (what initialisation shows in)."""
    if current is None:
        return {0, 1}
    firsts = set()
    if current.train_steps:
        firsts.add(current.train_steps[0])
    if current.eval_steps:
        firsts.add(current.eval_steps[0])
    return firsts
#: role groups whose gates say whether anything else moved (performance and memory have rules of their own)
MOVED_GROUPS = (*ACCURACY_GROUPS, "consistency")


def moved_gates(results: Sequence[CheckResult], roles: RoleMap) -> list[CheckResult]:
    return [r for r in results if r.kind == "metric" and r.is_gate and r.metric
            and (roles.group_of(r.metric) or OTHER) in MOVED_GROUPS]


def recheck(baseline: Baseline, golden: Trace, current: Trace, check_ids: set[str]) -> list[CheckResult]:
    """The checks ``check_ids`` of ``baseline`` evaluated again on ``current`` against ``golden``."""
    return [evaluate_check(spec, baseline, golden, current, baseline.golden_table is not None)
            for spec in baseline.checks if spec.check_id in check_ids]
