from __future__ import annotations

import pytest

from autotest.consistency.dumps import read_dump
from autotest.consistency.mapping import map_modules
from autotest.consistency.value_compare import compare_group


def test_elementwise_metrics_from_real_tensor_dumps(scenario_runs):
    run = scenario_runs["mlp_unsynced_tensor"]
    actor = read_dump(run.actor_dump / "forward_0000").entries
    rollout = read_dump(run.rollout_dump / "forward_0000").entries
    compares = {g.train_keys[0]: compare_group(g, actor, rollout) for g in map_modules(actor, rollout)}
    norm = compares["Module.model.layers.1.post_attention_layernorm.Qwen3RMSNorm.forward.0"]
    for t in norm.tensors:
        assert (
            t.evidence == "tensor"
            and t.tensor.cosine == pytest.approx(1.0)
            and t.tensor.rel_err == 0
            and t.status == "ok"
        )
    down = compares["Module.model.layers.1.mlp.down_proj.Linear.forward.0"]
    weight = next(t for t in down.tensors if t.component == "parameter")
    assert weight.tensor.status == "alert" and weight.tensor.rel_err > 1e-2 and weight.tensor.max_abs_err > 0
    assert weight.priority == 1 and down.evidence() == "tensor"
