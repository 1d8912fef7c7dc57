from __future__ import annotations

from autotest.consistency.classify import classify_modules, find_boundary
from autotest.consistency.dumps import read_dump
from autotest.consistency.mapping import map_modules
from autotest.consistency.value_compare import compare_group


def real_analysis(run):
    actor = read_dump(run.actor_dump / "forward_0000").entries
    rollout = read_dump(run.rollout_dump / "forward_0000").entries
    compares = [compare_group(g, actor, rollout) for g in map_modules(actor, rollout)]
    return classify_modules(compares)


def buckets(analyses):
    return {a.module_path: a.bucket for a in analyses}


def test_rmsnorm_change_is_impl_and_everything_after_is_propagation(scenario_runs):
    analyses = real_analysis(scenario_runs["rmsnorm_eps"])
    b = buckets(analyses)
    assert b["model.layers.1.post_attention_layernorm"] == "module_impl_mismatch"
    assert {b[p] for p in b if p.startswith("model.layers.0")} == {"normal_aligned"}
    for later in ("model.layers.1.mlp.gate_proj", "model.layers.1.mlp", "model.layers.1"):
        assert b[later] == "upstream_propagation_or_amplification", later
    # after the final norm the difference may shrink back under the threshold; never a suspect
    assert not any(a.credible for a in analyses if a.module_path in ("model.norm", "lm_head", "model"))
    by_path = {a.module_path: a for a in analyses}
    assert by_path["model.layers.1"].explained_by == "model.layers.1.post_attention_layernorm"  # its child
    boundary = find_boundary(analyses)
    assert boundary.module.module_path == "model.layers.1.post_attention_layernorm"
    assert boundary.previous_aligned.module_path == "model.layers.1.self_attn"
    assert [s.module_path for s in boundary.suspects] == ["model.layers.1.post_attention_layernorm"]


def test_parent_code_between_children_is_the_boundary(scenario_runs):
    analyses = real_analysis(scenario_runs["attention_scaling"])
    by_path = {a.module_path: a for a in analyses}
    assert by_path["model.layers.0.self_attn.o_proj"].bucket == "upstream_propagation_or_amplification"
    assert by_path["model.layers.0.self_attn.o_proj"].explained_by == "model.layers.0.self_attn"
    assert by_path["model.layers.0.self_attn"].bucket == "module_impl_mismatch"
    boundary = find_boundary(analyses)
    assert boundary.module.module_path == "model.layers.0.self_attn"
    assert analyses[boundary.entry_order].module_path == "model.layers.0.self_attn.o_proj"
    assert boundary.previous_aligned.module_path == "model.layers.0.self_attn.v_proj"


def test_healthy_bf16_has_no_boundary(scenario_runs):
    analyses = real_analysis(scenario_runs["bf16"])
    assert set(buckets(analyses).values()) == {"normal_aligned"}
    assert find_boundary(analyses) is None


# Synthetic modules with given input/output/parameter differences (statistics of real tensors).
