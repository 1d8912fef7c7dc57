"""The harness-made A/A nudge (autotest/attach), on real torch training in real processes: off, it imports
nothing and two runs of one seed are bitwise equal; ``optimizer-ulp:N`` moves the run at one-ulp scale from the
first optimizer step, twice bitwise alike; another sitecustomize behind it still runs."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from autotest.ab.nudge import ATTACH_DIR, nudge_env
from tests import waits

#: a user's trainer: seeded, deterministic on CPU, a torch.optim optimizer, nothing of the harness
TRAIN = """
import json, sys, torch
torch.manual_seed(0)
torch.set_num_threads(1)
model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.Tanh(), torch.nn.Linear(32, 1))
opt = torch.optim.Adam(model.parameters(), lr=1e-2)
x = torch.randn(64, 16)
y = x.sum(dim=1, keepdim=True).sin()
losses = []
for step in range(30):
    loss = ((model(x) - y) ** 2).mean()
    losses.append(loss.item())
    opt.zero_grad()
    loss.backward()
    opt.step()
print(json.dumps(losses))
"""


def _train(tmp_path: Path, extra: dict[str, str]) -> tuple[list[float], str]:
    script = tmp_path / "train.py"
    script.write_text(TRAIN)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "RL_AUTOTEST_AA_NUDGE")}
    nudge = extra.pop("nudge", "natural")
    env = {**env, **nudge_env(nudge, env), **extra}
    done = waits.run([sys.executable, str(script)], limit_s=120, env=env, cwd=tmp_path, capture_output=True,
                     text=True)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout), done.stderr


def test_off_it_imports_nothing_and_on_it_waits_for_torch(tmp_path: Path) -> None:
    probe = [sys.executable, "-c", "import sys; print('torch' in sys.modules, 'rl_autotest_nudge' in sys.modules)"]
    for extra, seen in (({}, "False False"), ({"RL_AUTOTEST_AA_NUDGE": "1"}, "False True")):
        env = {k: v for k, v in os.environ.items() if k != "RL_AUTOTEST_AA_NUDGE"}
        env = {**env, "PYTHONPATH": str(ATTACH_DIR), **extra}
        done = waits.run(probe, limit_s=60, env=env, capture_output=True, text=True)
        assert done.stdout.strip() == seen, done.stderr


@pytest.mark.slow  # four torch processes: 107 s at load 17 on 2 cores (torch import dominates)
def test_the_nudge_moves_a_deterministic_run_at_ulp_scale_and_repeats(tmp_path: Path) -> None:
    plain, _ = _train(tmp_path, {})
    again, _ = _train(tmp_path, {})
    assert plain == again  # the trainer is bitwise deterministic: an A/A pair without a nudge measures nothing
    nudged, said = _train(tmp_path, {"nudge": "optimizer-ulp:1"})
    twice, _ = _train(tmp_path, {"nudge": "optimizer-ulp:1"})
    assert "rl-autotest A/A nudge 1 (RL_AUTOTEST_AA_NUDGE):" in said and "moved one ulp" in said
    first = next(i for i, (a, b) in enumerate(zip(plain, nudged)) if a != b)  # StopIteration: it did not take
    assert first >= 1  # the first loss is computed before the first step
    assert abs(nudged[first] - plain[first]) < 1e-5 * abs(plain[first])  # ulp scale, not another seed
    assert nudged == twice


def test_a_sitecustomize_behind_it_still_runs(tmp_path: Path) -> None:
    theirs = tmp_path / "theirs"
    theirs.mkdir()
    (theirs / "sitecustomize.py").write_text("import os\nos.environ['THEIRS_RAN'] = '1'\n")
    env = {**os.environ, **nudge_env("optimizer-ulp:1", {"PYTHONPATH": str(theirs)})}
    done = waits.run([sys.executable, "-c", "import os; print(os.environ.get('THEIRS_RAN'))"], limit_s=60, env=env,
                     capture_output=True, text=True)
    assert done.stdout.strip() == "1", done.stderr
