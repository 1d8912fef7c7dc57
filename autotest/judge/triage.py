"""Turn the evidence of a run, per metric role, into ranked suggested next steps.

The rules are data: :data:`RULES` is a table, tried in order; a rule fits when every one of its
conditions holds over the whole run's evidence (:mod:`autotest.judge.evidence`: per role, which gate
checks stayed within bounds at every step and which breached, from which step). Every rule that fits is
shown, ranked by its place in the table, with the evidence each condition found; the first is primary.
Rules read roles (reward, eval, mismatch, step_time, ...; :mod:`autotest.inputs.roles`), never one
framework's metric names.

| rank | rule | fits when (every condition) |
|---|---|---|
| 1 | ``mismatch`` | a train–inference mismatch gate breached (finite values) |
| 2 | ``non-finite`` | a gate's value became NaN/inf |
| 3 | ``metric-names`` | the log lacks checked metrics of the baseline (``metrics[names]`` ERROR) |
| 4 | ``run-shape`` | the step count differs from the case's while the run exited 0 of its own accord, its log ends on a whole row and every gate passes again over the steps both runs did (``run shape`` reading) |
| 5 | ``run-incomplete`` | the run ended early (a structural check could not decide); not shown when ``run-shape`` fits |
| 6 | ``logging-units`` | one metric breached, not a score (reward, eval) nor a teacher's KL, every other gate passed, and that metric divided by a constant factor (or less a constant offset) passes its own gates: the golden times a factor at every step (``logging/units`` reading, five common steps or more) |
| 7 | ``eval-path`` | only eval breached; every checked training role within bounds at every step |
| 8 | ``rewards-only`` | only reward breached; eval, rollout (length, entropy), training dynamics and teachers within bounds at every step (one of them checked) |
| 9 | ``rewards-only`` | reward breached at the run's first point; no other role breached there (the first-point form) |
| 10 | ``logging-units`` | the ``logging/units`` reading holds for a score (reward, eval): a judger or grader scale fits as well, so it ranks below their rules |
| 11 | ``first-step`` | a non-reward, non-teacher role breached at the first training step or first eval point |
| 12 | ``teacher-path`` | distillation KL breached; rewards checked, and within bounds or breached later |
| 13 | ``sampling-changed`` | an accuracy breach; the mismatch role checked and within bounds; length and entropy within bounds, the entropy at half its threshold or more |
| 14 | ``sampling-changed`` | the mismatch role within bounds; the breaches begin after the start; only reward, eval and entropy breached, all above the golden (scores rose while the entropy rose: a sampler narrower than what it reports) |
| 15 | ``gradual`` | every accuracy breach begins after the start, and a training role breached (or none is checked) |
| 16 | ``resume`` | a resume check failed or could not decide (``resume[...]``: the run resumed from its checkpoint did not continue the uninterrupted one); primary when the main run's own gates pass |
| 17 | ``performance-only`` | only step-time / throughput roles breached |
| 18 | ``performance`` | step time breached as well as accuracy: a separate performance finding |
| 19 | ``memory`` | a memory gate breached (growth per step or peak); beside any accuracy finding, never instead |

A rule fits at most once (the first of its rows that fits); ``gradual`` is not shown when
``teacher-path`` fits (the same breach, explained more narrowly). When the primary and the runner-up are a pair the
evidence cannot tell apart (:data:`TIES`: a reward or an eval a constant factor off is the judger or grader as much as
the logger), the next-step line names both, ranked, with the check that tells them apart
(``TriageFinding.uncertain_with``, ``to_tell``). A time-role metric is never read as an
accuracy breach, and neither is a memory-role metric (``memory``: its own rule, never accuracy evidence). Where a
breach begins (rows 9, 11, 13, 14, 15) is read from checks that locate breaches per step
(stepwise, points, percentile, final): a pooled or window check gates a mean over its window, and the step
where one noisy point first crosses its bound is not where the change began.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Callable, Iterable

from autotest.inputs.roles import RoleMap, resolve_roles
from autotest.judge.evidence import ACCURACY_GROUPS, OTHER, SHAPE, TRAINING_GROUPS, UNITS, RoleEvidence, first_points, \
    is_non_finite, role_evidence
from autotest.judge.metric_names import CHECK_ID as NAMES_CHECK_ID
from autotest.judge.model import ERROR, FAIL, CheckResult, Measured, TriageFinding
from autotest.judge.resume import is_resume_result
from autotest.judge.trace import Trace
from autotest.scopes import find


@dataclass(frozen=True)
class Evidence:
    """What the rules read: the per-role rows plus the run-level facts."""

    rows: tuple[RoleEvidence, ...]
    results: tuple[CheckResult, ...]
    roles: RoleMap
    firsts: frozenset[int]
    #: readings taken for hypotheses beyond the role rows (autotest.judge.evidence.hypothesis_evidence)
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


def resume_broken(ev: Evidence) -> str | None:
    """A resume check failed (the resumed run did not continue) or could not decide (it did not complete)."""
    bad = [r for r in ev.results if is_resume_result(r) and r.is_gate and r.status in (FAIL, ERROR)]
    failed = sorted((r for r in bad if r.status == FAIL),
                    key=lambda r: r.first_breach_step if r.first_breach_step is not None else math.inf)
    if failed:
        more = f" (and {len(failed) - 1} more resume check{'s' * (len(failed) > 2)})" if len(failed) > 1 else ""
        return f"{failed[0].check_id}: {failed[0].message}{more}"
    return f"{bad[0].check_id}: {bad[0].message}" if bad else None


def _what_did_not_continue(ev: Evidence) -> tuple[str, str] | None:
    """(for the suggestion, for the evidence): the state the resume checks say did not continue."""
    for r in ev.results:
        if is_resume_result(r) and r.status == FAIL and r.parameters.get("not_continued"):
            what = r.parameters["not_continued"]
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


def _eval_path_caveat(ev: Evidence) -> tuple[str, str] | None:
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


def unscored_metric(ev: Evidence) -> str | None:
    """The units reading's metric is not a score (reward, eval): a judger or grader scales those as well."""
    reading = ev.reading(UNITS)
    metric = reading.values.get("metric") if reading is not None else None
    group = ev.roles.group_of(metric) if metric else None
    if metric is None or group in ("reward", "eval"):
        return None
    return f"{metric} is not a score (a {group or OTHER} metric)"


