"""The resume phase's comparison (autotest.judge.resume) on synthetic traces, and its triage rule."""

from __future__ import annotations

import math
from dataclasses import dataclass
from types import MappingProxyType

import pytest

from autotest.inputs.resume_phase import Resume
from autotest.inputs.roles import resolve_roles
from autotest.judge.model import ERROR, FAIL, INFO, PASS
from autotest.judge.resume import (
    COMPLETION,
    MATCH,
    STEP_COUNTER,
    main_run_problem,
    match_id,
    resume_results,
)
from autotest.judge.trace import Trace
from autotest.judge.triage import triage

LR, LOSS = "train_metrics/worker_0/lr", "train_metrics/worker_0/loss"
REWARD, LENGTH, K3 = "response/rewards/mean", "response/response_len/mean", "mismatch/mismatch_k3_kl"
RESUME = Resume(at_step=4, steps=3, checkpoint_args=("{checkpoint_dir}",), resume_args=("{checkpoint_dir}",),
                roles={LR: "learning_rate", LOSS: "loss"})


@dataclass
class Ended:
    """How a launch ended (the Ending protocol)."""

    exit_code: int | None = 0
    timed_out: bool = False
    timeout_s: float = 60.0
    stopped_reason: str | None = None
    interrupted: str | None = None
    signal: str | None = None


def _series(steps, offset=0.0):
    return {s: 0.1 * s + offset for s in steps}


def _run(steps, **changed) -> Trace:
    """A run logging reward, length, k3, lr, loss and the excluded time/memory at ``steps``; ``changed`` replaces
    whole series (metric -> {step: value})."""
    series = {REWARD: _series(steps), LENGTH: _series(steps, 2.0), K3: {s: 1e-14 for s in steps},
              LR: {s: 1e-3 * (1 - s / 10) for s in steps}, LOSS: _series(steps, -1.0),
              "time/step": {s: 0.5 + 0.01 * s for s in steps}, "memory/rss_mb": {s: 400.0 + s for s in steps}}
    for metric, values in changed.items():
        series[metric.replace("__", "/")] = {**series.get(metric.replace("__", "/"), {}), **values}
    return Trace("t.jsonl", MappingProxyType(series), tuple(sorted(steps)), ())


MAIN = _run(range(1, 11))
ROLES = resolve_roles([REWARD, LENGTH, K3, "time/step", "memory/rss_mb", LR, LOSS], RESUME.roles)


def _results(resumed: Trace, ended=None, resume=RESUME, **kw):
    return {r.check_id: r for r in resume_results(resume, MAIN, resumed, ended or Ended(), roles=ROLES, **kw)}


def test_a_resume_that_continued_bitwise_passes_with_time_and_memory_left_out():
    # time and memory of the resumed process are its own: changed, they still match
    results = _results(_run(range(5, 8), **{"time__step": {5: 9.0}, "memory__rss_mb": {5: 999.0}}))
    assert [r.status for r in results.values()] == [PASS, PASS, PASS]
    assert results[MATCH].message == "5 metrics bitwise equal at steps 5-7; memory and performance metrics excluded"
    assert results[STEP_COUNTER].message == "continued at step 5: steps 5-7, no gap, no restart"


def test_a_restarted_lr_schedule_fails_and_is_named():
    # the update at step 5 took the other rate, so what step 6 sampled and its loss differ too
    resumed = _run(range(5, 8), **{LR.replace("/", "__"): {5: 1e-3, 6: 9e-4, 7: 8e-4},
                                   REWARD.replace("/", "__"): {6: 0.0, 7: 0.0}, LOSS.replace("/", "__"): {6: 3.0}})
    results = _results(resumed)
    lr = results[match_id(LR)]
    assert lr.status == FAIL and lr.kind == "structural" and lr.metric == LR and lr.first_breach_step == 5
    assert lr.message.startswith(f"{LR} differs from step 5, the first resumed step: resumed 0.001 vs "
                                 "uninterrupted 0.0005 at step 5 (3 of 3 resumed steps differ)")
    assert lr.points.steps == (5, 6, 7) and all(lr.points.breached)
    assert lr.parameters["not_continued"].startswith("the LR schedule (")
    assert set(results) == {COMPLETION, STEP_COUNTER, match_id(LR), match_id(REWARD), match_id(LOSS)}


