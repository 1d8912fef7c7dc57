"""Performance gates judged against the machine: every row of judge.performance's decision table."""

from __future__ import annotations

import pytest

from autotest.inputs.baseline_model import CheckSpec
from autotest.inputs.performance_policy import PerformancePolicy
from autotest.judge.checks import run_checks
from autotest.judge.model import ENVIRONMENT, ERROR, FAIL, PASS, Verdict, decide_status
from autotest.judge.performance import MachineContext, assess, judge_performance, waited_per_step
from autotest.run.contention import ContentionRecord, Sample
from tests.unit.judge.test_checks import baseline, trace

STEPS = range(1, 21)
TIME = CheckSpec(metric="time/step", method="slowdown", operator="<", threshold=1.0, scope="percentile",
                 percentile=50)
REWARD = CheckSpec(metric="response/rewards/mean", method="absolute", operator="<", threshold=0.1, scope="stepwise")


def record(step_s: float, wait_share_of_wall: float, *, threads: int = 1, before: dict | None = None) -> ContentionRecord:
    """A run whose steps of ``step_s`` wall seconds each spend ``wait_share_of_wall`` of it waiting for a CPU."""
    end = step_s * len(STEPS)
    samples = tuple(Sample(t / 2, cpu_s=threads * (t / 2) * (1 - wait_share_of_wall),
                           delay_s=threads * (t / 2) * wait_share_of_wall, threads=threads, others_cpu_share=None,
                           load_per_core=None) for t in range(int(end * 2) + 2))
    return ContentionRecord(before=before or {}, samples=samples, step_seen_at={s: s * step_s + 0.01 for s in STEPS})


def judged(step_s: float, rec: ContentionRecord | None, policy: PerformancePolicy = PerformancePolicy(),
           reward_shift: float = 0.0):
    b = baseline(TIME, REWARD)
    golden = trace({"time/step": {s: 0.5 for s in STEPS}, "response/rewards/mean": {s: 0.5 for s in STEPS}})
    current = trace({"time/step": {s: step_s for s in STEPS},
                     "response/rewards/mean": {s: 0.5 + reward_shift for s in STEPS}})
    results = run_checks(b, golden, current, True)
    out = judge_performance(results, b, golden, current, MachineContext(policy, rec))
    return {r.metric: r for r in out}


def test_a_quiet_machine_passes_a_clean_run_and_fails_a_slow_one():
    assert judged(0.5, record(0.5, 0.0))["time/step"].status == PASS
    slow = judged(2.5, record(2.5, 0.0))["time/step"]
    assert slow.status == FAIL and "p50 of per-step slowdown" in slow.message


def test_a_clean_run_slowed_by_a_busy_runner_is_an_environment_outcome_not_a_fail():
    # 2.0 s steps of which 1.5 s waiting for a CPU: 0.5 s of work, the golden's
    r = judged(2.0, record(2.0, 0.75))["time/step"]
    assert r.status == ERROR and r.cause == ENVIRONMENT and r.is_environment
    assert r.message.startswith("environment: time/step: p50 of per-step slowdown over 20 steps is 1.5")
    assert "waited for a CPU 75% of its runnable time" in r.message and "exit 75" in r.message
    assert r.parameters["machine"]["removed_wait_s_per_step"] == pytest.approx(1.5)
    verdict = Verdict(decide_status([r]), "c", (r,))
    assert verdict.status == ERROR and verdict.environment_only and verdict.deciding_kind() == ENVIRONMENT


def test_a_real_slowdown_under_load_still_fails():
    # slow-step on a busy runner: 1.5 s of sleep per step stays once the 1.5 s wait for a CPU is removed
    r = judged(3.5, record(3.5, 1.5 / 3.5))["time/step"]
    assert r.status == FAIL and r.cause == ""
    assert "with the 1.5 s per step the run waited for a CPU removed it still fails" in r.message


