from __future__ import annotations

import json

import pytest

from autotest.consistency.dumps import ModuleEntry
from autotest.consistency.mapping import (
    block_of,
    canonical,
    layer_index,
    load_user_mapping,
    map_modules,
)
from autotest.errors import UsageError


def entries(*keys: str) -> dict[str, ModuleEntry]:
    out = {}
    for i, key in enumerate(keys):
        kind, rest = key.split(".", 1)
        path, cls, _, idx = rest.rsplit(".", 3)
        out[key] = ModuleEntry(key=key, path=path, cls=cls, call_index=int(idx), order=i, parent=None, tensors=())
    return out


def by_train(groups):
    return {g.train_keys[0] if g.train_keys else "": g for g in groups}


def test_megatron_names_map_by_known_renames_and_fusions():
    train = entries(
        "Module.embedding.word_embeddings.VocabParallelEmbedding.forward.0",
        "Module.decoder.layers.0.self_attention.linear_qkv.ColumnParallelLinear.forward.0",
        "Module.decoder.layers.0.self_attention.linear_proj.RowParallelLinear.forward.0",
        "Module.decoder.layers.0.mlp.linear_fc1.ColumnParallelLinear.forward.0",
        "Module.decoder.layers.0.mlp.linear_fc2.RowParallelLinear.forward.0",
        "Module.decoder.layers.0.pre_mlp_layernorm.RMSNorm.forward.0",
        "Module.decoder.final_layernorm.RMSNorm.forward.0",
        "Module.output_layer.ColumnParallelLinear.forward.0",
        "Module.decoder.layers.0.mlp.router.TopKRouter.forward.0",
    )
    rollout = entries(
        "Module.model.embed_tokens.VocabParallelEmbedding.forward.0",
        "Module.model.layers.0.self_attn.qkv_proj.QKVParallelLinear.forward.0",
        "Module.model.layers.0.self_attn.o_proj.RowParallelLinear.forward.0",
        "Module.model.layers.0.mlp.gate_up_proj.MergedColumnParallelLinear.forward.0",
        "Module.model.layers.0.mlp.down_proj.RowParallelLinear.forward.0",
        "Module.model.layers.0.post_attention_layernorm.RMSNorm.forward.0",
        "Module.model.norm.RMSNorm.forward.0",
        "Module.lm_head.ParallelLMHead.forward.0",
        "Module.model.layers.0.mlp.gate.ReplicatedLinear.forward.0",
    )
    groups = by_train(map_modules(train, rollout))
    for train_key, rollout_path in [
        ("Module.embedding.word_embeddings.VocabParallelEmbedding.forward.0", "model.embed_tokens"),
        (
            "Module.decoder.layers.0.self_attention.linear_qkv.ColumnParallelLinear.forward.0",
            "model.layers.0.self_attn.qkv_proj",
        ),
        (
            "Module.decoder.layers.0.self_attention.linear_proj.RowParallelLinear.forward.0",
            "model.layers.0.self_attn.o_proj",
        ),
        ("Module.decoder.layers.0.mlp.linear_fc1.ColumnParallelLinear.forward.0", "model.layers.0.mlp.gate_up_proj"),
        ("Module.decoder.layers.0.mlp.linear_fc2.RowParallelLinear.forward.0", "model.layers.0.mlp.down_proj"),
        ("Module.decoder.layers.0.pre_mlp_layernorm.RMSNorm.forward.0", "model.layers.0.post_attention_layernorm"),
        ("Module.decoder.final_layernorm.RMSNorm.forward.0", "model.norm"),
        ("Module.output_layer.ColumnParallelLinear.forward.0", "lm_head"),
    ]:
        g = groups[train_key]
        assert g.kind == "rename" and g.cardinality == "1:1" and g.confidence == "medium", train_key
        assert g.rollout_keys[0].startswith(f"Module.{rollout_path}."), train_key
    # Megatron's linear_qkv interleaves q/k/v per query group: no elementwise comparison against [q | k | v]
    qkv = groups["Module.decoder.layers.0.self_attention.linear_qkv.ColumnParallelLinear.forward.0"]
    assert not qkv.elementwise and "interleaves" in qkv.notes[1]
    assert groups["Module.decoder.layers.0.mlp.linear_fc1.ColumnParallelLinear.forward.0"].elementwise
    router = groups["Module.decoder.layers.0.mlp.router.TopKRouter.forward.0"]
    assert router.cardinality == "1:0" and router.kind == "train_only"
    assert groups[""].cardinality == "0:1" and "mlp.gate." in groups[""].rollout_keys[0]