def test_a_first_step_that_sampled_differently_points_at_the_rng():
    resumed = _run(range(5, 8), **{REWARD.replace("/", "__"): {5: 0.77}, LOSS.replace("/", "__"): {5: 3.0}})
    verdict = _results(resumed)[match_id(REWARD)].parameters["not_continued"]
    # the mismatch metric is bitwise equal there: the rollout engine holds the trainer's weights, so the RNG; what
    # would tell prompt order from the sampling RNG is named as missing
    assert verdict.startswith(f"the RNG (prompt order or sampling): step 5, the first resumed step, sampled "
                              f"differently ({REWARD}) while the train–inference mismatch stayed at its level there "
                              f"({K3})")
    assert "the log has no per-step digest of the prompts drawn" in verdict


def test_a_first_step_that_sampled_differently_with_the_mismatch_moved_points_at_the_rollout_weights():
    resumed = _run(range(5, 8), **{REWARD.replace("/", "__"): {5: 0.77}, K3.replace("/", "__"): {5: 0.02}})
    verdict = _results(resumed)[match_id(REWARD)].parameters["not_continued"]
    assert verdict.startswith(f"the rollout engine's weights: step 5, the first resumed step, sampled differently "
                              f"({REWARD}) and the train–inference mismatch left its level there ({K3} 0.02 against "
                              "at most 1e-14 at any step of the uninterrupted run)")


def test_without_a_mismatch_metric_the_rng_and_the_weights_are_named_together_with_what_is_missing():
    roles = resolve_roles([REWARD, LOSS])
    main = Trace("t.jsonl", MappingProxyType({REWARD: _series(range(1, 11)), LOSS: _series(range(1, 11))}),
                 tuple(range(1, 11)), ())
    resumed = Trace("r.jsonl", MappingProxyType({REWARD: {**_series(range(5, 8)), 5: 0.77},
                                                 LOSS: {**_series(range(5, 8)), 5: 3.0}}), (5, 6, 7), ())
    results = resume_results(RESUME, main, resumed, Ended(), roles=roles)
    verdict = next(r for r in results if r.status == FAIL).parameters["not_continued"]
    assert verdict.startswith("the RNG (prompt order, sampling) or the rollout engine's weights")
    assert "no train–inference mismatch metric was compared" in verdict


def test_one_metric_different_while_every_other_is_bitwise_equal_is_logging_not_the_rng():
    """Issue 44: a length logged from the previous step; at the first resumed step the logger has nothing cached and
    writes the step's own value, the uninterrupted run's at the next step. Training bitwise unchanged."""
    late = {s: _series(range(0, 11), 2.0)[s - 1] for s in range(1, 11)}  # logged from the previous step
    main = _run(range(1, 11), **{LENGTH.replace("/", "__"): late})
    resumed = _run(range(5, 8), **{LENGTH.replace("/", "__"): {5: late[6], 6: late[6], 7: late[7]}})
    results = {r.check_id: r for r in resume_results(RESUME, main, resumed, Ended(), roles=ROLES)}
    length = results[match_id(LENGTH)]
    assert length.status == FAIL and length.first_breach_step == 5
    verdict = length.parameters["not_continued"]
    assert verdict.startswith(f"how {LENGTH} is logged, not the training: it differs at step 5 of the resumed steps "
                              "while the 4 other compared metrics are bitwise equal at every resumed step")
    assert "the uninterrupted run's 1 step later" in verdict and "RNG" not in verdict
    findings = triage(results.values(), MAIN, ROLES)
    assert [f.rule for f in findings] == ["resume-logging"]  # never "checkpoint resume is broken"
    assert findings[0].suggestion.startswith("logging across the resume, not the checkpoint: ")
    assert f"how {LENGTH} is logged" in findings[0].suggestion


