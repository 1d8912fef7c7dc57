"""What the triage rules read and test: the evidence of a verdict (:class:`Evidence`) and the conditions a rule of
:data:`autotest.judge.triage.RULES` is made of (each returns why it fits, or None)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

from autotest.inputs.roles import RoleMap
from autotest.judge.evidence import ACCURACY_GROUPS, OTHER, TRAINING_GROUPS, RoleEvidence, is_non_finite
from autotest.judge.metric_names import CHECK_ID as NAMES_CHECK_ID
from autotest.judge.model import ERROR, FAIL, CheckResult, Measured
from autotest.judge.resume import is_resume_result
from autotest.judge.resume_causes import LOGGING as RESUME_LOGGING
from autotest.judge.teacher_evidence import TEACHERS
from autotest.judge.units_evidence import UNITS
from autotest.scopes import find


@dataclass(frozen=True)
class Evidence:
    """What the rules read: the per-role rows plus the run-level facts."""

    rows: tuple[RoleEvidence, ...]
    results: tuple[CheckResult, ...]
    roles: RoleMap
    firsts: frozenset[int]
    #: readings taken for hypotheses beyond the role rows (autotest.judge.readings.hypothesis_evidence)
    measured: tuple[Measured, ...] = ()

    def reading(self, hypothesis: str) -> Measured | None:
        return next((m for m in self.measured if m.hypothesis == hypothesis), None)

    def group_of(self, result: CheckResult) -> str:
        return self.roles.group_of(result.metric) or OTHER

    def group(self, *groups: str) -> list[RoleEvidence]:
        return [e for e in self.rows if e.group in groups]

    def failed(self, *groups: str) -> list[CheckResult]:
        """Failed gate metric checks (finite values) of ``groups``, earliest breach first."""
        return sorted((r for r in self.results if r.is_gate and r.kind == "metric" and r.status == FAIL
                       and not is_non_finite(r) and self.group_of(r) in groups),
                      key=lambda r: r.first_breach_step if r.first_breach_step is not None else math.inf)


def locates(r: CheckResult) -> bool:
    """Whether ``r``'s first breach step is a step that breached on its own: a structural check's, or one of a
    kind that locates (``Scope.locates``). Pooled and window checks gate a mean over a window, so their crossing
    step does not say the breach began there (a single noisy point can cross first)."""
    kind = find(r.scope)
    return r.scope is None or (kind is not None and kind.locates)


def located_at(r: CheckResult, steps: frozenset[int]) -> bool:
    """Whether ``r`` breached at one of ``steps`` by a check that locates breaches per step."""
    return locates(r) and r.first_breach_step in steps


#: a condition returns the evidence it found (one phrase) when it holds, None when it does not
Condition = Callable[[Evidence], "str | None"]


def _step(r: CheckResult) -> str:
    return f"step {r.first_breach_step}" if r.first_breach_step is not None else "an unknown step"


def breached(*groups: str) -> Condition:
    def test(ev: Evidence) -> str | None:
        failed = ev.failed(*groups)
        return f"{failed[0].metric} breached from {_step(failed[0])} ({failed[0].message})" if failed else None
    return test


def not_breached(*groups: str) -> Condition:
    def test(ev: Evidence) -> str | None:
        return None if ev.failed(*groups) else f"no {'/'.join(groups)} breach"
    return test


def only_breached(*groups: str) -> Condition:
    """Some accuracy breach, all of them in ``groups``."""
    def test(ev: Evidence) -> str | None:
        failed = ev.failed(*ACCURACY_GROUPS)
        if failed and all(ev.group_of(r) in groups for r in failed):
            return f"{failed[0].message} (only {'/'.join(groups)} breached)"
        return None
    return test


def in_bounds(*groups: str, at_least_one: bool = True) -> Condition:
    """Every checked role of ``groups`` within bounds at every step (and at least one checked)."""
    def test(ev: Evidence) -> str | None:
        rows = ev.group(*groups)
        if any(e.breached or e.undecided for e in rows) or (at_least_one and not any(e.in_bounds for e in rows)):
            return None
        return "; ".join(e.describe() for e in rows) or f"no {'/'.join(groups)} role checked"
    return test


#: a gate statistic at this share of its threshold or more has moved beyond ordinary seed noise
MOVED_SHARE = 0.5


def role_moved(role: str) -> Condition:
    """A gate of ``role`` breached, or its statistic reached ``MOVED_SHARE`` of its threshold (the numbers shown)."""
    def test(ev: Evidence) -> str | None:
        moved = []
        for r in ev.results:
            if (r.kind == "metric" and r.is_gate and r.metric and ev.roles.role_of(r.metric) == role
                    and r.observed is not None and r.threshold and math.isfinite(r.observed)
                    and (r.status == FAIL or abs(r.observed) >= MOVED_SHARE * abs(r.threshold))):
                moved.append(f"{r.check_id} at {r.observed:+.3g} against threshold {r.threshold:g}"
                             f" ({abs(r.observed) / abs(r.threshold):.0%} of it)")
        return f"{role} of the sampled tokens moved: {'; '.join(moved)}" if moved else None
    return test


def _mean_shift(r: CheckResult) -> float | None:
    """Mean of current - golden over the check's points (None without finite points)."""
    diffs = [p.current - p.baseline for p in r.points if p.current is not None and p.baseline is not None
             and math.isfinite(p.current) and math.isfinite(p.baseline)]
    return sum(diffs) / len(diffs) if diffs else None


