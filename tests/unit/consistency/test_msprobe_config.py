from __future__ import annotations

import json
import sys

import pytest

from autotest.consistency.config import parse_diagnostic_config
from autotest.consistency.msprobe_config import (
    check_side_config,
    msprobe_config_dict,
    require_msprobe,
    tensor_pass_config,
    write_msprobe_configs,
)
from autotest.errors import UsageError


def test_each_side_gets_its_own_config_with_window_and_dump_path(tmp_path):
    cfg = parse_diagnostic_config({"output_dir": str(tmp_path), "window_step": 4})
    paths = write_msprobe_configs(cfg)
    rollout, actor = (json.loads(paths[s].read_text()) for s in ("rollout", "actor"))
    assert rollout["dump_path"] == str(tmp_path / "rollout" / "dump")
    assert actor["dump_path"] == str(tmp_path / "actor" / "dump")
    for content in (rollout, actor):
        assert content["task"] == "statistics" and content["level"] == "L0" and content["step"] == [4]
        assert content["statistics"]["data_mode"] == ["forward"] and content["statistics"]["list"] == []


def test_msprobe_itself_accepts_the_generated_config(tmp_path):
    # parse with MSProbe's own config classes: a key it rejects would fail here, not in the window
    from msprobe.core.dump.common_config import CommonConfig
    from msprobe.pytorch.dump.debugger.debugger_config import DebuggerConfig
    from msprobe.pytorch.dump.pt_config import parse_task_config

    content = msprobe_config_dict("tensor", tmp_path / "d", 2, ["model.layers.1.mlp."])
    common = CommonConfig(content)
    config = DebuggerConfig(common, parse_task_config("tensor", content), None, None, None)
    assert config.list == ["model.layers.1.mlp."] and config.step == [2] and config.level == "L0"


def test_existing_user_config_is_kept_but_checked(tmp_path):
    cfg = parse_diagnostic_config({"output_dir": str(tmp_path), "window_step": 4})
    user = tmp_path / "actor" / "msprobe_config.json"
    user.parent.mkdir(parents=True)
    user.write_text(json.dumps(msprobe_config_dict("statistics", tmp_path / "mine", 4)))
    write_msprobe_configs(cfg)
    assert json.loads(user.read_text())["dump_path"] == str(tmp_path / "mine")
    user.write_text(json.dumps(msprobe_config_dict("statistics", tmp_path / "mine", 5)))
    with pytest.raises(UsageError, match=r"key 'step': \[5\] does not include window_step 4"):
        write_msprobe_configs(cfg)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"level": "L1"}, "key 'level'"),
        ({"task": "overflow_check"}, "key 'task'"),
        ({"async_dump": True}, "key 'async_dump'"),
    ],
)
def test_check_rejects_configs_the_analysis_cannot_use(tmp_path, change, message):
    path = tmp_path / "c.json"
    path.write_text(json.dumps({**msprobe_config_dict("statistics", tmp_path, 1), **change}))
    with pytest.raises(UsageError, match=message):
        check_side_config(path, 1)


def test_tensor_pass_narrows_each_side(tmp_path):
    stats = {"output_dir": "/old", "window_step": 3, "micro_batch_size": 1, "task": "statistics", "list": []}
    raw = tensor_pass_config(stats, tmp_path, ["model.layers.1.mlp.gate_up_proj"], ["model.layers.1.mlp.gate_proj"])
    cfg = parse_diagnostic_config(raw)
    assert cfg.task == "tensor" and cfg.window_step == 3 and cfg.workload == {"micro_batch_size": 1}
    assert cfg.rollout.module_list == ("model.layers.1.mlp.gate_up_proj.",)
    assert cfg.actor.module_list == ("model.layers.1.mlp.gate_proj.",)
    with pytest.raises(UsageError, match="at least one suspect"):
        tensor_pass_config(stats, tmp_path, [], ["x"])


def test_require_msprobe_reports_version_or_names_the_extra(monkeypatch):
    from importlib.metadata import version

    assert require_msprobe() == version("mindstudio-probe")
    monkeypatch.setitem(sys.modules, "msprobe", None)  # what an environment without it looks like
    with pytest.raises(UsageError, match=r"pip install 'rl-autotest\[consistency\]'"):
        require_msprobe()
