"""The consistency job on a framework whose launch takes no diagnostic option: collection attached through the
environment only (RL_AUTOTEST_COLLECT + the collection folder on PYTHONPATH), in a Ray training-worker actor
and in the rollout server a Ray actor starts, in a Python that cannot import the harness
(see standin_framework.py)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from autotest.consistency.job import REQUEST_FILE, run_consistency_job
from tests.helpers import write_tracker, write_yaml
from tests.integration.consistency.standin_framework import write_standin

pytestmark = pytest.mark.slow
AGENT = "lmdeploy.pytorch.engine.model_agent.agent.BaseModelAgent"


LAUNCH = """launch:
  command: [bash, examples/v1/scripts/run_rl.sh, cfg.py, lmdeploy, /share/model, /share/data]
  cwd: {framework}
  env: {{NODE_PYTHON: {python}, ROLLOUT_FAULT: unsynced-layer, STANDIN_STEPS: "2", RAY_AUTH_MODE: disabled,
         RAY_USAGE_STATS_ENABLED: "0"}}
  timeout_s: 300
  uses_ray: true"""
# only the rollout server's start: its agent module imported, nothing else (no Ray, no training)
SERVER_ONLY = """launch:
  command: [{python}, -c, "import lmdeploy.pytorch.engine.model_agent.agent"]
  cwd: {framework}
  timeout_s: 120
  uses_ray: false"""


def _case(tmp_path: Path, framework: Path, launch: str = LAUNCH) -> Path:
    # the launch as xtuner's case has it: run_rl.sh with its positional arguments, nothing appended
    launch = launch.format(framework=framework, python=sys.executable)
    return write_yaml(tmp_path / "standin-grpo.yaml", f"""
name: standin-grpo
description: stand-in xtuner GRPO with an lmdeploy rollout server, on CPU
markers: [grpo]
goal: collect both sides of a train-inference mismatch through attached collection
minimal_scale: a local Ray head, two actors and a server process on CPU, a 2-layer model, 2 steps
platform: {{gpus: 0, framework: null}}
inputs: {{}}
{launch}
tracker: {{format: xtuner, work_dir_env: WORK_DIR}}
expected: {{steps: 2}}
baseline: baselines/tiny-grpo.yaml
consistency: {{policy: on-breach}}
""")


def _results(tmp_path: Path, case_file: Path) -> Path:
    results = tmp_path / "results"
    # xtuner's tracker: always-on mismatch metrics, no recompute key in its config
    write_tracker(results / "tracker.jsonl", {1: {"mismatch/mismatch_k3_kl": 0.0},
                                              2: {"mismatch/mismatch_k3_kl": 5e-3}})
    (results / "run_config" / "exp").mkdir(parents=True)
    (results / "run_config" / "exp" / "config.json").write_text(json.dumps({"rollout_backend": "lmdeploy"}))
    (results / "results.json").write_text(json.dumps({"context": {"seed": 0, "fault": None}}))
    (results / "report.md").write_text("# standin-grpo: FAIL\n")
    (results / REQUEST_FILE).write_text(json.dumps({
        "case": "standin-grpo", "case_file": str(case_file), "tracker": "tracker.jsonl", "results_dir": ".",
        "breaches": [{"metric": "mismatch/mismatch_k3_kl", "first_breach_step": 2}]}))
    return results


def test_mismatch_is_collected_on_both_sides_and_localised(tmp_path: Path) -> None:
    framework = write_standin(tmp_path / "xtuner")
    results = _results(tmp_path, _case(tmp_path, framework))
    outcome = run_consistency_job(results)
    assert not outcome.not_collected and outcome.executed, outcome.summary
    stats = results / "consistency" / "statistics"
    # MSProbe's own layout, one process per side; the trainer and the server it started
    actor = sorted(stats.glob("actor/dump/step2/proc*/dump.json"))
    rollout = sorted(stats.glob("rollout/dump/step2/proc*/dump.json"))
    assert len(actor) == 1 and len(rollout) == 1 and actor[0].parent.name != rollout[0].parent.name
    assert "Module.model.layers.1.mlp.Qwen3MLP.forward.0" in json.loads(rollout[0].read_text())["data"]
    logs = {side: [json.loads(x) for x in (stats / side / "correlation.jsonl").read_text().splitlines()]
            for side in ("actor", "rollout")}
    # the version each side holds: one weight sync before step 2, counted where each side received it
    assert [line["weight_version"] for line in logs["actor"]] == [1]
    assert [line["weight_version"] for line in logs["rollout"]] == [1]
    assert [line["held_weight_version"] for side in ("actor", "rollout") for line in logs[side]] == [1, 1]
    ids = logs["actor"][0]["request_ids"]
    assert len(set(ids)) == 2 and ids == [r["request_id"] for r in logs["rollout"][0]["requests"]]
    report = json.loads(outcome.report_json.read_text())
    assert report["verdict"] == "root_cause_found", outcome.summary
    cause = report["root_cause"]
    assert cause["bucket"] == "parameter_sync_mismatch"
    assert "layers.1.mlp" in cause["module"] or "layers.1.mlp" in cause["localisation"]
    assert report["context"]["screening"]["recompute"] == "confirmed"  # xtuner's always-on recompute


def test_a_moved_point_is_one_not_collected_line(tmp_path: Path) -> None:
    framework = write_standin(tmp_path / "xtuner", missing_forward=True)
    results = _results(tmp_path, _case(tmp_path, framework, SERVER_ONLY))
    outcome = run_consistency_job(results)
    assert outcome.not_collected
    assert outcome.summary.startswith(f"not collected: lmdeploy 0.18.0 has no {AGENT}._forward_impl;"), \
        outcome.summary
    assert (results / "consistency" / "how_to_collect.md").is_file()
    assert "not collected: lmdeploy 0.18.0 has no" in (results / "report.md").read_text()
