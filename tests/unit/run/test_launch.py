"""Launch, the parts that start nothing: the spec a case gives, artifact collection, completion rules.

The launches themselves (children, grandchildren, signals, timeouts) are in tests/integration/run/test_launch.py."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import pytest

from autotest.errors import UsageError
from autotest.inputs.case import REPO_ROOT, load_case
from autotest.judge.structural import completion_status
from autotest.run.artifacts import collect_artifacts
from autotest.run.launch import LaunchResult, launch_spec

# A child that starts a background grandchild, prints the grandchild's pid, then sleeps.


def test_launch_spec_for_the_gpu_case(tmp_path: Path) -> None:
    case = load_case("grpo-gsm8k-qwen3-8b-lmdeploy")
    env = {"XTUNER_ROOT": str(tmp_path), "CI_SHARE_MODEL": "/share/m", "CI_SHARE_DATA": "/share/d",
           "FRAMEWORK_PYTHON": sys.executable}
    the_spec = launch_spec(case, tmp_path / "work", environ=env)
    assert the_spec.command == ("bash", "-x", "examples/v1/scripts/run_rl.sh",
                                "autotest/config/rl_qwen3_gsm8k_grpo.py", "lmdeploy", "/share/m/Qwen3-8B",
                                "/share/d/gsm8k/train-mini.jsonl", "/share/d/gsm8k/test.jsonl")
    assert the_spec.cwd == tmp_path and the_spec.timeout_s == case.launch.timeout_s
    # run_rl.sh keeps an inherited WORK_DIR: the run writes in its own work folder, never in the checkout
    assert the_spec.env["WORK_DIR"] == str((tmp_path / "work").resolve())
    assert the_spec.env["FRAMEWORK_PYTHON"] == sys.executable
    assert the_spec.env["PATH"].split(":")[0] == str(Path(sys.executable).parent)
    # its own Ray: free ports, a temp dir, and a cleanup that stops that cluster only
    head, dashboard = int(the_spec.env["RAY_HEAD_PORT"]), int(the_spec.env["RAY_DASHBOARD_PORT"])
    assert head != dashboard and the_spec.env["RAY_TMPDIR"].startswith("/tmp/rlat-ray-")
    assert the_spec.uses_ray and the_spec.cleanup_commands == ((
        sys.executable, "-m", "autotest.run.isolation", "stop-ray", "--gcs-port", str(head),
        "--temp-dir", the_spec.env["RAY_TMPDIR"]),)
    assert not any("--force" in c for c in the_spec.cleanup_commands)
    mopd = launch_spec(load_case("mopd-qwen3-vl-2b"), tmp_path / "work", environ=env)
    assert mopd.term_grace_s == 60 and mopd.env["WORK_DIR"] == str((tmp_path / "work").resolve())
    assert mopd.env["GSM8K_TEACHER_MODEL_PATH"] == "/share/m/Qwen3-4B-Instruct-2507"
    with pytest.raises(UsageError) as info:
        launch_spec(case, tmp_path / "work", environ={"XTUNER_ROOT": str(tmp_path)})
    assert str(info.value) == (f"{case.source}: launch.command[5]: ${{CI_SHARE_MODEL}} is not set; "
                               "export CI_SHARE_MODEL before running the case")
    with pytest.raises(UsageError, match="launch.fault_args: the case takes no fault"):
        launch_spec(case, tmp_path / "work", fault="nan_reward", environ=env)


def test_launch_spec_for_the_embedded_case(tmp_path: Path) -> None:
    case = load_case("tiny-grpo")
    work = tmp_path / "work"
    plain = launch_spec(case, work, environ={})
    assert plain.command == (sys.executable, "-m", "autotest.workloads.grpo", "--work-dir",
                             str(work.resolve()), "--seed", "10")
    assert plain.cwd == REPO_ROOT and plain.cleanup_commands == () and plain.term_grace_s == 10.0
    assert plain.env == {"PYTHONUNBUFFERED": "1", "WORK_DIR": str(work.resolve())}
    faulty = launch_spec(case, work, seed=4, fault="stale_weights", extra_args=("--steps", "3"), environ={})
    assert faulty.command[-6:] == ("--seed", "4", "--fault", "stale_weights", "--steps", "3")


def write_exp(work: Path, stamp: str, steps: int, config: bool = True) -> Path:
    tracking = work / stamp / "logs" / "exp_tracking"
    tracking.mkdir(parents=True)
    rows = [json.dumps({"response/rewards/mean": 0.1 * s, "step": s}) for s in range(1, steps + 1)]
    (tracking / "tracker.jsonl").write_text("\n".join(rows) + "\n")
    if config:
        (work / stamp / "config.json").write_text("{}")
    return work / stamp


def test_collect_artifacts_newest_exp_and_configs(tmp_path: Path) -> None:
    work = tmp_path / "work"
    write_exp(work, "20260101000000", 45)
    newest = write_exp(work, "20260102000000", 30)
    (work / "config.py").write_text("rollout_steps = 45\n")
    (work / "training_log_010203.txt").write_text("log\n")
    found = collect_artifacts(work, tmp_path / "res")
    assert found.exp_dir == newest and found.tracker == tmp_path / "res" / "tracker.jsonl"
    assert found.tracker.read_text().count("\n") == 30
    assert sorted(p.relative_to(tmp_path / "res").as_posix() for p in found.run_config) == [
        "run_config/exp_dir/config.json", "run_config/work_dir/config.py"]
    assert found.notes == ()


def test_collect_artifacts_ignores_exp_dirs_from_before_the_run(tmp_path: Path) -> None:
    work = tmp_path / "work"
    write_exp(work, "20200101000000", 45, config=False)  # an older run in a shared work dir
    found = collect_artifacts(work, tmp_path / "res", since=time.time())
    assert found.exp_dir is None and found.tracker is None
    assert found.notes == (f"no tracker.jsonl at {work} (no exp dir)", "no config files found")
    nothing = collect_artifacts(tmp_path / "absent", tmp_path / "res2")
    assert nothing.tracker is None and nothing.run_config == ()


def test_collect_artifacts_explicit_tracker_path(tmp_path: Path) -> None:
    metrics = tmp_path / "verl" / "metrics.jsonl"
    metrics.parent.mkdir()
    metrics.write_text('{"step": 1}\n')
    found = collect_artifacts(tmp_path / "verl", tmp_path / "res", tracker_path=metrics)
    assert found.tracker_source == metrics and found.tracker.read_text() == '{"step": 1}\n'
    gone = collect_artifacts(tmp_path / "verl", tmp_path / "res2", tracker_path=tmp_path / "no.jsonl")
    assert gone.tracker is None and gone.notes[0] == f"no tracker.jsonl at {tmp_path / 'no.jsonl'}"


def test_completion_rules() -> None:
    def ended(**kw: object) -> LaunchResult:
        base: dict = dict(command_line="x", cwd="/", started_at="t", wall_s=1.0, timeout_s=300.0,
                          exit_code=0, signal=None, timed_out=False, stopped_reason=None,
                          interrupted=None, stdout_log=Path("o"), stderr_log=Path("e"),
                          launch_json=Path("j"))
        return LaunchResult(**{**base, **kw})

    done = completion_status(ended(), 45, 45, True)
    assert done.complete and done.status == "PASS" and done.reasons == ()
    assert completion_status(ended(), 46, 45, True).reasons == (
        "run reached step 46 but the case expects exactly 45 (did epochs, batch size or dataset size change?)",)
    assert completion_status(ended(), 46, 45, False).complete
    assert completion_status(ended(), None, 45, True).reasons == (
        "run exited 0 but logged no training step (expected 45); is the tracker written where the case says?",)
    assert completion_status(ended(exit_code=1), 45, 45, True).reasons == (
        "run exited with code 1 at step 45 of 45",)  # a crash after the last step still counts
    assert completion_status(ended(interrupted="KeyboardInterrupt", exit_code=None, signal="SIGTERM"),
                             3, 45, True).reasons == ("run interrupted (KeyboardInterrupt) at step 3 of 45",)