def test_one_metric_different_at_the_last_resumed_step_only_is_not_read_as_logging():
    """Nothing resumed after it: an update that differed there would not show yet."""
    resumed = _run(range(5, 8), **{LOSS.replace("/", "__"): {7: 3.0}})
    verdict = _results(resumed)[match_id(LOSS)].parameters["not_continued"]
    assert not verdict.startswith("how ")


def test_one_metric_logged_from_the_next_step_differs_at_the_last_resumed_step_alone_and_is_logging():
    """Issue 44: a length logged from the next step (rows held until the next one arrives); the resumed run's last
    row, flushed at close, keeps its own value, which the uninterrupted run logged a step earlier. Training bitwise
    unchanged: nothing resumed after it, but a value bitwise another step's is not an update that differed."""
    true = _series(range(0, 12), 2.0)
    ahead = {s: true[s + 1] for s in range(1, 10)} | {10: true[10]}
    main = _run(range(1, 11), **{LENGTH.replace("/", "__"): ahead})
    resumed = _run(range(5, 8), **{LENGTH.replace("/", "__"): {5: ahead[5], 6: ahead[6], 7: true[7]}})
    results = {r.check_id: r for r in resume_results(RESUME, main, resumed, Ended(), roles=ROLES)}
    assert [r.metric for r in results.values() if r.status == FAIL] == [LENGTH]
    verdict = results[match_id(LENGTH)].parameters["not_continued"]
    assert verdict.startswith(f"how {LENGTH} is logged, not the training: it differs at step 7 of the resumed steps "
                              "while the 4 other compared metrics are bitwise equal at every resumed step, the last")
    assert "bitwise the uninterrupted run's 1 step earlier" in verdict and "optimizer" not in verdict
    assert [f.rule for f in triage(results.values(), main, ROLES)] == ["resume-logging"]


def test_a_last_step_value_that_a_metric_of_few_values_logged_elsewhere_too_is_not_read_as_logging():
    """A count or a mean of 0/1 rewards equals another step's by chance: the shift is no evidence there."""
    steps = range(1, 11)
    main = _run(steps, **{LENGTH.replace("/", "__"): {s: float(s % 3) for s in steps}})
    resumed = _run(range(5, 8), **{LENGTH.replace("/", "__"): {5: 2.0, 6: 0.0, 7: 0.0}})  # 7 % 3 = 1 uninterrupted
    verdict = resume_results(RESUME, main, resumed, Ended(), roles=ROLES)
    failed = [r for r in verdict if r.status == FAIL]
    assert [r.metric for r in failed] == [LENGTH] and not failed[0].parameters["not_continued"].startswith("how ")


def test_an_update_that_differs_after_equal_samples_points_at_the_optimizer_state():
    resumed = _run(range(5, 8), **{LOSS.replace("/", "__"): {5: 3.0}, REWARD.replace("/", "__"): {6: 0.0}})
    results = _results(resumed)
    assert results[match_id(REWARD)].first_breach_step == 6
    assert results[match_id(LOSS)].parameters["not_continued"].startswith(
        "the optimizer state: step 5 sampled what the uninterrupted run sampled")


def test_without_a_learning_rate_role_the_optimizer_finding_says_the_schedule_is_possible_too():
    roles = resolve_roles([REWARD, LOSS])
    resumed = _run(range(5, 8), **{LOSS.replace("/", "__"): {5: 3.0}, REWARD.replace("/", "__"): {6: 0.0}})
    results = resume_results(RESUME, MAIN, resumed, Ended(), roles=roles)
    failed = [r for r in results if r.status == FAIL]
    assert failed and all("or the LR schedule: no metric with the learning_rate role tells them apart"
                          in r.parameters["not_continued"] for r in failed)


def test_a_restarted_step_counter_fails_and_nothing_is_compared():
    results = _results(_run(range(1, 4)))
    assert results[STEP_COUNTER].status == FAIL
    assert results[STEP_COUNTER].message.startswith("the step counter restarted: the resumed run logged step 1, 2, 3, "
                                                    "at or before the checkpoint's step 4")
    assert results[MATCH].status == INFO and results[MATCH].message.startswith("not compared")
    assert results[COMPLETION].status == ERROR  # it never reached step 7
    assert results[STEP_COUNTER].parameters["not_continued"].startswith("the step counter (")