def test_a_small_wait_under_budget_decides_on_the_adjusted_step_time():
    # a 70% wait is over the default 15% budget: environment; under a budget that allows it, the gate is
    # decided on the step time less that wait
    r = judged(1.6, record(1.6, 0.7))["time/step"]
    assert r.status == ERROR
    r = judged(1.6, record(1.6, 0.7), PerformancePolicy(budget=_budget(run_delay_share=0.9)))["time/step"]
    assert r.status == PASS and "as logged:" in r.message


def _budget(**kw):
    from autotest.inputs.performance_policy import ContentionBudget

    return ContentionBudget(**kw)


def test_two_busy_threads_lose_half_their_summed_wait():
    rec = record(2.0, 0.5, threads=2)
    waited = waited_per_step({s: 2.0 for s in STEPS}, rec.step_seen_at, rec.samples)
    assert waited[10] == pytest.approx(1.0)  # 2 thread-s waited over 2 s of 2 runnable threads: 1 s of wall


def test_without_per_step_samples_over_budget_is_environment_and_under_budget_the_raw_verdict():
    busy_probe = {"probe": {"device": "cpu", "cpu_s": 0.1, "wall_s": 0.4}}
    r = judged(2.0, ContentionRecord(before=busy_probe))["time/step"]
    assert r.status == ERROR and r.cause == ENVIRONMENT and "not measured per step" in r.message
    assert judged(2.0, ContentionRecord())["time/step"].status == FAIL
    assert judged(2.0, None)["time/step"].status == FAIL


def test_raw_normalisation_judges_the_logged_step_time():
    rec = record(2.0, 0.75)
    r = judged(2.0, rec, PerformancePolicy(normalise="raw"))["time/step"]
    assert r.status == ERROR and r.cause == ENVIRONMENT  # still over budget: never a FAIL the machine explains
    quiet = record(2.0, 0.05)
    assert judged(2.0, quiet, PerformancePolicy(normalise="raw"))["time/step"].status == FAIL


def test_accuracy_gates_never_move_with_load():
    quiet = judged(0.5, record(0.5, 0.0), reward_shift=0.2)["response/rewards/mean"]
    busy = judged(2.0, record(2.0, 0.9), reward_shift=0.2)["response/rewards/mean"]
    assert quiet == busy and busy.status == FAIL


def test_non_blocking_performance_gates_keep_their_status_and_never_decide_the_run():
    out = judged(2.5, record(2.5, 0.0), PerformancePolicy(blocking=False))
    r = out["time/step"]
    assert r.status == FAIL and not r.blocking and not r.is_gate and "non-blocking" in r.message
    assert decide_status(list(out.values())) == PASS


def test_gpu_contention_counts_against_the_budget():
    gpu = {"gpu": {"gpus": [{"index": 0, "slowing_throttle_reasons": ["hw_thermal"]}],
                   "other_processes": [{"gpu_uuid": "GPU-1", "pid": 99, "memory_mib": 2048.0}]}}
    over = assess(ContentionRecord(before=gpu), PerformancePolicy().budget).over
    assert over == ("1 other process(es) on the case's GPUs before the run (2048 MiB)",
                    "GPU throttled (hw_thermal) before the run")
    assert assess(ContentionRecord(before=gpu), _budget(gpu_other_processes=1, gpu_throttle=False)).over == ()


def test_the_probe_scales_step_times_to_the_calibration_machine():
    # this machine's probe takes twice the calibration machine's CPU time: 1.6 s steps are 0.8 s there
    rec = ContentionRecord(before={"probe": {"device": "cpu", "cpu_s": 0.2, "wall_s": 0.2}},
                           samples=record(1.6, 0.0).samples, step_seen_at=record(1.6, 0.0).step_seen_at)
    b = baseline(TIME)
    golden, current = trace({"time/step": {s: 0.5 for s in STEPS}}), trace({"time/step": {s: 1.6 for s in STEPS}})
    results = run_checks(b, golden, current, True)
    assert results[0].status == FAIL
    ctx = MachineContext(PerformancePolicy(), rec, {"device": "cpu", "cpu_s": 0.1})
    r = judge_performance(results, b, golden, current, ctx)[0]
    assert r.status == PASS and "scaled by the machine probe (2.00 x" in r.message
