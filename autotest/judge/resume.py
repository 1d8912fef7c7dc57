"""The resume phase's checks: did a run resumed from a checkpoint continue the uninterrupted run?

The pipeline launches the resumed run (:mod:`autotest.run.resume_launch`) and hands over the main run's log and how the
resumed launch went; :func:`judge_resume` reads both logs whole and makes the structural results the verdict takes
(``judge(structural=...)``); :func:`resume_results` is the comparison itself, on two traces:

| check | PASS when | else |
|---|---|---|
| ``resume[completion]`` | the resumed run exited 0 and reached ``at_step + steps`` | ERROR (crash, timeout, no checkpoint, no log); INFO when the phase did not run |
| ``resume[step-counter]`` | its first step is ``at_step + 1``, every step to the last logged, none at or before ``at_step``, no step going back | FAIL: the counter restarted, skipped or has a gap |
| ``resume[match]`` | every compared metric matched at every resumed step | one FAIL ``resume[match:<metric>]`` per metric that did not, with its first differing step |

What is compared: every metric either log carries at the resumed steps, except the performance and memory roles
(step time, throughput, memory: never part of a match). ``match: bitwise`` — equal values (NaN equals NaN); a value
only one run logged differs. ``match: noise`` — a metric with a calibrated noise σ (the baseline's
``golden.noise``) matches when the mean of |resumed − uninterrupted| / σ over the resumed steps is at most
``noise_ratio`` (default 0.5): a resume that lost its state drifts apart like another seed (two independent runs
give ≈ 1.13), while run-to-run nondeterminism of a resumed run stays well below the seed-to-seed noise; metrics
without a calibrated noise are not compared (the summary names how many).

Every FAIL carries, in ``parameters["not_continued"]``, what the evidence says did not continue (triage reads it):
the step counter; how one metric is logged (it alone differs while every other compared metric is bitwise equal at
every resumed step, one after it at least or its value bitwise another step's: :mod:`.resume_causes`); the LR schedule (a ``learning_rate`` metric
differs at the first resumed step); the prompt order (the first resumed step's prompt digest differs), the rollout
weights (the same prompts sampled differently and a mismatch metric left its level there) or the sampling RNG (the
same prompts, the mismatch at its level), each with the evidence that is missing to go further where the log lacks a
digest or a mismatch metric (:mod:`.resume_causes`); else the optimizer state (the first resumed step sampled the
same, its update did not).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import replace

from pathlib import Path

from autotest.errors import UsageError
from autotest.inputs.baseline_model import Baseline
from autotest.inputs.resume_phase import Resume
from autotest.inputs.roles import RoleMap, resolve_roles
from autotest.judge.model import ERROR, FAIL, INFO, PASS, CheckResult, Points
from autotest.judge.resume_causes import LOGGED_PREFIX, LOGGING, logged_alone, sampled_differently
from autotest.readers.reading import read_trace
from autotest.judge.structural import Ending, completion_status
from autotest.judge.trace import Trace
from autotest.run.resume_launch import ResumedLaunch

COMPLETION = "resume[completion]"
STEP_COUNTER = "resume[step-counter]"
MATCH = "resume[match]"
#: role groups never matched (a resumed run's step time and memory are its own)
EXCLUDED_GROUPS = ("performance", "memory")
#: groups whose metrics describe what a step sampled (before its update)
SAMPLED_GROUPS = ("reward", "rollout", "consistency")


def match_id(metric: str) -> str:
    """The check id of one metric's resume match."""
    return f"resume[match:{metric}]"


def is_resume_result(result: CheckResult) -> bool:
    """Whether ``result`` is one of the resume phase's checks."""
    return result.kind == "structural" and result.check_id.startswith("resume[")


def not_run(reason: str) -> list[CheckResult]:
    """The phase did not run (the main run did not complete, was stopped, ...): INFO, never a silent gap."""
    return [CheckResult(COMPLETION, INFO, f"resume phase not run: {reason}", kind="structural")]


def could_not_run(reason: str) -> list[CheckResult]:
    """The phase should have run and could not (no checkpoint, the launch could not start): ERROR."""
    return [CheckResult(COMPLETION, ERROR, f"resume phase: {reason}", kind="structural")]


def main_run_problem(expected_steps: int, exact: bool, ending: Ending, main: Trace | None,
                     interrupted: bool) -> str | None:
    """Why the main run cannot be resumed (it did not complete, was interrupted); None when it can."""
    if interrupted:
        return "the run was interrupted"
    completion = completion_status(ending, main.last_train_step if main is not None else None, expected_steps, exact)
    if main is None or not completion.complete:
        return f"the main run did not complete ({'; '.join(completion.reasons) or 'its metric log was not read'})"
    return None