def test_a_gap_and_a_skipped_first_step_fail_the_counter():
    assert "steps 6 are missing between 5 and 7" in _results(_run([5, 7]))[STEP_COUNTER].message
    assert _results(_run([6, 7]))[STEP_COUNTER].message.startswith(
        "the step counter skipped: the first resumed step is 6, expected 5")


def test_a_resumed_run_that_crashed_is_an_error_naming_its_log_and_what_it_logged_is_still_compared():
    results = _results(_run([5], **{REWARD.replace("/", "__"): {5: 0.0}}), Ended(exit_code=1), log="r/stdout.log")
    assert results[COMPLETION].status == ERROR
    assert results[COMPLETION].message == ("the resumed run: run exited with code 1 at step 5 of 7 "
                                           "(logs: r/stdout.log)")
    assert results[match_id(REWARD)].status == FAIL


def test_a_value_only_one_run_logged_differs_and_nan_equals_nan():
    resumed = _run(range(5, 8))
    series = dict(resumed.series)
    del series[LENGTH]
    series[K3] = {5: math.nan, 6: 1e-14, 7: 1e-14}
    main = dict(MAIN.series)
    main[K3] = {**main[K3], 5: math.nan}
    results = {r.check_id: r for r in resume_results(
        RESUME, Trace("m", MappingProxyType(main), MAIN.train_steps), Trace("r", MappingProxyType(series), (5, 6, 7)),
        Ended(), roles=ROLES)}
    assert match_id(K3) not in results
    assert "not logged by the resumed run at step 5" in results[match_id(LENGTH)].message


NOISE = Resume(at_step=4, steps=3, checkpoint_args=("{checkpoint_dir}",), resume_args=("{checkpoint_dir}",),
               match="noise", noise_ratio=0.5)
SIGMA = {REWARD: {s: 0.1 for s in range(1, 11)}}


def test_noise_match_passes_within_the_ratio_and_fails_beyond_it():
    near = _run(range(5, 8), **{REWARD.replace("/", "__"): {5: 0.51, 6: 0.58, 7: 0.72}})  # |d|/σ 0.1, 0.2, 0.2
    results = {r.check_id: r for r in resume_results(NOISE, MAIN, near, Ended(), roles=ROLES, noise=SIGMA)}
    assert results[MATCH].status == PASS
    assert results[MATCH].message.startswith("1 metrics within 0.5 x the calibrated noise at steps 5-7 (4 without "
                                             "calibrated noise not compared)")
    far = _run(range(5, 8), **{REWARD.replace("/", "__"): {5: 0.5, 6: 0.8, 7: 0.9}})  # 0, 2, 2: mean 1.33
    failed = {r.check_id: r for r in resume_results(NOISE, MAIN, far, Ended(), roles=ROLES, noise=SIGMA)}
    assert failed[match_id(REWARD)].status == FAIL and failed[match_id(REWARD)].first_breach_step == 6
    assert failed[match_id(REWARD)].observed == pytest.approx(4 / 3)


def test_noise_match_without_calibrated_noise_cannot_decide():
    results = {r.check_id: r for r in resume_results(NOISE, MAIN, _run(range(5, 8)), Ended(), roles=ROLES, noise={})}
    assert results[MATCH].status == ERROR and "has no calibrated noise (golden.noise)" in results[MATCH].message


def test_a_main_run_that_did_not_complete_is_not_resumed():
    assert main_run_problem(10, True, Ended(), MAIN, interrupted=False) is None
    assert main_run_problem(10, True, Ended(), MAIN, interrupted=True) == "the run was interrupted"
    assert main_run_problem(10, True, Ended(exit_code=1), _run(range(1, 4)), interrupted=False) == (
        "the main run did not complete (run exited with code 1 at step 3 of 10)")


def test_triage_names_the_resume_when_the_main_run_passed():
    resumed = _run(range(5, 8), **{LR.replace("/", "__"): {5: 1e-3}, LOSS.replace("/", "__"): {6: 3.0}})
    findings = triage(resume_results(RESUME, MAIN, resumed, Ended(), roles=ROLES))
    assert findings[0].rule == "resume" and findings[0].primary
    assert "what did not continue: the LR schedule" in findings[0].suggestion
    assert findings[0].evidence.startswith(f"resume[match:{LR}]: {LR} differs from step 5")