def test_unfused_training_modules_map_onto_a_fused_rollout_module_and_back():
    q, k, v = (f"Module.model.layers.0.self_attn.{p}_proj.Linear.forward.0" for p in "qkv")
    gate, up = (f"Module.model.layers.0.mlp.{p}_proj.Linear.forward.0" for p in ("gate", "up"))
    qkv = "Module.model.layers.0.self_attn.qkv_proj.QKVParallelLinear.forward.0"
    gate_up = "Module.model.layers.0.mlp.gate_up_proj.MergedColumnParallelLinear.forward.0"
    groups = map_modules(entries(q, k, v, gate, up), entries(qkv, gate_up))
    assert [(g.train_keys, g.rollout_keys, g.cardinality, g.kind) for g in groups] == [
        ((q, k, v), (qkv,), "N:1", "fused"),
        ((gate, up), (gate_up,), "N:1", "fused"),
    ]
    assert [g.layout for g in groups] == [("q_proj", "k_proj", "v_proj"), ("gate_proj", "up_proj")]
    shuffled = map_modules(entries(v, q, k), entries(qkv))  # parts sorted into the fused layout's order
    assert shuffled[0].train_keys == (q, k, v)
    back = map_modules(entries(qkv), entries(q, k, v))
    assert [(g.train_keys, g.rollout_keys, g.cardinality) for g in back] == [((qkv,), (q, k, v), "1:N")]
    megatron = map_modules(
        entries("Module.decoder.layers.0.mlp.linear_fc1.ColumnParallelLinear.forward.0"), entries(gate, up)
    )
    assert [(g.rollout_keys, g.cardinality, g.kind) for g in megatron] == [((gate, up), "1:N", "fused")]
    partial = map_modules(entries(q, k), entries(qkv))
    assert partial[0].confidence == "low" and "only" in partial[0].notes[1]


def test_engine_classes_at_the_same_path_map_with_high_confidence():
    train = entries("Module.model.layers.0.self_attn.o_proj.Linear.forward.0",
                    "Module.model.norm.Qwen3RMSNorm.forward.0", "Module.model.embed_tokens.Embedding.forward.0",
                    "Module.model.layers.0.mlp.act_fn.SiLUActivation.forward.0")
    rollout = entries("Module.model.layers.0.self_attn.o_proj.RowParallelLinear.forward.0",
                      "Module.model.norm.RMSNorm.forward.0",
                      "Module.model.embed_tokens.VocabParallelEmbedding.forward.0",
                      "Module.model.layers.0.mlp.act_fn.ReLU.forward.0")
    kinds = [(g.kind, g.confidence) for g in map_modules(train, rollout)]
    assert kinds == [("engine_class", "high")] * 3 + [("class_differs", "medium")]


def test_user_mapping_file_takes_precedence(tmp_path):
    train = entries("Module.net.blocks.3.ffn.Linear.forward.0", "Module.net.head.Linear.forward.0")
    rollout = entries("Module.model.layers.3.mlp.Linear.forward.0", "Module.lm_head.Linear.forward.0")
    yaml_file = tmp_path / "map.yaml"
    yaml_file.write_text(
        "rules:\n  - train: 'net\\.blocks\\.(\\d+)\\.ffn'\n    rollout: 'model.layers.\\1.mlp'\n"
        "modules:\n  net.head: lm_head\n"
    )
    groups = map_modules(train, rollout, load_user_mapping(yaml_file))
    assert [(g.kind, g.rollout_keys, g.confidence) for g in groups] == [
        ("user", ("Module.model.layers.3.mlp.Linear.forward.0",), "high"),
        ("user", ("Module.lm_head.Linear.forward.0",), "high"),
    ]
    json_file = tmp_path / "map.json"
    json_file.write_text(json.dumps({"modules": {"net.head": ["lm_head", "missing_head"]}}))
    g = by_train(map_modules(train, rollout, load_user_mapping(json_file)))["Module.net.head.Linear.forward.0"]
    assert g.confidence == "low" and "missing_head" in g.notes[1]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[1, 2]", "expected an object with 'rules' and/or 'modules'"),
        ("rules:\n  - train: x\n", "key 'rules.0': needs 'train'"),
        ("rules:\n  - train: '('\n    rollout: y\n", "key 'rules.0.train': invalid regex"),
        ("modules:\n  a: 3\n", "key 'modules.a': must be a module path"),
        ("rules: [\n", "fix the YAML syntax"),
    ],
)
def test_user_mapping_mistakes_name_file_and_key(tmp_path, text, message):
    path = tmp_path / "m.yaml"
    path.write_text(text)
    with pytest.raises(UsageError, match=r"m.yaml(:\d+)?: ") as info:
        load_user_mapping(path)
    assert message in str(info.value)


def test_labels():
    assert canonical("decoder.layers.2.self_attention.linear_qkv") == "model.layers.2.self_attn.qkv_proj"
    assert layer_index("Module.model.layers.12.mlp.Linear.forward.0") == 12 and layer_index("lm_head") is None
    assert [
        block_of(p)
        for p in (
            "model.embed_tokens",
            "lm_head",
            "model.layers.0.input_layernorm",
            "model.layers.0.self_attn.q_proj",
            "model.layers.0.mlp.up_proj",
            "model.layers.0",
            "model",
        )
    ] == ["embed", "head", "norm", "attn", "mlp", "layer", "model"]
