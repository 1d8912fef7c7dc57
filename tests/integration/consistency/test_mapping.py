from __future__ import annotations

from autotest.consistency.dumps import read_dump
from autotest.consistency.mapping import map_modules
from tests.unit.consistency.test_mapping import by_train


def test_identical_models_map_one_to_one_exactly(scenario_runs):
    run = scenario_runs["healthy_fp32"]
    actor = read_dump(run.actor_dump / "forward_0000").entries
    rollout = read_dump(run.rollout_dump / "forward_0000").entries
    groups = map_modules(actor, rollout)
    assert len(groups) == len(actor) == 35
    assert {(g.kind, g.cardinality, g.confidence) for g in groups} == {("exact", "1:1", "high")}
    assert [g.train_keys[0] for g in groups] == list(actor)  # completion order kept


def test_a_different_class_at_the_same_path_maps_with_a_note(scenario_runs):
    run = scenario_runs["activation"]
    groups = map_modules(
        read_dump(run.actor_dump / "forward_0000").entries, read_dump(run.rollout_dump / "forward_0000").entries
    )
    g = by_train(groups)["Module.model.layers.0.mlp.act_fn.SiLUActivation.forward.0"]
    assert g.rollout_keys == ("Module.model.layers.0.mlp.act_fn.GELUActivation.forward.0",)
    assert g.kind == "class_differs" and g.confidence == "medium" and "SiLUActivation" in g.notes[0]
