from __future__ import annotations

from autotest.consistency.classify import classify_modules, find_boundary
from autotest.consistency.correlation import read_correlation_log
from autotest.consistency.dumps import read_dump
from autotest.consistency.mapping import map_modules
from autotest.consistency.pairing import CannotConclude, pair_forwards
from autotest.consistency.value_compare import compare_group
from autotest.consistency.verdict import hypothesis_for, judge


def _judge_inputs(run):
    pairs = pair_forwards(
        read_correlation_log(run.rollout_log, "rollout"),
        read_correlation_log(run.actor_log, "actor"),
        run.rollout_dump,
        run.actor_dump,
    ).pairs
    analyses, boundaries, conf = {}, {}, {}
    for pair in pairs:
        actor, rollout = read_dump(pair.actor_dump).entries, read_dump(pair.rollout_dump).entries
        compares = [compare_group(g, actor, rollout) for g in map_modules(actor, rollout)]
        analyses[pair.pair_id] = classify_modules(compares)
        boundaries[pair.pair_id] = find_boundary(analyses[pair.pair_id])
        conf.update({c.module_path: c.group.confidence for c in compares})
    return pairs, analyses, boundaries, conf


def test_confidence_follows_evidence_and_pairing(scenario_runs):
    pairs, analyses, boundaries, conf = _judge_inputs(scenario_runs["mlp_unsynced_tensor"])
    verdict, confidence, module, pair, notes = judge(pairs, analyses, boundaries, [], conf)
    assert (verdict, confidence, module.module_path, notes) == (
        "root_cause_found",
        "high",
        "model.layers.1.mlp.gate_proj",
        [],
    )
    issue = CannotConclude("unpaired_samples", "one request had no actor forward")
    assert judge(pairs, analyses, boundaries, [issue], conf)[1] == "low"
    # one of two pairs without a boundary: the disagreement is a note and costs confidence
    split = dict(boundaries)
    split[pairs[1].pair_id] = None
    verdict, confidence, _, _, notes = judge(pairs, analyses, split, [], conf)
    assert confidence == "medium" and notes == [
        "1 of 2 forward pairs place the first divergence at model.layers.1.mlp.gate_proj"
    ]
    assert judge((), {}, {}, [issue], {})[0] == "cannot_conclude"


def test_hypothesis_names_both_paths(scenario_runs):
    pairs, analyses, boundaries, _ = _judge_inputs(scenario_runs["rmsnorm_eps"])
    hypothesis = hypothesis_for(boundaries[pairs[0].pair_id].module)
    assert "Qwen3RMSNorm" in hypothesis["expected_train_path"]
    assert "inference implementation of model.layers.1.post_attention_layernorm" in hypothesis["inference_path"]