def better_yet_less_certain(ev: Evidence) -> str | None:
    """Rewards/eval breached above the golden while the entropy breached above it too, nothing else breaching.

    A policy that scores better while it is less certain of its own samples is not what an update does (learning
    sharpens the policy); a sampler that draws from a narrower distribution than the one it reports (top-p, top-k,
    a lower temperature) does exactly that: the tail it never draws is never pushed down."""
    failed = ev.failed(*ACCURACY_GROUPS)
    roles = {r.metric: ev.roles.role_of(r.metric) for r in failed if r.metric}
    if not failed or set(roles.values()) - {"reward", "eval", "entropy"}:
        return None
    shifts = {r.metric: _mean_shift(r) for r in failed}
    scored = [m for m, role in roles.items() if role in ("reward", "eval")]
    entropy = [m for m, role in roles.items() if role == "entropy"]
    if not scored or not entropy or any(shifts[m] is None or shifts[m] <= 0 for m in scored + entropy):
        return None
    shown = ", ".join(f"{m} {shifts[m]:+.3g}" for m in scored)
    return (f"scores rose above the golden ({shown}, mean over the checked points) while {entropy[0]} rose too "
            f"({shifts[entropy[0]]:+.3g}): the policy scores better while less certain of its own samples")


def measured_holds(hypothesis: str) -> Condition:
    """The reading taken for ``hypothesis`` holds (its numbers are the evidence)."""
    def test(ev: Evidence) -> str | None:
        found = ev.reading(hypothesis)
        return found.finding if found is not None and found.holds else None
    return test


def reading_lists(hypothesis: str, key: str, item: str) -> Condition:
    """The reading taken for ``hypothesis`` holds and lists ``item`` in its comma-separated ``key``."""
    def test(ev: Evidence) -> str | None:
        found = ev.reading(hypothesis)
        if found is None or not found.holds or item not in found.values.get(key, "").split(","):
            return None
        return found.finding
    return test


def reading_lacks(hypothesis: str, key: str, value: str, why: str) -> Condition:
    """No reading was taken for ``hypothesis``, or its ``key`` is not ``value`` (``why`` is the evidence text)."""
    def test(ev: Evidence) -> str | None:
        found = ev.reading(hypothesis)
        return None if found is not None and found.values.get(key) == value else why
    return test


def reading_says(hypothesis: str, key: str, value: str) -> Condition:
    """The reading taken for ``hypothesis`` holds and its ``key`` is ``value``."""
    def test(ev: Evidence) -> str | None:
        found = ev.reading(hypothesis)
        return (f"{hypothesis}: {key} {value}" if found is not None and found.holds
                and found.values.get(key) == value else None)
    return test


def non_finite(ev: Evidence) -> str | None:
    bad = sorted((r for r in ev.results if r.is_gate and r.status == FAIL and is_non_finite(r)),
                 key=lambda r: r.first_breach_step if r.first_breach_step is not None else math.inf)
    return bad[0].message if bad else None