UNITS_SUGGESTION = ("logging / units: {metric} is {relation} at every step while nothing else moved; check how it is "
                    "computed or logged (units, the reduction, a scale in the logger), not the training")
UNITS_RANK_REASON = ("one metric a constant factor from the golden at every step, nothing else moved: what the policy "
                     "does did not change")

#: (primary, runner-up) rules the evidence cannot tell apart when both fit, and the check that tells them apart:
#: the next-step line names both, ranked, never one of them alone
TIES: dict[tuple[str, str], str] = {
    ("rewards-only", "logging-units"):
        "to tell: score a few logged responses again with the reward function; the logged scores scaled by the "
        "factor is the logger, other scores is the judger",
    ("eval-path", "logging-units"):
        "to tell: grade one saved eval batch again and count it by hand; the logged accuracy scaled by the factor "
        "is the logger, another accuracy is the eval path",
}


def _with_ties(findings: list[TriageFinding]) -> list[TriageFinding]:
    """When the primary and the runner-up are a pair of :data:`TIES`, the primary's line names both, ranked."""
    if len(findings) < 2 or (findings[0].rule, findings[1].rule) not in TIES:
        return findings
    first, second = findings[0], findings[1]
    to_tell = TIES[(first.rule, second.rule)]
    line = (f"{first.rule} or {second.rule} (the evidence does not tell them apart): {first.suggestion}; or "
            f"{second.suggestion}; {to_tell}")
    return [replace(first, suggestion=line, uncertain_with=second.rule, to_tell=to_tell),
            replace(second, why_ranked=f"as likely as {first.rule} on this evidence ({to_tell})"), *findings[2:]]


