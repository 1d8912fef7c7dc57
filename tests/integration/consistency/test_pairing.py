from __future__ import annotations

import dataclasses

from autotest.consistency.correlation import read_correlation_log
from autotest.consistency.pairing import pair_forwards


def logs(run):
    return read_correlation_log(run.rollout_log, "rollout"), read_correlation_log(run.actor_log, "actor")


def test_real_logs_pair_forward_by_forward(scenario_runs):
    run = scenario_runs["healthy_fp32"]
    rollout, actor = logs(run)
    result = pair_forwards(rollout, actor, run.rollout_dump, run.actor_dump)
    assert result.issues == ()
    assert [p.request_ids for p in result.pairs] == [("s2-p0-r0", "s2-p0-r1"), ("s2-p1-r0", "s2-p1-r1")]
    assert result.pairs[0].pair_id == "step2:actor0000~rollout0000"
    assert result.pairs[1].actor_dump == run.actor_dump / result.pairs[1].actor.dump_subdir
    assert result.pairs[1].actor.dump_subdir.startswith("forward_0001/step2/proc")
    assert result.num_requests == {"rollout": 4, "actor": 4}


def test_each_problem_is_typed_with_evidence(scenario_runs):
    run = scenario_runs["healthy_fp32"]
    rollout, actor = logs(run)
    a0, a1 = actor
    cases = {
        "unpaired_samples": (rollout, (dataclasses.replace(a0, request_ids=("x", "y")), a1)),
        "token_ids_differ": (
            rollout,
            (dataclasses.replace(a0, token_ids=(a0.token_ids[0][:-1] + (15,), a0.token_ids[1])), a1),
        ),
        "weight_version_mismatch": (rollout, (dataclasses.replace(a0, weight_version=99), a1)),
        "missing_dump_side": (rollout, (dataclasses.replace(a0, dump_subdir="gone", dump_path="/gone"), a1)),
    }
    for reason, (r, a) in cases.items():
        result = pair_forwards(r, a, run.rollout_dump, run.actor_dump)
        reasons = [i.reason for i in result.issues]
        # the broken forward is dropped, the other still pairs
        assert reason in reasons, reason
        assert len(result.pairs) == 1 and result.pairs[0].actor.forward_index == 1
        issue = next(i for i in result.issues if i.reason == reason)
        assert issue.evidence and issue.to_dict()["summary"]
    token_issue = pair_forwards(rollout, cases["token_ids_differ"][1], run.rollout_dump, run.actor_dump).issues[0]
    assert "s2-p0-r0 at token 9" in token_issue.detail


def test_different_batch_composition_is_not_paired(scenario_runs):
    run = scenario_runs["healthy_fp32"]
    rollout, actor = logs(run)
    merged = dataclasses.replace(
        rollout[0],
        request_ids=rollout[0].request_ids + rollout[1].request_ids,
        token_ids=rollout[0].token_ids + rollout[1].token_ids,
    )
    result = pair_forwards((merged,), actor, run.rollout_dump, run.actor_dump)
    assert result.pairs == ()
    assert {i.reason for i in result.issues} == {"unpaired_samples"}
    assert "same samples in the same order" in result.issues[0].detail


def test_rollout_only_requests_are_reported(scenario_runs):
    run = scenario_runs["healthy_fp32"]
    rollout, actor = logs(run)
    result = pair_forwards(rollout, actor[:1], run.rollout_dump, run.actor_dump)
    assert len(result.pairs) == 1
    (issue,) = result.issues
    assert issue.reason == "unpaired_samples" and "s2-p1-r0" in issue.detail and "no actor forward" in issue.detail
