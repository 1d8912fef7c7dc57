from __future__ import annotations

from autotest.consistency.verdict import localisation


def test_localisation_is_the_deepest_common_module():
    assert localisation(["model.layers.1.mlp.gate_proj", "model.layers.1.mlp.down_proj"]) == "model.layers.1.mlp"
    assert localisation(["model.layers.1.mlp.gate_proj"]) == "model.layers.1.mlp.gate_proj"
    assert localisation(["model.layers.1.mlp", "lm_head"]) == "(whole model)"