@dataclass(frozen=True)
class Rule:
    """One row of the triage table: the rule fits when every condition holds."""

    name: str
    conditions: tuple[Condition, ...]
    suggestion: str
    #: why a rule ranked here yields to those above it (shown when it is not the primary finding)
    rank_reason: str = ""
    #: rules that, when they fit, already explain what this one would
    unless: tuple[str, ...] = ()
    #: an extra sentence for the suggestion, from the evidence (e.g. the eval path's near-threshold caveat)
    caveat: Callable[[Evidence], "tuple[str, str] | None"] | None = None
    #: the hypothesis whose reading's values fill the suggestion's ``{placeholders}``
    fills: str = ""


RULES: tuple[Rule, ...] = (
    Rule("mismatch", (breached("consistency"),),
         "train/inference inconsistency: check the log-prob path, weight update/sync and the rollout backend "
         "first; a consistency dump job is requested"),
    Rule("non-finite", (non_finite,),
         "numerical divergence: a metric became NaN/inf (loss, learning rate, overflow); read the run's logs "
         "around that step", "a mismatch gate with finite values is the more specific evidence"),
    Rule("metric-names", (unnamed_metrics,),
         "the log does not name the baseline's metrics: map its names with metric_aliases, or pass this case's own "
         "log", "a log that names none of the checked metrics decides nothing the rules below could read"),
    Rule("run-shape", (measured_holds(SHAPE),),
         "run shape changed: the run ended cleanly after {steps} steps, the case expects {expected} (a step-count / "
         "schedule / config change: epochs, dataset or batch size, the training loop's range), not a crash; compare "
         "its step and schedule settings with the golden run's",
         "a run that ended cleanly on a whole row explains the missing steps before any breach", fills=SHAPE),
    Rule("run-incomplete", (incomplete,),
         "the run did not complete (crash, hang, timeout or a truncated log): read the run's logs before judging "
         "accuracy", "the breaches above were measured on the steps the run did reach", unless=("run-shape",)),
    Rule("logging-units", (measured_holds(UNITS), unscored_metric),
         UNITS_SUGGESTION, UNITS_RANK_REASON, fills=UNITS),
    Rule("eval-path", (only_breached("eval"), in_bounds(*TRAINING_GROUPS), not_breached("consistency")),
         "only eval breached while every training metric is within bounds: check the eval path (eval engine and "
         "the weight refresh before eval, eval config, eval data, grading)", caveat=_eval_path_caveat),
    Rule("rewards-only", (only_breached("reward"), in_bounds("eval", "rollout", "dynamics", "teacher", "other")),
         "rewards moved while eval, response length, entropy and the training dynamics stayed within bounds at "
         "every step: the same kind of responses are scored differently; check the rollout/judger (reward "
         "function, answer parsing, reward scaling)",
         "a judge change moves rewards without moving what the policy does; the whole run shows exactly that"),
    Rule("rewards-only", (at_first_point_only("reward"),),
         "rewards differ from the first step while nothing else does: the same responses are scored differently; "
         "check the rollout/judger (reward function, answer parsing)",
         "same initial policy, different scores at the first point"),
    # a reward or eval a constant factor off is a scale in the judger or grader as much as in the logger
    Rule("logging-units", (measured_holds(UNITS),), UNITS_SUGGESTION, UNITS_RANK_REASON, fills=UNITS),
    Rule("first-step", (early_breach("eval", "rollout", "dynamics", "other"),),
         "drift at the first step / first eval points to initialisation or config (weight mapping, seed, data "
         "order), not the training loop", "the policy already differed before any update"),
    Rule("teacher-path", (breached("teacher"), teacher_first),
         "distillation KL breached with healthy rewards (or before them): check the teacher path (teacher "
         "endpoints, routing of samples to teachers, sampled tokens, distillation loss)",
         "the teacher path moves KL at once; rewards follow only through the update"),
    Rule("sampling-changed", (accuracy_breach, in_bounds("consistency"), in_bounds("rollout"), role_moved("entropy")),
         "rollout sampling changed (the distribution, not the log-probs): the trainer and the rollout agree on "
         "the log-probs while the sampled tokens' entropy moved against the golden; check the sampling settings "
         "(temperature, top-p / top-k, logits processors, stop words) and whether the reported log-probs come "
         "from the distribution that was sampled",
         "a change in what is sampled moves entropy first; the mismatch metrics cannot see it when the rollout "
         "reports unfiltered log-probs"),
    Rule("sampling-changed", (in_bounds("consistency"), starts_later, better_yet_less_certain),
         "rollout sampling changed (the distribution, not the log-probs): rewards and eval rose while the entropy "
         "of the sampled tokens rose too, which no update does; the rollout draws from a narrower distribution "
         "than the one whose log-probs it reports: check top-p / top-k, the sampling temperature and logits "
         "processors, and whether the reported log-probs come from the distribution that was sampled",
         "a sampler that draws from a nucleus leaves the tail it never draws untrained: better scores, higher "
         "entropy, and mismatch metrics that cannot see it"),
    Rule("gradual", (starts_later, training_moved_or_unchecked),
         "gradual divergence points to the training loop (loss, advantage, KL, weight sync)",
         "a breach that grows after the start fits a training-loop change too; the rules above explain the same "
         "breach more narrowly", unless=("teacher-path",)),
    Rule("resume", (resume_broken,),
         "checkpoint resume is broken: a run resumed from its checkpoint did not continue the uninterrupted run; "
         "check what the checkpoint saves and the resume restores (optimizer state, LR scheduler position, RNG "
         "states, step counter, the rollout engine's weights)",
         "the main run's own breaches explain the verdict first; the resume finding is separate",
         caveat=_what_did_not_continue),
    Rule("performance-only", (breached("performance"), no_accuracy_breach),
         "only step time regressed: a performance regression, not accuracy; profile the step"),
    Rule("performance", (breached("performance"), accuracy_breach),
         "step time regressed as well: a separate performance regression (time is never read as accuracy); "
         "profile the step", "performance is reported beside the accuracy finding, never instead of it"),
    Rule("memory", (breached("memory"),),
         "memory regression: a leak (growth per step) or a larger peak; look for references kept across steps "
         "(tensors appended to a list, caches keyed by step, graphs kept alive by logged tensors) and for larger "
         "buffers; memory is never read as accuracy",
         "memory is reported beside the other findings, never instead of them"),
)


