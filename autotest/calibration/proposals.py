"""What ``rl-autotest init`` proposes from one run: a role per metric, checks per role, a baseline spec.

Pure logic: a :class:`~autotest.judge.trace.Trace` in, frozen proposals out. Roles come from
:mod:`autotest.inputs.roles` (the preset inferred from the metric names, or the one asked for); each
role with a gate gets the checks of :data:`CHECKS_BY_ROLE` on its primary metric, every threshold a
placeholder (``threshold: placeholder``), so the spec can never pass before ``rl-autotest calibrate``
has measured the run-to-run noise.

| role              | proposed checks (all thresholds placeholders)                                  |
|-------------------|--------------------------------------------------------------------------------|
| reward            | absolute p80 of per-step errors; pooled mean per window; pooled mean over every calibrated step |
| eval              | absolute at the final eval point; pooled mean per window of the eval points    |
| response_length   | relative p80 of per-step errors; pooled mean per window                        |
| entropy           | absolute at the first training step (the initialisation); pooled mean per window |
| mismatch          | absolute p50 of per-step errors; value at every step, a count of breaching steps allowed |
| distill_kl        | absolute p80; pooled mean                                                      |
| ref_kl            | absolute p80 (reference only)                                                  |
| step_time         | slowdown p50 (reference only: machine-dependent)                               |
| memory            | relative at the final step (peak); slowdown slope (a leak: growth per step above golden's) |

Why a pooled check on every learning-curve role (reward, eval, length, entropy): on a noisy trainer a per-step
check's threshold is the largest seed deviation x 1.5, so it fires only on a change larger than the seeds'
worst step; a change that moves the whole curve a little (a learning rate / 10) stays under it at every step
while the pooled mean of the per-step deviations, in units of the calibrated noise, sees it at all of them
(:mod:`autotest.scopes.pooled`). The per-step checks stay beside it for what a mean dilutes (a spike, a
broken initialisation, the last point); calibration marks one that cannot fire (its minimum detectable effect
exceeds the metric's whole range) and keeps it as reference only (:mod:`autotest.calibration.usefulness`).
Why by window: a change that acts late (a grader bug that bites once the model answers right, a loss that only
matters once the rewards spread) moves a third of the run; pooled over the whole run its mean is a third of its
size, and the whole-run gate's MDE says nothing about it. So the pooled gates of these roles come per window, the
early, middle and late thirds of the metric's logged steps (:func:`thirds`, the embedded cases' ``[1, 15]``,
``[16, 30]``, ``[31, 45]``), each with its own MDE; the headline reward keeps the whole-run gate beside them for a
change at every step (a learning rate halved), which it sees with about 1/sqrt(3) of a window's MDE. A log with
fewer than :data:`MIN_WINDOW_STEPS` x 3 steps of the metric gets the one whole-run gate instead.
Mismatch, KL, time and memory keep their level checks: a bug moves them far past their seed noise. Mismatch gets a
per-step bound as well (``scope: breaches``, the form of xtuner's own ``method: value`` check): a fault on every
other step leaves the median at a clean step's level, and only a check of every step sees it.

Other roles (loss, grad_norm, learning_rate, policy_kl, throughput) and metrics with no role are
listed, not gated: add checks by hand if they matter. The memory role's checked metric is its peak one where the log
has one (``peak`` or ``max`` in the name: ``memory/peak_rss_mb``, xtuner's ``memory/max_memory_GB``, verl's
``perf/max_memory_allocated_gb``): its final value is the run's peak, and a leak makes it grow step by step too. A metric constant over the run (a KL of 0 with
``beta: 0``) gets no check: its noise is 0 and calibration could not set a threshold from it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from pathlib import Path
from types import MappingProxyType
from typing import Mapping, Sequence

from autotest.inputs.baseline_model import Baseline, CalibrationSpec, CheckSpec, StepPolicy
from autotest.inputs.roles import PRESETS, base_role, resolve_roles
from autotest.judge.trace import Trace
from autotest.scopes import scope_kind

#: one proposed check: (method, scope fields, severity); ``"windows": True`` stands for one pooled gate per third
_P80 = {"scope": "percentile", "percentile": 80.0}
_POOLED = ("absolute", {"scope": "pooled"}, "gate")
_WINDOWS = ("absolute", {"scope": "pooled", "windows": True}, "gate")
CHECKS_BY_ROLE: Mapping[str, tuple[tuple[str, dict, str], ...]] = MappingProxyType({
    "reward": (("absolute", _P80, "gate"), _WINDOWS, _POOLED),
    "eval": (("absolute", {"scope": "final"}, "gate"), _WINDOWS),
    "response_length": (("relative", _P80, "gate"), _WINDOWS),
    "entropy": (("absolute", {"scope": "points"}, "gate"), _WINDOWS),
    "mismatch": (("absolute", {"scope": "percentile", "percentile": 50.0}, "gate"),
                 ("value", {"scope": "breaches"}, "gate")),
    "distill_kl": (("absolute", _P80, "gate"), _POOLED),
    "ref_kl": (("absolute", _P80, "reference"),),
    "step_time": (("slowdown", {"scope": "percentile", "percentile": 50.0}, "reference"),),
    "memory": (("relative", {"scope": "final"}, "gate"), ("slowdown", {"scope": "slope"}, "gate")),
})
#: words of a name's last part that mark a role's headline metric among several, best first
#: (``response/rewards/mean`` over ``.../max``, ``time/step`` over ``time/generate``)
_HEADLINE_WORDS = ("mean", "step", "reward", "acc", "score")
#: a role whose headline is chosen by other words (memory: the peak, which a leak raises and a final check bounds)
_ROLE_HEADLINE_WORDS: Mapping[str, tuple[str, ...]] = MappingProxyType({
    "memory": ("peak", "max_memory_allocated", "max"),
})
PRODUCED_BY_INIT = "rl-autotest init"
#: the fewest logged steps of a window; a metric logged at fewer than three times this gets one whole-run gate
MIN_WINDOW_STEPS = 3


@dataclass(frozen=True)
class MetricRow:
    """One logged metric: its role and what init does with it."""

    metric: str
    role: str | None
    #: the check ids proposed on it ("" when none)
    checks: tuple[str, ...]
    #: why it has no check (another metric is the role's headline, constant, no gate for the role, no role)
    note: str = ""


@dataclass(frozen=True)
class Proposal:
    preset: str | None
    #: how the roles were found, one line (the RoleMap's description)
    roles_line: str
    rows: tuple[MetricRow, ...]
    checks: tuple[CheckSpec, ...]
    expected_steps: int

    @property
    def gates(self) -> tuple[CheckSpec, ...]:
        return tuple(c for c in self.checks if c.severity == "gate")


def _rule_index(preset: str | None, metric: str) -> int:
    if preset is None:
        return 0
    from fnmatch import fnmatchcase

    return next((i for i, (glob, _) in enumerate(PRESETS[preset].rules) if fnmatchcase(metric, glob)), 10_000)


def _headline_key(preset: str | None, metric: str, role: str = "") -> tuple:
    last = metric.lower().rsplit("/", 1)[-1]
    words = _ROLE_HEADLINE_WORDS.get(base_role(role), _HEADLINE_WORDS) if role else _HEADLINE_WORDS
    word = next((i for i, w in enumerate(words) if w in last), len(words))
    return (_rule_index(preset, metric), word, len(metric), metric)


def _constant(series: Mapping[int, float]) -> bool:
    values = [v for v in series.values() if math.isfinite(v)]
    return not values or max(values) == min(values)


def thirds(steps: Sequence[int]) -> tuple[tuple[int, int], ...]:
    """The early, middle and late windows ``(first, last)`` of ``steps`` (logged steps, any order): three runs of
    consecutive steps as equal in count as they can be; () when a window would hold
    fewer than :data:`MIN_WINDOW_STEPS` steps."""
    ordered = sorted(set(steps))
    if len(ordered) < 3 * MIN_WINDOW_STEPS:
        return ()
    cuts = [round(len(ordered) * k / 3) for k in range(4)]
    return tuple((ordered[cuts[k]], ordered[cuts[k + 1] - 1]) for k in range(3))


def _checks(metric: str, method: str, fields: dict, severity: str, trace: Trace, role: str
            ) -> tuple[CheckSpec, ...]:
    scope = fields["scope"]
    why = {"gate": "", "reference": " (reference only: it informs and never fails the run)"}[severity]
    series = trace.get(metric) or {}
    made = dict(metric=metric, method=method, operator="<", threshold=math.nan, scope=scope, severity=severity,
                percentile=fields.get("percentile"), placeholder=True, **scope_kind(scope).proposed_fields(series))
    derivation = (f"proposed by {PRODUCED_BY_INIT} for role {role}{why}; placeholder until rl-autotest calibrate "
                  "measures the run-to-run noise")
    if not fields.get("windows"):
        return (CheckSpec(**made, derivation=derivation),)
    windows = thirds(list(series))
    if not windows:  # too few steps for three windows: one gate over the whole run
        return (CheckSpec(**made, derivation=derivation),)
    names = ("early", "middle", "late")
    return tuple(CheckSpec(**made, window=window, derivation=f"{derivation}; the {name} third of the run, so a "
                           "change acting there is not diluted by the rest")
                 for name, window in zip(names, windows))


def propose(trace: Trace, preset: str | None = None) -> Proposal:
    """Roles for every metric of ``trace`` and placeholder checks for each gated role's headline metric."""
    metrics = [m for m in trace.metrics if trace.get(m)]
    roles = resolve_roles(metrics, preset=preset)
    by_role: dict[str, list[str]] = {}
    for metric in metrics:
        role = roles.role_of(metric)
        if role is not None and base_role(role) in CHECKS_BY_ROLE and not _constant(trace.get(metric) or {}):
            by_role.setdefault(role, []).append(metric)
    headline = {role: min(names, key=lambda m, r=role: _headline_key(roles.preset, m, r))
                for role, names in by_role.items()}
    checks: list[CheckSpec] = []
    rows: list[MetricRow] = []
    for metric in metrics:
        role = roles.role_of(metric)
        made: tuple[CheckSpec, ...] = ()
        note = ""
        if role is None:
            note = "no role (not gated; declare one under roles: to use it)"
        elif base_role(role) not in CHECKS_BY_ROLE:
            note = f"not gated by default (role {role}); add a check by hand if it matters"
        elif _constant(trace.get(metric) or {}):
            note = "constant in this run: no noise to calibrate a threshold from"
        elif headline[role] != metric:
            note = f"{headline[role]} is this role's checked metric"
        else:
            by_id: dict[str, CheckSpec] = {}
            for method, fields, severity in CHECKS_BY_ROLE[base_role(role)]:
                for check in _checks(metric, method, fields, severity, trace, role):
                    # a log too short for windows gets the whole-run gate in their place: once, beside the reward's
                    by_id.setdefault(check.check_id, check)
            made = tuple(by_id.values())
        checks.extend(made)
        rows.append(MetricRow(metric, role, tuple(c.check_id for c in made), note))
    steps = trace.last_train_step or max(trace.eval_steps, default=0)
    return Proposal(roles.preset, roles.describe(), tuple(rows), tuple(checks), steps)