def judge_resume(resume: Resume, baseline: Baseline, main_tracker: Path | None, launched: ResumedLaunch,
                 fmt: str) -> list[CheckResult]:
    """The resume phase's results from the main run's log and how the resumed launch went (it reads both logs
    whole: the match covers every logged metric, not only the checked ones)."""
    if launched.skipped is not None:
        return not_run(launched.skipped)
    if launched.problem is not None or launched.result is None:
        return could_not_run(launched.problem or "the resumed run did not launch")
    aliases = dict(baseline.metric_aliases)
    try:
        uninterrupted = read_trace(main_tracker, fmt, aliases) if main_tracker is not None else None
    except UsageError as exc:
        return could_not_run(f"the main run's log could not be read again: {exc}")
    if uninterrupted is None:
        return could_not_run("the main run's log is gone")
    resumed, problem = None, launched.tracker_problem
    if launched.tracker is not None:
        try:
            resumed = read_trace(launched.tracker, fmt, aliases)
        except UsageError as exc:
            problem = str(exc)
    names = set(uninterrupted.metrics) | (set(resumed.metrics) if resumed is not None else set())
    roles = resolve_roles(names, {**baseline.roles, **resume.roles}, baseline.preset)
    return resume_results(resume, uninterrupted, resumed, launched.result, roles=roles, noise=baseline.noise_table,
                          log=str(launched.result.stdout_log), tracker_problem=problem)


def resume_results(resume: Resume, uninterrupted: Trace, resumed: Trace | None, ending: Ending, *,
                   roles: RoleMap, noise: Mapping[str, Mapping[int, float]] | None = None, log: str = "",
                   tracker_problem: str | None = None) -> list[CheckResult]:
    """The resume phase's results for a resumed run that ended as ``ending`` and logged ``resumed``."""
    last = resumed.last_train_step if resumed is not None else None
    completion = completion_status(ending, last, resume.last_step, exact=True)
    where = f" (logs: {log})" if log else ""
    if tracker_problem is not None or resumed is None:
        return [CheckResult(COMPLETION, ERROR, f"the resumed run's log could not be read: {tracker_problem}{where}",
                            kind="structural")]
    if completion.complete:
        first = CheckResult(COMPLETION, PASS, f"the run resumed from its checkpoint after step {resume.at_step} "
                            f"exited 0 at step {last}{where}", kind="structural")
    else:
        first = CheckResult(COMPLETION, ERROR, "the resumed run: " + "; ".join(completion.reasons) + where,
                            kind="structural")
    counter = _step_counter(resume, resumed)
    matches, compared = _matches(resume, uninterrupted, resumed, roles, noise)
    results = [first, counter, *matches]
    if any(r.status == FAIL for r in results):
        verdict = not_continued(resume, counter, matches, roles, compared, uninterrupted, resumed)
        cause = LOGGING if verdict.startswith(LOGGED_PREFIX) else "state"
        results = [replace(r, parameters={**r.parameters, "not_continued": verdict, "resume_cause": cause})
                   if r.status == FAIL else r for r in results]
    return results


def _step_counter(resume: Resume, resumed: Trace) -> CheckResult:
    steps = resumed.train_steps
    expected_first = resume.at_step + 1
    params = {"at_step": resume.at_step, "expected_first_step": expected_first,
              "logged_steps": list(steps)}
    if not steps:
        return CheckResult(STEP_COUNTER, INFO, "not decided: the resumed run logged no training step",
                           kind="structural", parameters=params)
    early = sorted({*steps, *resumed.eval_steps} & set(range(0, expected_first)))
    problems = []
    if early:
        problems.append(f"the step counter restarted: the resumed run logged step {_steps(early)}, at or before "
                        f"the checkpoint's step {resume.at_step}")
    elif steps[0] != expected_first:
        problems.append(f"the step counter skipped: the first resumed step is {steps[0]}, expected {expected_first}")
    gaps = sorted(set(range(steps[0], steps[-1] + 1)) - set(steps))
    if gaps:
        problems.append(f"steps {_steps(gaps)} are missing between {steps[0]} and {steps[-1]}")
    if resumed.restarts:
        problems.append(f"the step counter went back at step {_steps(list(resumed.restarts))}")
    if problems:
        return CheckResult(STEP_COUNTER, FAIL, "; ".join(problems), kind="structural", parameters=params,
                           first_breach_step=steps[0])
    return CheckResult(STEP_COUNTER, PASS, f"continued at step {expected_first}: steps {steps[0]}-{steps[-1]}, "
                       "no gap, no restart", kind="structural", parameters=params)


