"""Turn the pattern of breaches into a suggested next step (seed 003 §3).

Rules, in priority order; each that fires is recorded with its evidence, the first is primary:

1. ``mismatch``: a train–inference consistency metric breached (finite values) → check that
   first and request a consistency dump job.
2. ``non-finite``: a gated metric became NaN/inf → numerical divergence, read the logs.
   ``run-incomplete``: the run ended early (crash, hang, timeout, truncated log).
3. ``eval-path``: only eval metrics breach while every gated training metric is within its bounds
   → the eval path (eval engine, its weight refresh before eval, eval config), not training.
   ``rewards-only`` (early form): only rewards breach at the first step while every other
   checked metric agrees there → the same responses are scored differently: rollout/judger.
   ``first-step``: another metric breaches at the first training step or first eval point →
   initialisation or config (weight mapping, seed, data order), not the training loop.
4. ``teacher-path``: distillation KL breached while rewards are healthy, or before rewards did (the
   teacher path moves KL at once, rewards follow through the update) → teacher path. Distillation
   metrics at the first step are not read as initialisation: the student starts from a checkpoint
   and its first-step KL measures the teachers.
5. ``rewards-only``: in a distillation run only rewards breached → rollout/judger, not distillation.
6. ``gradual``: breaches begin after the start → the training loop (loss, advantage, KL, weight sync).
7. ``performance-only``: only time metrics breached → a performance regression, not accuracy.
"""

from __future__ import annotations

import math
from typing import Iterable

from autotest.judge.metric_names import CHECK_ID as NAMES_CHECK_ID
from autotest.judge.model import ERROR, FAIL, PASS, CheckResult, TriageFinding
from autotest.judge.trace import EVAL_PREFIX, Trace

#: metric families that measure train–inference consistency (xtuner, verl, slime, NeMo-RL)
CONSISTENCY_PREFIXES = ("mismatch/", "rollout_corr/", "training/rollout_probs_diff",
                        "train/train_rollout_logprob_abs_diff", "train/token_mult_prob_error")
REWARD_METRICS = ("response/rewards/mean",)
DISTILL_PREFIX = "distillation/"
TIME_PREFIX = "time/"


def is_consistency_metric(metric: str | None) -> bool:
    return bool(metric) and metric.startswith(CONSISTENCY_PREFIXES)


def _gate_failures(results: Iterable[CheckResult]) -> list[CheckResult]:
    return [r for r in results if r.is_gate and r.status == FAIL and r.kind == "metric"]


def _first_steps(current: Trace | None) -> set[int]:
    if current is None:
        return {0, 1}
    firsts = set()
    if current.train_steps:
        firsts.add(current.train_steps[0])
    if current.eval_steps:
        firsts.add(current.eval_steps[0])
    return firsts


def _first(results: Iterable[CheckResult]) -> float:
    return min((r.first_breach_step for r in results if r.first_breach_step is not None), default=math.inf)


#: a training gate this close to its threshold (observed / threshold) makes "eval path only" uncertain;
#: it adds a caveat, never changes the rule (a clean seed's closest gate can reach 0.9 by chance)
EVAL_PATH_TRAINING_MARGIN = 0.7


def _closest_to_threshold(checks: Iterable[CheckResult]) -> tuple[float, str] | None:
    """(observed / threshold, check id) of the upper-bounded check nearest its threshold."""
    ratios = [(r.observed / r.threshold, r.check_id) for r in checks
              if r.operator in ("<", "<=") and r.threshold and r.threshold > 0 and r.method != "value"
              and r.observed is not None and math.isfinite(r.observed)]
    return max(ratios) if ratios else None


