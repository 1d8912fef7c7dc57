"""calibrate works for every format run and compare read (issue 23.4): real runs, real logs, end to end.

The fake framework of test_runs.py writes its metrics as a TensorBoard event file (the ``tensorboard``
package's own writer, as xtuner's default tracker does) or as a Hugging Face ``trainer_state.json``
in an ``output_dir`` without timestamped exp dirs; two calibration runs each must produce a candidate.
"""

from __future__ import annotations

import subprocess
import textwrap
from pathlib import Path

import pytest

from autotest.calibration.runs import CalibrationOptions, calibrate_case
from autotest.calibration.thresholds import CalibrationError
from autotest.inputs.baseline import load_baseline
from autotest.inputs.case import load_case

pytest.importorskip("tensorboard")

TRAIN = '''
import argparse, datetime, json, os, random, time
from pathlib import Path
p = argparse.ArgumentParser()
p.add_argument("--seed", type=int, default=0)
p.add_argument("--fault", default="")
p.add_argument("--log", default="tensorboard")
a = p.parse_args()
rng = random.Random(a.seed)
rows = []
for step in range(1, 7):
    rows.append({"reward": 0.1 + 0.05 * step + rng.gauss(0, 0.01), "step_time": 1.0 + rng.random() * 0.1,
                 "step": step})
    if step % 3 == 0:
        rows.append({"eval_reward": 0.4 + 0.02 * step + rng.gauss(0, 0.01), "step": step})
out = Path(os.environ["WORK_DIR"])
if a.log == "tensorboard":
    from tensorboard.compat.proto.event_pb2 import Event
    from tensorboard.compat.proto.summary_pb2 import Summary
    from tensorboard.summary.writer.event_file_writer import EventFileWriter
    exp = out / datetime.datetime.now().strftime("%Y%m%d%H%M%S") / "logs"
    writer = EventFileWriter(str(exp))
    for row in rows:  # the Trainer's TensorBoard callback: train/ and eval/ prefixes
        for key, value in row.items():
            if key != "step":
                tag = "eval/" + key[5:] if key.startswith("eval_") else "train/" + key
                writer.add_event(Event(step=row["step"], wall_time=time.time(),
                                       summary=Summary(value=[Summary.Value(tag=tag, simple_value=value)])))
    writer.close()
else:  # a Hugging Face output_dir: the train row, the eval row and the summary share a global_step
    history = [dict(r, epoch=r["step"] / 6) for r in rows]
    history.append({"train_runtime": 1.0, "train_loss": 0.5, "total_flos": 0.0, "epoch": 1.0, "step": 6})
    (out / "checkpoint-6").mkdir(parents=True)
    (out / "checkpoint-6" / "trainer_state.json").write_text(json.dumps({"global_step": 6, "log_history": history}))
'''

CASE = """name: {name}
description: fake framework run logging {fmt}
markers: [grpo]
goal: calibrate a {fmt} case end to end
minimal_scale: six steps, no model
platform:
  gpus: 0
  framework: {{name: fakefw, env: FAKE_FW_ROOT}}
launch:
  command: ["{{python}}", "${{FAKE_FW_ROOT}}/train.py", --seed, "{{seed}}", --log, {fmt}]
  fault_args: [--fault, "{{fault}}"]
  timeout_s: 60  # bounds a broken run: this one takes seconds, at load 20 too
tracker: {{format: {fmt}}}
expected: {{steps: 6}}
baseline: baselines/{name}.yaml
seed: {{default: 2, calibration: [0, 1]}}
"""

SPEC = """schema_version: 1
name: {name}
golden: {{table: {{}}}}
steps: {{expected: 6, exact: true}}
metric_aliases: {{reward: {reward}, eval_reward: {eval}}}
calibration: {{margin: 1.5, relative_floor: 0.1}}
checks:
  - {{metric: reward, method: absolute, operator: "<", threshold: 0.1}}
  - {{metric: eval_reward, method: absolute, operator: "<", threshold: 0.1, scope: points, points: [3, 6]}}
"""


def _git(repo: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t", *args], check=True,
                   capture_output=True)


@pytest.mark.parametrize("fmt, reward, eval_name", [("tensorboard", "train/reward", "eval/reward"),
                                                     ("hf-trainer", "reward", "eval_reward")])
def test_calibrate_a_case_of_each_format(tmp_path, monkeypatch, fmt, reward, eval_name):
    repo = tmp_path / "fw"
    repo.mkdir()
    (repo / "train.py").write_text(textwrap.dedent(TRAIN))
    _git(repo, "init", "-q")
    _git(repo, "add", "train.py")
    _git(repo, "commit", "-q", "-m", "fake framework")
    monkeypatch.setenv("FAKE_FW_ROOT", str(repo))
    name = f"fake-{fmt}"
    case_file = tmp_path / "cases" / f"{name}.yaml"
    case_file.parent.mkdir()
    case_file.write_text(CASE.format(name=name, fmt=fmt))
    baselines = tmp_path / "baselines"
    baselines.mkdir()
    (baselines / f"{name}.yaml").write_text(SPEC.format(name=name, reward=reward, eval=eval_name))
    said: list[str] = []
    outcome = calibrate_case(load_case(case_file), CalibrationOptions(
        results_root=tmp_path / "results", baselines_dir=baselines, runs=2, jobs=2, progress=said.append))
    assert [r.status for r in outcome.runs] == ["PASS", "PASS"], said
    copy = "tensorboard" if fmt == "tensorboard" else "trainer_state.json"
    assert [r.tracker.name for r in outcome.runs if r.tracker] == [copy, copy]
    golden = load_baseline(outcome.candidate).golden_table
    assert sorted(golden["reward"]) == [1, 2, 3, 4, 5, 6]
    assert sorted(golden["eval_reward"]) == [3, 6]


def test_a_run_without_a_log_of_its_format_names_its_reason(tmp_path, monkeypatch):
    repo = tmp_path / "fw"
    repo.mkdir()
    (repo / "train.py").write_text(textwrap.dedent(TRAIN))
    _git(repo, "init", "-q")
    _git(repo, "add", "train.py")
    _git(repo, "commit", "-q", "-m", "fake framework")
    monkeypatch.setenv("FAKE_FW_ROOT", str(repo))
    case_file = tmp_path / "cases" / "fake-none.yaml"
    case_file.parent.mkdir()
    case_file.write_text(CASE.format(name="fake-none", fmt="tensorboard").replace("--log, tensorboard", "--log, none"))
    baselines = tmp_path / "baselines"
    baselines.mkdir()
    (baselines / "fake-none.yaml").write_text(SPEC.format(name="fake-none", reward="train/reward",
                                                          eval="eval/reward"))
    said: list[str] = []
    with pytest.raises(CalibrationError, match=r"2 of 2 calibration runs did not complete, nothing written: run 1 "
                                               r"\(seed 0\): .*no TensorBoard event files at "):
        calibrate_case(load_case(case_file), CalibrationOptions(
            results_root=tmp_path / "results", baselines_dir=baselines, runs=2, jobs=2, progress=said.append))
    assert any("run 1 (seed 0): ERROR" in line and "no TensorBoard event files at" in line for line in said), said
