from __future__ import annotations

import json
from pathlib import Path

import pytest

from autotest.consistency.config import load_diagnostic_config, parse_diagnostic_config
from autotest.errors import UsageError


def test_defaults_place_everything_under_output_dir(tmp_path):
    cfg = parse_diagnostic_config({"output_dir": str(tmp_path), "window_step": 3, "micro_batch_size": 1})
    assert cfg.window_step == 3 and cfg.task == "statistics" and cfg.workload == {"micro_batch_size": 1}
    assert cfg.rollout.dump_path == tmp_path / "rollout" / "dump"
    assert cfg.actor.msprobe_config == tmp_path / "actor" / "msprobe_config.json"
    assert cfg.actor.correlation_log == tmp_path / "actor" / "correlation.jsonl"
    assert cfg.rollout.module_list == ()


def test_per_side_overrides(tmp_path):
    cfg = parse_diagnostic_config(
        {
            "output_dir": str(tmp_path),
            "window_step": 0,
            "task": "tensor",
            "list": ["layers.1."],
            "rollout": {"dump_path": "/elsewhere/r", "list": ["layers.1.mlp.gate_up_proj."]},
        }
    )
    assert cfg.rollout.dump_path == Path("/elsewhere/r")
    assert cfg.rollout.module_list == ("layers.1.mlp.gate_up_proj.",)
    assert cfg.actor.module_list == ("layers.1.",)


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ({"window_step": 1}, "key 'output_dir': is required"),
        ({"output_dir": "rel/dir", "window_step": 1}, "key 'output_dir': must be an absolute path"),
        ({"output_dir": "/x", "window_step": -1}, "key 'window_step': must be an integer >= 0"),
        ({"output_dir": "/x", "window_step": True}, "key 'window_step'"),
        ({"output_dir": "/x", "window_step": 1, "task": "md5"}, "key 'task': must be one of statistics, tensor"),
        ({"output_dir": "/x", "window_step": 1, "bogus": 1}, "key 'bogus': unknown key"),
        ({"output_dir": "/x", "window_step": 1, "list": "layers.1"}, "key 'list': must be a list"),
        ({"output_dir": "/x", "window_step": 1, "list": ["a"], "scope": ["b"]}, "key 'scope'"),
        ({"output_dir": "/x", "window_step": 1, "actor": {"dumppath": "x"}}, "key 'actor.dumppath': unknown key"),
        (
            {"output_dir": "/x", "window_step": 1, "actor": {"dump_path": "rollout/dump"}},
            "key 'actor.dump_path': must differ",
        ),
        ({"output_dir": "/x", "window_step": 1, "micro_batch_size": 0}, "key 'micro_batch_size'"),
        ({"output_dir": "/x", "window_step": 1, "msprobe_log_level": "loud"}, "key 'msprobe_log_level'"),
    ],
)
def test_mistakes_name_the_key(raw, message):
    with pytest.raises(UsageError, match="^diagnostic config: ") as info:
        parse_diagnostic_config(raw)
    assert message in str(info.value)
    assert "\n" not in str(info.value)


def test_load_names_file_and_line(tmp_path):
    path = tmp_path / "diag.json"
    path.write_text('{"output_dir": "/x",\n "window_step": }')
    with pytest.raises(UsageError, match=r"diag.json: line 2: not valid JSON"):
        load_diagnostic_config(path)
    path.write_text(json.dumps({"output_dir": "/x"}))
    with pytest.raises(UsageError, match=r"diag.json: key 'window_step': is required"):
        load_diagnostic_config(path)
    with pytest.raises(UsageError, match="not found"):
        load_diagnostic_config(tmp_path / "missing.json")
