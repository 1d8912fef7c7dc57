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
| 6 | ``training-data`` | an accuracy or mismatch breach and the ``data composition`` reading: a metric of a data role (repeated prompts, distinct prompts, a source's prompts) off its reference (the golden's; without one, none repeated, or a source's share at the run's first steps) by a prompt and 5% of the step or more (a source: 2 binomial sds too) at 3+ steps in a row, one way |
| 7 | ``logging-units`` | the ``smoothed log`` reading: every metric logged at each step calmer (step-to-step roughness in noise sds) than the calmest calibration run, and with an exponential moving average undone on every metric every gate passes and every metric is within its per-step noise; no mismatch breach |
| 8 | ``logging-units`` | one metric breached, not a score (reward, eval), a teacher's KL nor a mismatch metric, every other gate passed and every other gated metric within its per-step noise at every step; that metric is the golden moved by whole steps (logged from the previous or the next step), or divided by a constant factor (or less a constant offset, or against the golden smoothed by an EMA) it stays within its per-step noise at every step and passes its own gates, or it is off the golden from its first step while no other metric leaves its per-step noise (``logging/units`` reading, five common steps or more) |
| 9 | ``eval-path`` | only eval breached; every checked training role within bounds at every step |
| 10 | ``rewards-only`` | only reward breached; eval, rollout (length, entropy), training dynamics and teachers within bounds at every step (one of them checked), and none of them left the golden before the rewards did (``loss term`` reading: per-step noise, under their gates or not) |
| 11 | ``rewards-only`` | reward breached at the run's first point; no other role breached there (the first-point form) |
| 12 | ``logging-units`` | the ``logging/units`` reading holds for a score (reward, eval): a judger or grader scale fits as well, so it ranks below their rules |
| 13 | ``sampling-changed`` | the ``first step`` reading: the response length 3+ noise sds off the golden at the first logged step while the entropy there is not (the sampler, before any update); no mismatch breach |
| 14 | ``first-step`` | a non-reward, non-teacher role breached at the first training step or first eval point |
| 15 | ``teacher-path`` | distillation KL breached; rewards checked; a failed bound on a teacher metric (the teacher probe, which names the teacher to start with), else the ``teachers`` reading where the KL has per-step noise (a teacher's KL off the golden at once, the domains apart, or the KL up while no score fell; the scores falling with the KL is the student's update and leaves the breach to ``gradual``), else rewards within bounds or breached later |
| 16 | ``training-data`` | the ``train against eval`` reading: a training score left the golden one way (3+ steps at 2 sd) while a failed eval gate is the other way (any change to how the policy learns moves both the same way); no mismatch breach |
| 17 | ``sampling-changed`` | the mismatch role within bounds; the breaches begin after the start; only reward, eval and entropy breached, all above the golden (scores rose while the entropy rose: a sampler narrower than what it reports) |
| 18 | ``loss-term`` | the ``loss term`` reading holds: a training role (entropy, length, a loss) left the golden one way for 3+ steps from step 2 or later, the first step the golden's, 5+ steps before the scores (per-step noise, under its gate's threshold or not), steadily (step-to-step change rms at most 1.6 sd); no mismatch breach |
| 19 | ``sampling-changed`` | an accuracy breach; the mismatch role checked and within bounds; length and entropy within bounds, the entropy at half its threshold or more |
| 20 | ``gradual`` | every accuracy breach begins after the start, and a training role breached (or none is checked) |
| 21 | ``loss-term`` | the ``loss term`` reading holds but the leading role moved in jumps (step-to-step change rms above 1.6 sd): ranked after ``gradual``, both named |
| 22 | ``resume-logging`` | every failed resume check is one metric that alone differs while every other compared metric is bitwise equal at every resumed step, one after it at least or its value bitwise the uninterrupted run's at another step (``parameters["resume_cause"]``: logging): how it is logged across a resume, not state the checkpoint lost |
| 23 | ``resume`` | a resume check failed or could not decide (``resume[...]``: the run resumed from its checkpoint did not continue the uninterrupted one), not for a logging cause; primary when the main run's own gates pass |
| 24 | ``performance-only`` | only step-time / throughput roles breached |
| 25 | ``performance`` | step time breached as well as accuracy: a separate performance finding |
| 26 | ``memory`` | a memory gate breached (growth per step or peak); beside any accuracy finding, never instead |

A rule fits at most once (the first of its rows that fits); ``gradual`` is not shown when
``teacher-path`` fits (the same breach, explained more narrowly). When the primary and the runner-up are a pair the
evidence cannot tell apart (:data:`TIES`: a reward or an eval a constant factor off is the judger or grader as much as the
logger; a training role that led the scores is a loss term as much as the step size), the next-step line names both,
ranked, with the check that tells them apart
(``TriageFinding.uncertain_with``, ``to_tell``). A time-role metric is never read as an
accuracy breach, and neither is a memory-role metric (``memory``: its own rule, never accuracy evidence). Where a
breach begins (rows 11, 14, 17, 19, 20) is read from checks that locate breaches per step
(stepwise, points, percentile, final): a pooled or window check gates a mean over its window, and the step
where one noisy point first crosses its bound is not where the change began.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Callable, Iterable

