"""The collection hook injected into an unmodified process through ``sitecustomize``: dumps appear only
when ``RL_AUTOTEST_CONSISTENCY`` is set, and the process computes bitwise the same outputs either way."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
from tests import waits

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[3]

# A program that knows nothing of the harness: three forwards of a small transformers model.
APP = """
import hashlib, sys, torch
from transformers import Qwen3Config, Qwen3ForCausalLM
torch.set_num_threads(1)
torch.manual_seed(0)
model = Qwen3ForCausalLM(Qwen3Config(vocab_size=32, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                     num_attention_heads=2, num_key_value_heads=1, head_dim=16)).eval()
digest = hashlib.sha256()
with torch.no_grad():
    for step in range(3):
        ids = torch.arange(step, step + 8).unsqueeze(0) % 32
        digest.update(model(input_ids=ids).logits.numpy().tobytes())
print(digest.hexdigest(), len([m for m in sys.modules if m.startswith("msprobe")]))
"""
SITECUSTOMIZE = "from autotest.consistency.hook import install_from_env\ninstall_from_env()\n"


def _run(tmp_path: Path, config: Path | None) -> tuple[str, int]:
    site = tmp_path / "site"
    site.mkdir(exist_ok=True)
    (site / "sitecustomize.py").write_text(SITECUSTOMIZE)
    (tmp_path / "app.py").write_text(APP)
    env = {k: v for k, v in os.environ.items() if k != "RL_AUTOTEST_CONSISTENCY"}
    env["PYTHONPATH"] = os.pathsep.join([str(site), str(ROOT)])
    if config is not None:
        env["RL_AUTOTEST_CONSISTENCY"] = str(config)
    result = waits.run([sys.executable, str(tmp_path / "app.py")], check=False, env=env, capture_output=True,
                       text=True, limit_s=300)
    assert result.returncode == 0, result.stderr[-2000:]
    digest, msprobe_modules = result.stdout.split()[-2:]
    return digest, int(msprobe_modules)


def test_dumps_only_when_set_and_outputs_bitwise_identical(tmp_path):
    out = tmp_path / "diag"
    config = tmp_path / "diagnostic.json"
    config.write_text(json.dumps({"output_dir": str(out), "window_step": 2, "msprobe_log_level": "error",
                                  "auto": {"side": "rollout"}}))
    plain, plain_msprobe = _run(tmp_path, None)
    assert plain_msprobe == 0 and not out.exists()  # unset: MSProbe never imported, nothing written
    hooked, hooked_msprobe = _run(tmp_path, config)
    assert hooked == plain and hooked_msprobe > 0
    dumps = sorted(out.glob("rollout/dump/step*/proc*/dump.json"))
    assert [d.parent.parent.name for d in dumps] == ["step2"]  # only the window step
    keys = json.loads(dumps[0].read_text())["data"]
    assert "Module.model.layers.0.self_attn.q_proj.Linear.forward.0" in keys
    lines = [json.loads(line) for line in (out / "rollout" / "correlation.jsonl").read_text().splitlines()]
    assert len(lines) == 1 and lines[0]["source"] == "dispatch_logger" and lines[0]["step"] == 2
    assert lines[0]["requests"][0]["tokens"] == list(range(1, 9))
    assert lines[0]["autocast"] == "off"  # the autocast state inside the wrapped forward