def unnamed_metrics(ev: Evidence) -> str | None:
    bad = [r for r in ev.results if r.check_id == NAMES_CHECK_ID and r.status == ERROR]
    return bad[0].message if bad else None


def incomplete(ev: Evidence) -> str | None:
    # the resumed run of a resume phase has a rule of its own (``resume``): the main run itself completed
    bad = [r for r in ev.results if r.kind == "structural" and r.status == ERROR and r.check_id != NAMES_CHECK_ID
           and not is_resume_result(r)]
    return bad[0].message if bad else None


def resume_logged(ev: Evidence) -> str | None:
    """Every failed resume check is how one metric is logged (it alone differs, the training bitwise continued)."""
    failed = [r for r in ev.results if is_resume_result(r) and r.is_gate and r.status == FAIL]
    if failed and all(r.parameters.get("resume_cause") == RESUME_LOGGING for r in failed):
        return f"{failed[0].check_id}: {failed[0].message}"
    return None


def resume_broken(ev: Evidence) -> str | None:
    """A resume check failed (the resumed run did not continue) or could not decide (it did not complete); not one
    whose cause is how a metric is logged (``resume_logged``)."""
    bad = [r for r in ev.results if is_resume_result(r) and r.is_gate and r.status in (FAIL, ERROR)
           and r.parameters.get("resume_cause") != RESUME_LOGGING]
    failed = sorted((r for r in bad if r.status == FAIL),
                    key=lambda r: r.first_breach_step if r.first_breach_step is not None else math.inf)
    if failed:
        more = f" (and {len(failed) - 1} more resume check{'s' * (len(failed) > 2)})" if len(failed) > 1 else ""
        return f"{failed[0].check_id}: {failed[0].message}{more}"
    return f"{bad[0].check_id}: {bad[0].message}" if bad else None


def what_did_not_continue(ev: Evidence) -> tuple[str, str] | None:
    """(for the suggestion, for the evidence): the state the resume checks say did not continue."""
    for r in ev.results:
        if is_resume_result(r) and r.status == FAIL and r.parameters.get("not_continued"):
            what = r.parameters["not_continued"]
            if r.parameters.get("resume_cause") == RESUME_LOGGING:
                return f"what differs: {what}", f"differs: {what}"
            return f"what did not continue: {what}", f"not continued: {what}"
    if any(is_resume_result(r) and r.status == ERROR for r in ev.results):
        return ("the resumed run did not complete: read its logs (resume/logs/ in the results folder) first",
                "the resumed run did not complete")
    return None


def at_first_point_only(group: str) -> Condition:
    """``group`` breached at the run's first point while no other role (teachers aside) breached there."""
    def test(ev: Evidence) -> str | None:
        early = [r for r in ev.failed(*ACCURACY_GROUPS) if located_at(r, ev.firsts) and ev.group_of(r) != "teacher"]
        if early and all(ev.group_of(r) == group for r in early):
            return (f"{early[0].metric} breached at step {early[0].first_breach_step}, the run's first point, with "
                    "every other checked metric within threshold there")
        return None
    return test


def early_breach(*groups: str) -> Condition:
    """A role of ``groups`` breached at the first training step or first eval point."""
    def test(ev: Evidence) -> str | None:
        early = [r for r in ev.failed(*groups) if located_at(r, ev.firsts)]
        return f"{early[0].metric} breached at step {early[0].first_breach_step}, the run's first point" \
            if early else None
    return test


def starts_later(ev: Evidence) -> str | None:
    failed = ev.failed(*ACCURACY_GROUPS)
    if failed and not any(located_at(r, ev.firsts) for r in failed if ev.group_of(r) != "teacher"):
        located = [r for r in failed if locates(r)]
        if located:
            return f"{located[0].metric} first breached at {_step(located[0])}, after the start"
        return f"{failed[0].metric} breached over a window ({failed[0].check_id}), at no located first step"
    return None


def training_moved_or_unchecked(ev: Evidence) -> str | None:
    """A training role breached, or no training role is checked (eval alone cannot tell the path)."""
    failed = ev.failed(*TRAINING_GROUPS)
    if failed:
        return f"training moved too ({failed[0].metric} from {_step(failed[0])})"
    return None if any(e.in_bounds for e in ev.group(*TRAINING_GROUPS)) else "no training role is checked"