from autotest.inputs.roles import RoleMap, resolve_roles
from autotest.judge.data_evidence import COMPOSITION, TRAIN_EVAL
from autotest.judge.evidence import TRAINING_GROUPS, first_points, role_evidence
from autotest.judge.model import CheckResult, Measured, TriageFinding
from autotest.judge.onset_evidence import FIRST_STEP, LOSS_TERM
from autotest.judge.shape_evidence import SHAPE
from autotest.judge.smoothing_evidence import SMOOTHED
from autotest.judge.trace import Trace
from autotest.judge.units_evidence import UNITS

from autotest.judge.triage_conditions import (
    Condition,
    Evidence,
    UNITS_RANK_REASON,
    UNITS_SUGGESTION,
    accuracy_breach,
    at_first_point_only,
    better_yet_less_certain,
    breached,
    early_breach,
    eval_path_caveat,
    in_bounds,
    incomplete,
    measured_holds,
    no_accuracy_breach,
    non_finite,
    reading_lacks,
    reading_lists,
    reading_says,
    not_breached,
    only_breached,
    resume_broken,
    resume_logged,
    role_moved,
    starts_later,
    teacher_bound_caveat,
    teacher_first,
    training_moved_or_unchecked,
    unnamed_metrics,
    unscored_metric,
    what_did_not_continue,
)


#: (primary, runner-up) rules the evidence cannot tell apart when both fit, and the check that tells them apart:
#: the next-step line names both, ranked, never one of them alone
TIES: dict[tuple[str, str], str] = {
    ("rewards-only", "logging-units"):
        "to tell: score a few logged responses again with the reward function; the logged scores scaled by the "
        "factor is the logger, other scores is the judger",
    ("eval-path", "logging-units"):
        "to tell: grade one saved eval batch again and count it by hand; the logged accuracy scaled by the factor "
        "is the logger, another accuracy is the eval path",
    ("loss-term", "gradual"):
        "to tell: diff the loss's terms and coefficients and the optimiser's step size; a steady lead of one role, "
        "the scores waiting, is a term of the loss, jumps and early scores are the step size",
    ("gradual", "loss-term"):
        "to tell: diff the optimiser's step size and the loss's terms; the role led the scores in jumps, as a larger "
        "step size moves it, but a changed loss term leads the same way",
}


LOSS_TERM_SUGGESTION = (
    "a loss term changed (a regulariser's sign or weight: entropy bonus, KL or length penalty, a loss coefficient): "
    "{metric} left the golden {direction} it from step {onset}, {lead} steps before the scores, after a first step "
    "that was the golden's; check the terms of the loss, their signs and coefficients")


