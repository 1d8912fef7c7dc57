"""A side's declared layout, and the role (and split dims) each module's name or class gives it."""

from __future__ import annotations

import pytest

from autotest.consistency.layout import SideLayout, module_role, parse_layout, split_dim
from autotest.errors import UsageError


def test_a_layout_reads_its_degrees_heads_and_partial_globs() -> None:
    layout = parse_layout("tp=4, pp=2,kv_heads=2,partial=*.o_proj|*.down_proj", "--rollout-layout")
    assert (layout.tp, layout.pp, layout.kv_heads, layout.heads) == (4, 2, 2, None)
    assert layout.is_partial("model.layers.3.self_attn.o_proj") and not layout.is_partial("model.norm")
    assert layout.declared and layout.text() == "tp=4,pp=2,kv_heads=2,partial=*.o_proj|*.down_proj"
    assert not parse_layout(None, "x").declared and SideLayout().text() == "inferred"
    for fits in ("tp=2,heads=4,kv_heads=2", "tp=4,heads=8,kv_heads=2", "tp=2,heads=8,kv_heads=8", "heads=3"):
        assert parse_layout(fits, "--rollout-layout").text() == fits


@pytest.mark.parametrize(("text", "says"), [
    ("tp4", "is not one of tp=..."),
    ("dp=2", "'dp=2' is not one of"),
    ("tp=0", "tp='0' is not a whole number >= 1"),
    ("tp=two", "tp='two' is not a whole number"),
    ("tp=2,tp=4", "tp is given twice"),
    ("tp=2,partial=", "partial='' names no module"),
    ("tp=2,heads=3,kv_heads=5", "tp=2,heads=3,kv_heads=5: heads=3 is not a multiple of tp=2"),
    ("tp=1,heads=4,kv_heads=8", "kv_heads=8 is above heads=4"),
    ("heads=6,kv_heads=4", "heads=6 is not a multiple of kv_heads=4"),
    ("tp=4,heads=12,kv_heads=6", "kv_heads=6 can be neither split over tp=4 ranks"),
    ("tp=4,kv_heads=6", "kv_heads=6 can be neither split over tp=4 ranks"),
])
def test_a_bad_layout_is_one_line_naming_the_flag(text: str, says: str) -> None:
    with pytest.raises(UsageError) as err:
        parse_layout(text, "--train-layout")
    assert str(err.value).startswith("--train-layout: ") and says in str(err.value) and "\n" not in str(err.value)


@pytest.mark.parametrize(("path", "cls", "role"), [
    ("model.layers.0.self_attn.qkv_proj", "QKVParallelLinear", "column"),
    ("model.layers.0.self_attn.q_proj", "Linear", "column"),
    ("decoder.layers.0.self_attention.linear_qkv", "ColumnParallelLinear", "column"),
    ("lm_head", "ParallelLMHead", "column"),
    ("model.layers.0.mlp.down_proj", "Linear", "row"),
    ("decoder.layers.0.mlp.linear_fc2", "RowParallelLinear", "row"),
    ("model.layers.0.some_proj", "RowParallelLinear", "row"),
    ("model.embed_tokens", "Embedding", "vocab"),
    ("model.layers.0.self_attn.k_norm", "RMSNorm", "heads"),
    ("model.layers.0.mlp.act_fn", "SiLU", "activation"),
    ("model.layers.0.input_layernorm", "RMSNorm", "replicated"),
    ("model.layers.0.self_attn", "Qwen3Attention", "replicated"),
])
def test_a_module_role_comes_from_its_class_or_its_name(path: str, cls: str, role: str) -> None:
    assert module_role(path, cls) == role


def test_split_dims_follow_the_role() -> None:
    assert split_dim("column", "output", "output.0", 3) == 2
    assert split_dim("column", "parameter", "parameters.weight", 2) == 0
    assert split_dim("column", "input", "input_args.0", 3) is None
    assert split_dim("row", "input", "input_args.0", 3) == 2
    assert split_dim("row", "parameter", "parameters.weight", 2) == 1
    assert split_dim("row", "parameter", "parameters.bias", 1) is None  # added once, after the reduce
    assert split_dim("row", "output", "output.0", 3) is None
    assert split_dim("vocab", "parameter", "parameters.weight", 2) == 0
    assert split_dim("heads", "output", "output.0", 4) == 2
    assert split_dim("replicated", "output", "output.0", 3) is None