def teacher_first(ev: Evidence) -> str | None:
    teacher, rewards = ev.failed("teacher"), ev.failed("reward")
    checked = ev.group("reward")
    if not teacher or not checked:
        return None
    bound = next((r for r in teacher if r.method == "value"), None)
    # a teacher answering otherwise than its own checkpoint: the teacher path, whatever came first
    if bound is not None:
        return f"a teacher bound breached ({bound.metric})"
    # per teacher, step by step (.teacher_evidence): a teacher pointing at itself is the teacher path; the scores
    # falling with the KL is the student's update; neither leaves it to which breached first
    reading = ev.reading(TEACHERS)
    if reading is not None and reading.holds:
        return reading.finding
    if reading is not None and reading.values.get("student") == "yes":
        return None
    first = teacher[0].first_breach_step if teacher[0].first_breach_step is not None else math.inf
    if not rewards:
        return "rewards within threshold"
    later = rewards[0].first_breach_step if rewards[0].first_breach_step is not None else math.inf
    return f"rewards breached later, from step {later:g}" if first < later else None


def no_accuracy_breach(ev: Evidence) -> str | None:
    return None if ev.failed(*ACCURACY_GROUPS, "consistency") else "no accuracy or mismatch gate breached"


def accuracy_breach(ev: Evidence) -> str | None:
    failed = ev.failed(*ACCURACY_GROUPS, "consistency")
    return f"accuracy breached as well ({failed[0].metric})" if failed else None


#: a training gate this close to its threshold (observed / threshold) makes "eval path only" uncertain;
#: it adds a caveat, never changes the rule (a clean seed's closest gate can reach 0.9 by chance)
EVAL_PATH_TRAINING_MARGIN = 0.7


def eval_path_caveat(ev: Evidence) -> tuple[str, str] | None:
    """(for the suggestion, for the evidence) when a training gate came close to its threshold."""
    ratios = [(r.observed / r.threshold, r.check_id) for r in ev.results
              if r.is_gate and r.kind == "metric" and ev.group_of(r) in TRAINING_GROUPS
              and r.operator in ("<", "<=") and r.threshold and r.threshold > 0 and r.method != "value"
              and r.observed is not None and math.isfinite(r.observed)]
    if ratios and max(ratios)[0] >= EVAL_PATH_TRAINING_MARGIN:
        # a sampled eval can be the most sensitive gate: a training change it sees first looks the same
        ratio, check = max(ratios)
        return ("training moved too (see evidence), so a training change that the eval sees first is also "
                "possible: read the training diff as well", f"the closest {check} at {ratio:.2f} of its threshold")
    return None


def teacher_bound_caveat(ev: Evidence) -> tuple[str, str] | None:
    """(for the suggestion, for the evidence) when a bound on a teacher metric failed: a probe of a teacher's answers
    against its own checkpoint (e.g. ``distillation/teacher_probe/<teacher>``) names the teacher to start with."""
    bounds = [r for r in ev.failed("teacher") if r.method == "value"]
    if not bounds:
        return None
    named = ", ".join(f"{r.metric} from step {r.first_breach_step}" for r in bounds)
    return (f"start with the teacher a failed bound names ({named}): that server answers otherwise than its checkpoint "
            "(its weights, scoring, temperature or tokenisation)", f"teacher bound breached: {named}")


def unscored_metric(ev: Evidence) -> str | None:
    """The units reading's metric is not a score (reward, eval): a judger or grader scales those as well."""
    reading = ev.reading(UNITS)
    metric = reading.values.get("metric") if reading is not None else None
    group = ev.roles.group_of(metric) if metric else None
    if metric is None or group in ("reward", "eval"):
        return None
    return f"{metric} is not a score (a {group or OTHER} metric)"


UNITS_SUGGESTION = ("logging / units: {metric} is {relation} at every step while {others}; check how it is "
                    "computed or logged (units, the reduction, a scale in the logger), not the training")
UNITS_RANK_REASON = ("one metric a constant factor from the golden at every step, nothing else moved: what the policy "
                     "does did not change")