def triage(results: Iterable[CheckResult], current: Trace | None = None) -> tuple[TriageFinding, ...]:
    results = list(results)
    failed = _gate_failures(results)
    findings: list[TriageFinding] = []

    def fire(rule: str, suggestion: str, evidence: str) -> None:
        findings.append(TriageFinding(rule, suggestion, evidence, primary=not findings))

    nonfinite = [r for r in failed if r.observed is not None and not math.isfinite(r.observed)]
    mismatch = [r for r in failed if is_consistency_metric(r.metric) and r not in nonfinite]
    if mismatch:
        first = min(mismatch, key=lambda r: r.first_breach_step if r.first_breach_step is not None else math.inf)
        fire("mismatch", "train/inference inconsistency: check the log-prob path, weight update/sync and the "
                         "rollout backend first; a consistency dump job is requested",
             f"{first.metric} breached first at step {first.first_breach_step} ({first.message})")

    if nonfinite:
        first = min(nonfinite, key=lambda r: r.first_breach_step if r.first_breach_step is not None else math.inf)
        fire("non-finite", "numerical divergence: a metric became NaN/inf (loss, learning rate, overflow); read "
                           "the run's logs around that step", first.message)
    names = [r for r in results if r.check_id == NAMES_CHECK_ID and r.status == ERROR]
    if names:
        fire("metric-names", "the log does not name the baseline's metrics: map its names with metric_aliases, "
                             "or pass this case's own log", names[0].message)
    incomplete = [r for r in results if r.kind == "structural" and r.status == ERROR and r not in names]
    if incomplete:
        fire("run-incomplete", "the run did not complete (crash, hang, timeout or a truncated log): read the "
                               "run's logs before judging accuracy", incomplete[0].message)

    accuracy = [r for r in failed if r not in nonfinite and not is_consistency_metric(r.metric)
                and not (r.metric or "").startswith(TIME_PREFIX)]
    training = [r for r in results if r.is_gate and r.kind == "metric" and not (r.metric or "").startswith(
        (EVAL_PREFIX, TIME_PREFIX))]
    if (accuracy and all((r.metric or "").startswith(EVAL_PREFIX) for r in accuracy) and not mismatch
            and training and all(r.status == PASS for r in training)):
        # the policy that was trained is the golden one (every training gate agrees): what changed is how
        # it is evaluated, so the first breach step (gradual or not) says nothing about the training loop
        suggestion = ("only eval breached while every training metric is within bounds: check the eval path "
                      "(eval engine and the weight refresh before eval, eval config, eval data, grading)")
        closest = _closest_to_threshold(training)
        evidence = f"{accuracy[0].message}; {len(training)} training gate checks pass"
        if closest is not None and closest[0] >= EVAL_PATH_TRAINING_MARGIN:
            # a sampled eval can be the most sensitive gate: a training change it sees first looks the same
            suggestion += ("; training moved too (see evidence), so a training change that the eval sees "
                           "first is also possible: read the training diff as well")
            evidence += f", the closest {closest[1]} at {closest[0]:.2f} of its threshold"
        fire("eval-path", suggestion, evidence)
        return tuple(findings)
    firsts = _first_steps(current)
    early = [r for r in accuracy if r.first_breach_step is not None and r.first_breach_step in firsts
             and not (r.metric or "").startswith(DISTILL_PREFIX)]
    early_rewards = [r for r in early if r.metric in REWARD_METRICS]
    if early_rewards and len(early_rewards) == len(early):
        # same initial policy (nothing else drifted at the first step), different scores: the judge changed
        fire("rewards-only", "rewards differ from the first step while nothing else does: the same responses are "
                             "scored differently; check the rollout/judger (reward function, answer parsing)",
             f"{early_rewards[0].metric} breached at step {early_rewards[0].first_breach_step}, the run's first "
             "point, with every other checked metric within threshold there")
    elif early:
        r = next((x for x in early if x.metric not in REWARD_METRICS), early[0])
        fire("first-step", "drift at the first step / first eval points to initialisation or config (weight "
                           "mapping, seed, data order), not the training loop",
             f"{r.metric} breached at step {r.first_breach_step}, the run's first point")

    distill = [r for r in accuracy if (r.metric or "").startswith(DISTILL_PREFIX)]
    rewards_checked = [r for r in results if r.metric in REWARD_METRICS and r.is_gate]
    rewards_failed = [r for r in rewards_checked if r.status == FAIL]
    if distill and rewards_checked and (not rewards_failed or _first(distill) < _first(rewards_failed)):
        distill.sort(key=lambda r: _first([r]))
        rewards_note = (f"rewards breached later, from step {_first(rewards_failed):g}" if rewards_failed
                        else "rewards within threshold")
        fire("teacher-path", "distillation KL breached with healthy rewards (or before them): check the teacher "
                             "path (teacher endpoints, routing of samples to teachers, sampled tokens, distillation "
                             "loss)",
             f"{distill[0].message}; {rewards_note}")

    # in distillation rewards do not drive the update, so a rewards-only drift isolates the judger
    distillation_run = any((r.metric or "").startswith(DISTILL_PREFIX) for r in results)
    if (distillation_run and rewards_failed and all(r.metric in REWARD_METRICS for r in accuracy)
            and not any(f.rule == "rewards-only" for f in findings)):
        fire("rewards-only", "only rewards drifted: check the rollout/judger (reward function, answer parsing), "
                             "not distillation or the update", rewards_failed[0].message)

    gradual = [r for r in accuracy if r.first_breach_step is not None and r.first_breach_step not in firsts]
    if gradual and not early and not any(f.rule in ("rewards-only", "teacher-path") for f in findings):
        r = min(gradual, key=lambda x: x.first_breach_step)
        fire("gradual", "gradual divergence points to the training loop (loss, advantage, KL, weight sync)",
             f"{r.metric} first breached at step {r.first_breach_step}, after the start")

    timing = [r for r in failed if (r.metric or "").startswith(TIME_PREFIX)]
    if timing and not accuracy and not mismatch:
        fire("performance-only", "only step time regressed: a performance regression, not accuracy; profile the "
                                 "step", timing[0].message)
    return tuple(findings)
