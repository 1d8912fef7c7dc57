from __future__ import annotations

from autotest.consistency.dumps import parse_key


def test_parse_key():
    assert parse_key("Module.model.layers.0.mlp.down_proj.Linear.forward.0") == (
        "model.layers.0.mlp.down_proj",
        "Linear",
        "forward",
        0,
    )
    assert parse_key("Module.lm_head.Linear.backward.3") == ("lm_head", "Linear", "backward", 3)
    assert parse_key("Torch.matmul.0.forward") is None
