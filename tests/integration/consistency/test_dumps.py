from __future__ import annotations

import shutil

import pytest

from autotest.consistency.dumps import find_dump_dirs, load_tensor, read_dump
from autotest.errors import UsageError


def test_real_dump_entries_in_completion_order(scenario_runs):
    dump = read_dump(scenario_runs["healthy_fp32"].actor_dump / "forward_0000")
    keys = list(dump.entries)
    assert dump.task == "statistics" and dump.level == "L0" and len(keys) == 35
    # children finish before their parents
    assert keys.index("Module.model.layers.0.mlp.down_proj.Linear.forward.0") < keys.index(
        "Module.model.layers.0.mlp.Qwen3MLP.forward.0"
    )
    assert keys.index("Module.model.layers.1.Qwen3DecoderLayer.forward.0") < keys.index(
        "Module.model.Qwen3Model.forward.0"
    )
    down = dump.entries["Module.model.layers.0.mlp.down_proj.Linear.forward.0"]
    assert down.parent == "Module.model.layers.0.mlp.Qwen3MLP.forward.0"
    assert [t.path for t in down.tensors] == ["input_args.0", "output.0", "parameters.weight"]
    weight = down.component("parameter")[0]
    assert weight.shape == (64, 128) and weight.dtype == "torch.float32" and weight.data_file is None
    assert set(weight.stats) == {"Max", "Min", "Mean", "Norm"} and weight.stats["Norm"] > 0
    # nested outputs and keyword inputs are flattened; integer tensors have no Mean/Norm
    model = dump.entries["Module.model.Qwen3Model.forward.0"]
    assert [t.path for t in model.component("output")] == ["output.0.last_hidden_state"]
    ids = next(t for t in model.tensors if t.path == "input_kwargs.input_ids")
    assert ids.dtype == "torch.int64" and ids.stats["Mean"] is None
    attn = dump.entries["Module.model.layers.0.self_attn.Qwen3Attention.forward.0"]
    assert "input_kwargs.position_embeddings.1" in {t.path for t in attn.tensors}


def test_tensor_dump_resolves_tensor_files_next_to_dump_json(scenario_runs, tmp_path):
    moved = tmp_path / "moved"
    shutil.copytree(scenario_runs["mlp_unsynced_tensor"].actor_dump / "forward_0000", moved)
    dump = read_dump(moved)
    down = dump.entries["Module.model.layers.1.mlp.down_proj.Linear.forward.0"]
    out = down.component("output")[0]
    assert out.data_file.parent == dump.root / "dump_tensor_data"
    tensor = load_tensor(out)
    assert tuple(tensor.shape) == out.shape
    assert float(tensor.max()) == pytest.approx(out.stats["Max"], rel=1e-6)


def test_read_dump_errors(scenario_runs, tmp_path):
    with pytest.raises(UsageError, match="does not exist"):
        read_dump(tmp_path / "nope")
    with pytest.raises(UsageError, match="no dump.json"):
        read_dump(tmp_path)
    with pytest.raises(UsageError, match="2 dump.json folders"):
        read_dump(scenario_runs["healthy_fp32"].actor_dump)
    assert len(find_dump_dirs(scenario_runs["healthy_fp32"].actor_dump)) == 2
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "dump.json").write_text('{"task": "statistics", "data": {')
    with pytest.raises(UsageError, match="not valid JSON"):
        read_dump(bad)