def triage(results: Iterable[CheckResult], current: Trace | None = None, roles: RoleMap | None = None,
           measured: Iterable[Measured] = ()) -> tuple[TriageFinding, ...]:
    """Every rule of :data:`RULES` that fits, ranked; ``roles`` default: inferred from the checked names;
    ``measured``: the hypothesis readings (:func:`autotest.judge.evidence.hypothesis_evidence`)."""
    results = tuple(results)
    if roles is None:
        roles = resolve_roles({r.metric for r in results if r.metric})
    ev = Evidence(role_evidence(results, roles), results, roles, frozenset(first_points(current)), tuple(measured))
    findings: list[TriageFinding] = []
    for rule in RULES:
        if any(f.rule == rule.name for f in findings) or any(f.rule in rule.unless for f in findings):
            continue
        found = []
        for condition in rule.conditions:
            text = condition(ev)
            if text is None:
                break
            found.append(text)
        else:
            suggestion = rule.suggestion
            if rule.fills:
                reading = ev.reading(rule.fills)
                suggestion = suggestion.format(**(reading.values if reading is not None else {}))
            caveat = rule.caveat(ev) if rule.caveat else None
            if caveat:
                suggestion += f"; {caveat[0]}"
                found.append(caveat[1])
            primary = not findings
            findings.append(TriageFinding(rule.name, suggestion, "; ".join(found), primary=primary,
                                          rank=len(findings) + 1, why_ranked="" if primary else rule.rank_reason))
    return tuple(_with_ties(findings))


def is_consistency_metric(metric: str | None, roles: RoleMap | None = None) -> bool:
    """Whether ``metric`` has the mismatch role (train–inference consistency)."""
    roles = roles if roles is not None else resolve_roles([metric] if metric else [])
    return roles.group_of(metric) == "consistency"