def baseline_spec(name: str, path: Path, proposal: Proposal, provenance: Mapping[str, object],
                  runs: int = 3) -> Baseline:
    """The baseline ``init`` writes: no golden values yet, placeholder thresholds, the runs to calibrate from."""
    return Baseline(
        name=name, path=path, checks=proposal.checks, golden_table=MappingProxyType({}),
        steps=StepPolicy(expected=proposal.expected_steps, exact=True),
        provenance=MappingProxyType(dict(provenance)),
        description=f"Checks {PRODUCED_BY_INIT} proposed per metric role from one run; a threshold written "
                    "'placeholder' is not measured yet (rl-autotest calibrate measures it).",
        calibration=CalibrationSpec(runs=runs), preset=proposal.preset)


def with_spec_checks(proposal: Proposal, checks: tuple[CheckSpec, ...], where: str) -> Proposal:
    """``proposal`` with the framework's own spec's ``checks`` (read at ``where``, ``file@sha``) in place of what init
    proposed for their metrics: their thresholds are the spec's, not placeholders (``rl-autotest init
    --framework-spec``)."""
    named = {c.metric for c in checks}
    ids = {m: tuple(c.check_id for c in checks if c.metric == m) for m in named}
    rows = [replace(r, checks=ids[r.metric], note="") if r.metric in named else r for r in proposal.rows]
    logged = {r.metric for r in proposal.rows}
    rows += [MetricRow(m, None, ids[m], f"checked by the framework's spec {where}; not in this log")
             for m in dict.fromkeys(c.metric for c in checks) if m not in logged]
    kept = tuple(c for c in proposal.checks if c.metric not in named)
    return replace(proposal, rows=tuple(rows), checks=(*checks, *kept))
