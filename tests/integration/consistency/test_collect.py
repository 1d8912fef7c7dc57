"""The observer with real MSProbe: both sides in one process, separate folders, window only."""

from __future__ import annotations

import json

import pytest

from autotest.consistency.collect import make_observer
from autotest.consistency.dumps import find_dump_dirs, read_dump

from .scenarios import WINDOW_STEP, tiny_models


def test_each_side_dumps_each_window_forward_into_its_own_folder(scenario_runs):
    run = scenario_runs["healthy_fp32"]
    for dump_root in (run.rollout_dump, run.actor_dump):
        dirs = find_dump_dirs(dump_root)
        # two window forwards per side; the step before the window dumped nothing
        assert [d.relative_to(dump_root).parts[:2] for d in dirs] == [
            ("forward_0000", f"step{WINDOW_STEP}"),
            ("forward_0001", f"step{WINDOW_STEP}"),
        ]
        assert all(d.name.startswith("proc") for d in dirs)
        for d in dirs:
            dump = read_dump(d)
            # the call index restarts for every forward: each folder holds exactly one forward
            assert {e.call_index for e in dump.entries.values()} == {0}
            assert "Module.model.layers.1.mlp.down_proj.Linear.forward.0" in dump.entries


def test_correlation_lines_have_the_reference_shapes_and_point_at_the_dumps(scenario_runs):
    run = scenario_runs["healthy_fp32"]
    rollout = [json.loads(line) for line in run.rollout_log.read_text().splitlines()]
    actor = [json.loads(line) for line in run.actor_log.read_text().splitlines()]
    assert len(rollout) == len(actor) == 2
    r0, a0 = rollout[0], actor[0]
    assert r0["source"] == "dispatch_logger" and r0["phase"] == "prefill"
    assert a0["source"] == "update_actor" and a0["phase"] == "recompute_logprob"
    for line in (r0, a0):
        assert line["step"] == line["msprobe_step"] == WINDOW_STEP == line["weight_version"]
        assert isinstance(line["pid"], int) and line["rank"] is None
        assert (run.root / line["side"] / "dump" / line["dump_subdir"] / "dump.json").is_file()
        assert line["dump_path"].endswith(line["dump_subdir"])
    assert [q["request_id"] for q in r0["requests"]] == a0["request_ids"] == ["s2-p0-r0", "s2-p0-r1"]
    assert [q["tokens"] for q in r0["requests"]] == a0["token_ids"]
    assert [q["token_range"] for q in r0["requests"]] == a0["token_ranges"] == [[0, 10], [10, 20]]
    assert r0["requests"][1]["batch_index"] == 1 and r0["requests"][0]["type"] == "prefill"


def test_manifest_records_what_was_collected(scenario_runs):
    run = scenario_runs["healthy_fp32"]
    (manifest,) = run.root.glob("collection_*.json")
    doc = json.loads(manifest.read_text())
    assert doc["closed"] is True and doc["window_step"] == WINDOW_STEP
    assert {s: v["forwards"] for s, v in doc["sides"].items()} == {"rollout": 2, "actor": 2}


def test_tensor_task_dumps_only_the_listed_modules_with_tensor_files(scenario_runs):
    run = scenario_runs["mlp_unsynced_tensor"]
    dump = read_dump(find_dump_dirs(run.actor_dump)[0])
    paths = {e.path for e in dump.entries.values()}
    assert paths == {
        "model.layers.1.post_attention_layernorm",
        "model.layers.1.mlp.gate_proj",
        "model.layers.1.mlp.act_fn",
        "model.layers.1.mlp.up_proj",
        "model.layers.1.mlp.down_proj",
        "model.layers.1.mlp",
    }
    assert dump.has_tensor_data()
    assert all(t.data_file.is_file() for e in dump.entries.values() for t in e.tensors)


def test_outside_the_window_nothing_is_touched_and_errors_leave_no_record(tmp_path):
    import torch

    actor, _ = tiny_models()
    observer = make_observer({"output_dir": str(tmp_path), "window_step": 5, "msprobe_log_level": "error"})
    ids = torch.tensor([[1, 2, 3]])
    with observer.forward("actor", 4, "recompute_logprob", ["a"], ids.tolist(), 4, actor):
        actor(ids)
    assert not (tmp_path / "actor" / "dump").exists() and not (tmp_path / "actor" / "correlation.jsonl").exists()
    with pytest.raises(RuntimeError, match="boom"):
        with observer.forward("actor", 5, "recompute_logprob", ["a"], ids.tolist(), 5, actor):
            raise RuntimeError("boom")
    assert not (tmp_path / "actor" / "correlation.jsonl").exists()
    # the debugger was stopped: the next forward dumps normally
    with torch.no_grad(), observer.forward("actor", 5, "recompute_logprob", ["a"], ids.tolist(), 5, actor):
        actor(ids)
    observer.close()
    lines = (tmp_path / "actor" / "correlation.jsonl").read_text().splitlines()
    assert len(lines) == 1 and json.loads(lines[0])["forward_index"] == 1
    assert read_dump(tmp_path / "actor" / "dump" / "forward_0001").entries