def _steps(steps: Sequence[int]) -> str:
    shown = ", ".join(map(str, steps[:5]))
    return shown + (f" (+{len(steps) - 5} more)" if len(steps) > 5 else "")


def compared_metrics(uninterrupted: Trace, resumed: Trace, roles: RoleMap, steps: Sequence[int]) -> list[str]:
    """Every metric either run logged at ``steps``, less the excluded (time, memory) roles."""
    names = set()
    for trace in (uninterrupted, resumed):
        names |= {m for m, series in trace.series.items() if any(s in series for s in steps)}
    return sorted(m for m in names if roles.group_of(m) not in EXCLUDED_GROUPS)


def _equal(a: float | None, b: float | None) -> bool:
    if a is None or b is None:
        return a is b
    return a == b or (math.isnan(a) and math.isnan(b))


def _matches(resume: Resume, uninterrupted: Trace, resumed: Trace, roles: RoleMap,
             noise: Mapping[str, Mapping[int, float]] | None) -> tuple[list[CheckResult], list[str]]:
    """The match results and the metrics compared."""
    steps = [s for s in resumed.train_steps if resume.at_step < s <= resume.last_step]
    params = {"match": resume.match, "at_step": resume.at_step, "steps": steps}
    if not steps:
        return [CheckResult(MATCH, INFO, f"not compared: the resumed run logged none of steps {resume.at_step + 1}-"
                            f"{resume.last_step} (see {STEP_COUNTER})", kind="structural", parameters=params)], []
    metrics = compared_metrics(uninterrupted, resumed, roles, steps)
    if resume.match == "noise":
        metrics = [m for m in metrics if noise and any(noise.get(m, {}).get(s) for s in steps)]
        if not metrics:
            return [CheckResult(MATCH, ERROR, "match: noise, but the baseline has no calibrated noise (golden.noise) "
                                f"for any metric logged at steps {steps[0]}-{steps[-1]}; recalibrate, or use match: "
                                "bitwise for a deterministic workload", kind="structural", parameters=params)], []
        failed = [r for m in metrics if (r := _noise_match(m, resume, uninterrupted, resumed, noise or {}, steps))]
        uncompared = len(compared_metrics(uninterrupted, resumed, roles, steps)) - len(metrics)
        summary = (f"{len(metrics)} metrics within {resume.noise_ratio:g} x the calibrated noise at steps "
                   f"{steps[0]}-{steps[-1]} ({uncompared} without calibrated noise not compared)")
    else:
        failed = [r for m in metrics if (r := _bitwise_match(m, resume, uninterrupted, resumed, steps))]
        summary = f"{len(metrics)} metrics bitwise equal at steps {steps[0]}-{steps[-1]}"
    if failed:
        return sorted(failed, key=lambda r: (r.first_breach_step or 0, r.metric or "")), metrics
    excluded = sorted({roles.group_of(m) for t in (uninterrupted, resumed) for m in t.series} & set(EXCLUDED_GROUPS))
    note = f"; {' and '.join(excluded)} metrics excluded" if excluded else ""
    return [CheckResult(MATCH, PASS, summary + note, kind="structural",
                        parameters={**params, "metrics": len(metrics)})], metrics


def _values(trace: Trace, metric: str, steps: Sequence[int]) -> list[float | None]:
    series = trace.get(metric) or {}
    return [series.get(s) for s in steps]


def _points(steps: Sequence[int], now: list[float | None], before: list[float | None], breached: list[bool]) -> Points:
    nan = math.nan
    return Points(tuple(steps), tuple(nan if v is None else v for v in now), tuple(before),
                  tuple(nan if a is None or b is None else a - b for a, b in zip(now, before)), tuple(breached))