def test_a_resumed_run_that_crashed_is_triaged_as_resume_not_as_the_main_run_incomplete():
    results = resume_results(RESUME, MAIN, _run([5]), Ended(exit_code=1), roles=ROLES)
    findings = triage(results)
    assert [f.rule for f in findings] == ["resume"]
    assert "the resumed run did not complete: read its logs" in findings[0].suggestion


# --- the first resumed step's prompt digest tells prompt order from the sampling RNG from the weights (issue 44) ----

DIGEST = "data/prompt_digest"
DIGESTS = {s: float(1000 + s) for s in range(1, 11)}


def _with_digest(resumed: Trace) -> str:
    """What did not continue, the logs carrying a prompt digest (the uninterrupted run's: DIGESTS)."""
    main = _run(range(1, 11), **{DIGEST.replace("/", "__"): DIGESTS})
    roles = resolve_roles([*main.metrics], RESUME.roles)
    results = resume_results(RESUME, main, resumed, Ended(), roles=roles)
    return next(r for r in results if r.status == FAIL).parameters["not_continued"]


def _resumed(digest_at_5: float, k3_at_5: float) -> Trace:
    return _run(range(5, 8), **{REWARD.replace("/", "__"): {5: 0.77}, LENGTH.replace("/", "__"): {5: 9.0},
                                K3.replace("/", "__"): {5: k3_at_5},
                                DIGEST.replace("/", "__"): {**{s: DIGESTS[s] for s in range(5, 8)}, 5: digest_at_5}})


def test_other_prompts_at_the_first_resumed_step_are_the_prompt_order():
    # other samples of the same weights move k3 bitwise, within its level: no weights caveat
    verdict = _with_digest(_resumed(digest_at_5=7.0, k3_at_5=1.3e-14))
    assert verdict.startswith(f"the prompt order (the data sampler's state): step 5, the first resumed step, drew "
                              f"other prompts than the uninterrupted run ({DIGEST} differs there)")
    assert "cannot be told while the prompts differ" in verdict and "weights" not in verdict


def test_the_same_prompts_sampled_otherwise_with_the_mismatch_at_its_level_is_the_sampling_rng():
    """Claim false for the weights: k3 differs bitwise (other samples) yet stays at its level."""
    verdict = _with_digest(_resumed(digest_at_5=DIGESTS[5], k3_at_5=1.3e-14))
    assert verdict.startswith(f"the sampling RNG: step 5, the first resumed step, the same prompts as the "
                              f"uninterrupted run ({DIGEST} bitwise equal there) and sampled differently ({LENGTH})")
    assert "prompt order" not in verdict


def test_the_same_prompts_with_the_mismatch_off_its_level_are_the_rollout_weights():
    verdict = _with_digest(_resumed(digest_at_5=DIGESTS[5], k3_at_5=0.02))
    assert verdict.startswith(f"the rollout engine's weights: step 5, the first resumed step, the same prompts as the "
                              f"uninterrupted run ({DIGEST} bitwise equal there)")
    assert f"{K3} 0.02 against at most 1e-14" in verdict


def test_a_digest_without_a_mismatch_metric_names_the_sampling_rng_or_the_weights():
    roles = resolve_roles([REWARD, DIGEST])
    main = Trace("t.jsonl", MappingProxyType({REWARD: _series(range(1, 11)), DIGEST: DIGESTS}), tuple(range(1, 11)), ())
    resumed = Trace("r.jsonl", MappingProxyType({REWARD: {**_series(range(5, 8)), 5: 0.77},
                                                 DIGEST: {s: DIGESTS[s] for s in range(5, 8)}}), (5, 6, 7), ())
    results = resume_results(RESUME, main, resumed, Ended(), roles=roles)
    verdict = next(r for r in results if r.status == FAIL).parameters["not_continued"]
    assert verdict.startswith("the sampling RNG or the rollout engine's weights: step 5")
    assert "no train–inference mismatch metric was compared" in verdict
