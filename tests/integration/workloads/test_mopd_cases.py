"""mopd-qwen3-vl-2b's launch run against a stand-in checkout (a real bash process)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from autotest.inputs.case import load_case
from autotest.run.launch import launch_spec
from tests.unit.workloads.test_mopd_cases import SCRIPT, SEED_ENV
from tests import waits


def _checkout(tmp_path: Path, config_text: str) -> Path:
    """A stand-in xtuner checkout: the recipe config, and a launch script that records how it was called."""
    root = tmp_path / "xtuner"
    config = root / SEED_ENV["OPD_CONFIG_PATH"]
    config.parent.mkdir(parents=True)
    config.write_text(config_text)
    script = root / SCRIPT
    script.parent.mkdir(parents=True)
    names = " ".join(list(SEED_ENV) + ["WORK_DIR", "CUDA_VISIBLE_DEVICES"])
    script.write_text(
        "#!/usr/bin/env bash\n"
        f"{sys.executable} -c 'import json, os, sys; json.dump({{\"args\": sys.argv[1:], \"env\": "
        f"{{k: os.environ.get(k) for k in \"{names}\".split()}}}}, open(\"called.json\", \"w\"))' \"$@\"\n")
    return root


def _run_case_command(tmp_path: Path, root: Path) -> subprocess.CompletedProcess:
    case = load_case("mopd-qwen3-vl-2b")
    environ = {"CI_SHARE_MODEL": "/share/models", "CI_SHARE_DATA": "/share/data", "XTUNER_ROOT": str(root)}
    spec = launch_spec(case, tmp_path / "work", environ=environ)
    env = {**os.environ, **spec.env, "CUDA_VISIBLE_DEVICES": "3,4"}
    return waits.run(spec.argv, cwd=spec.cwd, env=env, capture_output=True, text=True, limit_s=60)


def test_the_published_config_logging_to_tensorboard_runs(tmp_path: Path) -> None:
    root = _checkout(tmp_path, 'trainer = RLColocateTrainerConfig(work_dir=work_dir, seed=1234)\n')
    done = _run_case_command(tmp_path, root)
    assert done.returncode == 0, done.stderr
    assert (root / "called.json").exists()


def test_with_jsonl_the_seeds_script_runs_with_its_args_env_and_no_cuda_visible_devices(tmp_path: Path) -> None:
    root = _checkout(tmp_path, 'trainer = RLColocateTrainerConfig(\n    exp_tracker="jsonl",\n    seed=1234,\n)\n')
    done = _run_case_command(tmp_path, root)
    assert done.returncode == 0, done.stderr
    called = json.loads((root / "called.json").read_text())
    assert called["args"] == [SEED_ENV["MODEL_PATH"], SEED_ENV["DATA_PATH"]]
    assert called["env"] == {**SEED_ENV, "WORK_DIR": str((tmp_path / "work").resolve()), "CUDA_VISIBLE_DEVICES": None}