def _bitwise_match(metric: str, resume: Resume, uninterrupted: Trace, resumed: Trace,
                   steps: Sequence[int]) -> CheckResult | None:
    before, now = _values(uninterrupted, metric, steps), _values(resumed, metric, steps)
    differs = [not _equal(a, b) for a, b in zip(now, before)]
    if not any(differs):
        return None
    i = differs.index(True)
    first = steps[i]
    gaps = [abs(a - b) for a, b in zip(now, before) if a is not None and b is not None and math.isfinite(a - b)]
    if now[i] is None or before[i] is None:
        which = "the resumed run" if now[i] is None else "the uninterrupted run"
        shown = f"not logged by {which} at step {first}"
    else:
        shown = f"resumed {now[i]:.9g} vs uninterrupted {before[i]:.9g} at step {first}"
    at = ", the first resumed step" if first == resume.at_step + 1 else ""
    return CheckResult(
        match_id(metric), FAIL,
        f"{metric} differs from step {first}{at}: {shown} ({sum(differs)} of {len(steps)} resumed steps differ)",
        kind="structural", metric=metric, method="bitwise", operator="==", threshold=0.0, scope="resume",
        observed=max(gaps) if gaps else None, first_breach_step=first,
        worst_step=steps[max(range(len(steps)), key=lambda j: _gap(now[j], before[j]))],
        points=_points(steps, now, before, differs),
        parameters={"match": "bitwise", "at_step": resume.at_step, "first_differing_step": first})


def _gap(a: float | None, b: float | None) -> float:
    if a is None or b is None or not math.isfinite(a - b):
        return math.inf if not _equal(a, b) else 0.0
    return abs(a - b)


def _noise_match(metric: str, resume: Resume, uninterrupted: Trace, resumed: Trace,
                 noise: Mapping[str, Mapping[int, float]], steps: Sequence[int]) -> CheckResult | None:
    sigma = noise.get(metric, {})
    scored = [s for s in steps if sigma.get(s)]
    before, now = _values(uninterrupted, metric, scored), _values(resumed, metric, scored)
    ratios = [_gap(a, b) / sigma[s] for s, a, b in zip(scored, now, before)]
    mean_ratio = sum(ratios) / len(ratios)
    if mean_ratio <= resume.noise_ratio:
        return None
    beyond = [r > resume.noise_ratio for r in ratios]
    first = scored[beyond.index(True)] if any(beyond) else scored[0]
    return CheckResult(
        match_id(metric), FAIL,
        f"{metric}: mean |resumed - uninterrupted| / calibrated noise over steps {scored[0]}-{scored[-1]} is "
        f"{mean_ratio:.3g} > {resume.noise_ratio:g} (first beyond at step {first})",
        kind="structural", metric=metric, method="noise", operator="<=", threshold=resume.noise_ratio,
        scope="resume", observed=mean_ratio if math.isfinite(mean_ratio) else None, first_breach_step=first,
        worst_step=scored[max(range(len(ratios)), key=ratios.__getitem__)],
        points=_points(scored, now, before, beyond),
        parameters={"match": "noise", "at_step": resume.at_step, "first_differing_step": first,
                    "noise_ratio": resume.noise_ratio})


def not_continued(resume: Resume, counter: CheckResult, matches: Sequence[CheckResult], roles: RoleMap,
                  compared: Sequence[str] = (), uninterrupted: Trace | None = None,
                  resumed: Trace | None = None) -> str:
    """What the evidence says did not continue across the resume (one phrase, with the metric that shows it)."""
    first_step = resume.at_step + 1
    if counter.status == FAIL:
        return f"the step counter ({counter.message})"
    failed = [r for r in matches if r.status == FAIL and r.metric]
    logged = logged_alone(resume, failed, compared, uninterrupted, resumed)
    if logged:
        return logged
    at_first = [r for r in failed if r.first_breach_step == first_step]
    lr = [r for r in at_first if roles.base_role_of(r.metric) == "learning_rate"]
    if lr:
        return f"the LR schedule ({lr[0].metric} differs at step {first_step}, the first resumed step)"
    sampled = [r for r in at_first if roles.group_of(r.metric) in SAMPLED_GROUPS]
    if sampled:
        return sampled_differently(first_step, sampled, at_first, compared, roles, uninterrupted, resumed)
    if not failed:
        return "nothing the resume checks could name"
    earliest = min(failed, key=lambda r: (r.first_breach_step or 0, r.metric or ""))
    lr_logged = any(roles.base_role_of(m) == "learning_rate" for m in compared)
    caveat = "" if lr_logged else "; or the LR schedule: no metric with the learning_rate role tells them apart"
    if earliest.first_breach_step == first_step:
        return (f"the optimizer state: step {first_step} sampled what the uninterrupted run sampled (its reward, "
                f"rollout and mismatch metrics equal), yet its update differs ({earliest.metric}){caveat}")
    return (f"the optimizer state (or other state read only by the update): step {first_step} matched, "
            f"{earliest.metric} differs from step {earliest.first_breach_step}{caveat}")
