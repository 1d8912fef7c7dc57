"""What the job makes of a run's attach records, and the run's environment."""

from __future__ import annotations

from pathlib import Path

from autotest.consistency.attach_run import ATTACH_DIR, attach_env, missing_lines, points_table, side_lines

AGENT = "lmdeploy.pytorch.engine.model_agent.agent.BaseModelAgent"
ROOT = Path(__file__).resolve().parents[3]


def test_environment_only_and_the_run_path_kept():
    env = attach_env(Path("/r/diag.json"), {"PYTHONPATH": "/fw"})
    assert env == {"RL_AUTOTEST_COLLECT": "/r/diag.json", "PYTHONPATH": f"{ATTACH_DIR}:/fw"}
    assert attach_env(Path("/r/diag.json"), {})["PYTHONPATH"] == str(ATTACH_DIR)
    assert (ATTACH_DIR / "sitecustomize.py").is_file() and (ATTACH_DIR / "rl_autotest_collect.py").is_file()


def test_a_missing_point_is_one_line_naming_package_version_and_point():
    status = [{"point": "lmdeploy-rollout", "status": "missing", "what": f"{AGENT}._forward_impl",
               "package": "lmdeploy", "version": "0.18.0", "pid": pid} for pid in (1, 2)]
    status.append({"point": "lmdeploy-rollout", "status": "absent", "what": f"{AGENT}.update_weights_from_distributed",
                   "package": "lmdeploy", "version": "0.18.0"})
    assert missing_lines(status) == [f"not collected: lmdeploy 0.18.0 has no {AGENT}._forward_impl"]
    assert side_lines(status, {"actor": True, "rollout": False}) == []  # already named by the missing line


def test_a_point_that_could_not_collect_says_why():
    status = [{"point": "xtuner-actor", "status": "error", "what": "x.TrainingWorker.compute_actor_logprobs",
               "detail": "ModuleNotFoundError: No module named 'msprobe'"}]
    assert missing_lines(status) == ["not collected: x.TrainingWorker.compute_actor_logprobs attached but could not "
                                     "collect: ModuleNotFoundError: No module named 'msprobe'"]


def test_a_side_without_dumps_says_what_was_looked_for_or_what_attached():
    lines = side_lines([], {"actor": True, "rollout": False})
    assert lines[0].startswith("not collected: rollout (inference engine forward): no rollout attach point was "
                               f"imported by the run (looked for {AGENT}._forward_impl, ")
    worker = "xtuner.v1.rl.trainer.worker.TrainingWorker"
    attached = [{"point": "xtuner-actor", "status": "attached", "what": f"{worker}.compute_actor_logprobs"},
                {"point": "xtuner-actor", "status": "absent", "what": f"{worker}.weight_update"}]
    assert side_lines(attached, {"actor": False, "rollout": True}) == [
        f"not collected: actor (training-side log-prob recompute): {worker}.compute_actor_logprobs attached "
        f"but ran no forward in the window (no weight update counted: absent {worker}.weight_update)"]


def test_the_docs_list_the_declared_points():
    assert points_table() in (ROOT / "docs" / "consistency.md").read_text(encoding="utf-8")


def test_an_absent_alternative_weight_update_is_no_hint_when_another_attached():
    status = [{"point": "lmdeploy-rollout", "status": "attached", "what": f"{AGENT}._forward_impl"},
              {"point": "lmdeploy-rollout", "status": "attached", "what": f"{AGENT}.update_params"},
              {"point": "lmdeploy-rollout", "status": "absent", "what": f"{AGENT}.update_weights_from_distributed"}]
    assert side_lines(status, {"rollout": False}) == [
        f"not collected: rollout (inference engine forward): {AGENT}._forward_impl, {AGENT}.update_params attached "
        "but ran no forward in the window"]