def _with_ties(findings: list[TriageFinding]) -> list[TriageFinding]:
    """When the primary and the runner-up are a pair of :data:`TIES`, the primary names the runner-up and the check
    that tells them apart: its next-step line (``TriageFinding.next_step``) names both, ranked."""
    if len(findings) < 2 or (findings[0].rule, findings[1].rule) not in TIES:
        return findings
    first, second = findings[0], findings[1]
    to_tell = TIES[(first.rule, second.rule)]
    return [replace(first, uncertain_with=second.rule, to_tell=to_tell),
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
    Rule("training-data", (measured_holds(COMPOSITION), accuracy_breach),
         "the training data changed: {metric} is {current} per step from step {onset} against {reference} ("
         "{reference_kind}); check what the trainer is fed (the data loader and sampler: repeat settings, shard "
         "and epoch index, the data mix and its weights, filters), not the sampling settings",
         "the log's own count of what each step was fed moved: the data changed before anything the policy does",
         fills=COMPOSITION),
    Rule("logging-units", (measured_holds(SMOOTHED), not_breached("consistency")),
         "logging: every metric logged at each step ({metrics}) is calmer than any calibration run, and with an "
         "exponential moving average (weight {weight} on the previous logged value) undone on every metric, every gate "
         "passes: the logger smooths the scalars it writes while the training is unchanged; check the tracker and "
         "its writer (a smoothing or EMA option applied at write time), not the training",
         "every curve calmer than the unchanged training ever was, and the average undone passes: what is logged "
         "changed, not what the policy does", fills=SMOOTHED),
    Rule("logging-units", (measured_holds(UNITS), unscored_metric),
         UNITS_SUGGESTION, UNITS_RANK_REASON, fills=UNITS),
    Rule("eval-path", (only_breached("eval"), in_bounds(*TRAINING_GROUPS), not_breached("consistency")),
         "only eval breached while every training metric is within bounds: check the eval path (eval engine and "
         "the weight refresh before eval, eval config, eval data, grading)", caveat=eval_path_caveat),
    Rule("rewards-only", (only_breached("reward"), in_bounds("eval", "rollout", "dynamics", "teacher", "other"),
                          reading_lacks(LOSS_TERM, "led", "yes", "no training role moved before the rewards")),
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
    Rule("sampling-changed", (reading_lists(FIRST_STEP, "moved", "response_length"),
                              reading_says(FIRST_STEP, "entropy", "no"), not_breached("consistency")),
         "what is sampled changed before any update while the policy did not: the response length was off the golden "
         "at the first step with the entropy of the sampled tokens as the golden's; check how sampling stops and "
         "what it may sample (stop tokens and EOS handling, bad-words / banned-token lists, max new tokens, "
         "logits processors)",
         "the first step's rollout comes before any update: a length off there with the entropy the golden's is the "
         "sampler, not the model"),
    Rule("first-step", (early_breach("eval", "rollout", "dynamics", "other"),),
         "drift at the first step / first eval points to initialisation or config (weight mapping, seed, data "
         "order), not the training loop", "the policy already differed before any update"),
    Rule("teacher-path", (breached("teacher"), teacher_first),
         "distillation KL breached with healthy rewards (or before them): check the teacher path (teacher "
         "endpoints, routing of samples to teachers, sampled tokens, distillation loss)",
         "the teacher path moves KL at once; rewards follow only through the update", caveat=teacher_bound_caveat),
    Rule("training-data", (measured_holds(TRAIN_EVAL), not_breached("consistency")),
         "the policy was trained on other prompts than the golden run's: {train} went {train_direction} the golden "
         "from step {onset} while {eval} is {eval_direction} it; check what the trainer is fed (the sampler and its "
         "shard / epoch index, data filters, the data mix and its weights, deduplication), then how the training "
         "answers are graded (a lenient judger scores the same way)",
         "any change to how the policy learns moves its training and eval scores the same way; opposite directions "
         "are other training data", fills=TRAIN_EVAL),
    Rule("sampling-changed", (in_bounds("consistency"), starts_later, better_yet_less_certain),
         "rollout sampling changed (the distribution, not the log-probs): rewards and eval rose while the entropy "
         "of the sampled tokens rose too, which no update does; the rollout draws from a narrower distribution "
         "than the one whose log-probs it reports: check top-p / top-k, the sampling temperature and logits "
         "processors, and whether the reported log-probs come from the distribution that was sampled",
         "a sampler that draws from a nucleus leaves the tail it never draws untrained: better scores, higher "
         "entropy, and mismatch metrics that cannot see it"),
    Rule("loss-term", (measured_holds(LOSS_TERM), reading_says(LOSS_TERM, "steady", "yes"), not_breached("consistency")),
         LOSS_TERM_SUGGESTION,
         "one training role led the scores by steps after a golden first step, steadily: what the update optimises "
         "changed, not how far it steps", fills=LOSS_TERM),
    Rule("sampling-changed", (accuracy_breach, in_bounds("consistency"), in_bounds("rollout"), role_moved("entropy")),
         "rollout sampling changed (the distribution, not the log-probs): the trainer and the rollout agree on "
         "the log-probs while the sampled tokens' entropy moved against the golden; check the sampling settings "
         "(temperature, top-p / top-k, logits processors, stop words) and whether the reported log-probs come "
         "from the distribution that was sampled",
         "a change in what is sampled moves entropy first; the mismatch metrics cannot see it when the rollout "
         "reports unfiltered log-probs"),
    Rule("gradual", (starts_later, training_moved_or_unchecked),
         "gradual divergence points to the training loop (loss, advantage, KL, weight sync)",
         "a breach that grows after the start fits a training-loop change too; the rules above explain the same "
         "breach more narrowly", unless=("teacher-path",)),
    # a role that led the scores in jumps: a step-size change as likely as a loss term, ranked after the update
    Rule("loss-term", (measured_holds(LOSS_TERM), reading_says(LOSS_TERM, "steady", "no"), not_breached("consistency")),
         LOSS_TERM_SUGGESTION, "it moved in jumps, as a larger step moves it", fills=LOSS_TERM),
    Rule("resume-logging", (resume_logged,),
         "logging across the resume, not the checkpoint: the resumed run trained what the uninterrupted run did",
         "the main run's own breaches explain the verdict first; a metric logged otherwise across a resume is "
         "separate", caveat=what_did_not_continue),
    Rule("resume", (resume_broken,),
         "checkpoint resume is broken: a run resumed from its checkpoint did not continue the uninterrupted run; "
         "check what the checkpoint saves and the resume restores (optimizer state, LR scheduler position, RNG "
         "states, step counter, the rollout engine's weights)",
         "the main run's own breaches explain the verdict first; the resume finding is separate",
         caveat=what_did_not_continue),
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
    ``measured``: the hypothesis readings (:func:`autotest.judge.readings.hypothesis_evidence`)."""
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
