"""Issue 13's done-when, GRPO: the packaged GPU case on a simulated 8-GPU xtuner node, at two framework refs.

The node is real except for what cannot run here: a fake ``nvidia-smi`` (8 GPUs) and a fake ``ray``
(``start --head`` leaves a detached daemon named by its GCS port, as Ray's gcs_server and raylet are) on
PATH. The framework is a git repository made by the test with xtuner's layout: a stand-in
``examples/v1/scripts/run_rl.sh`` with the published script's arguments and environment contract
(``ray stop --force`` first, RAY_HEAD_PORT / RAY_DASHBOARD_PORT, an inherited WORK_DIR kept, else
``$(pwd)/work_dirs/...``; ``ray start --head``; ``ray status`` polled for the GPUs; ``python`` from PATH
through ``tee``) and a stand-in trainer at ``xtuner/v1/train/cli/rl.py`` writing xtuner's tracker rows.
Commit ``good`` matches the golden; commit ``bad`` raises the train-inference k3 KL from step 10. The
node's Python is a separate venv (``FRAMEWORK_PYTHON``), and the harness venv is first on PATH, as an
activated venv would be: the run must still use the node's.

A gate (``bad``) and a nightly (``good``) start at the same moment with one node-wide slots folder, as
two runners on one node would: each gets the right verdict naming its commit; the node lock runs them
one after the other; their WORK_DIRs, Ray ports and Ray temp dirs differ; nothing is left running.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import ROOT

CASE = "grpo-gsm8k-qwen3-8b-lmdeploy"

NVIDIA_SMI = """#!/usr/bin/env bash
# fake nvidia-smi: an 8-GPU H200 node
case "$*" in
  -L) for i in 0 1 2 3 4 5 6 7; do echo "GPU $i: NVIDIA H200 (UUID: GPU-0000000$i-fake)"; done ;;
  *query-gpu=driver_version*) for i in 0 1 2 3 4 5 6 7; do echo "550.54.15"; done ;;
  *) echo "| NVIDIA-SMI 550.54.15    Driver Version: 550.54.15    CUDA Version: 12.4 |" ;;
esac
"""

# `stop` is machine-wide in real Ray; here a no-op that is logged (the node lock keeps 8-GPU runs apart)
RAY = """#!/usr/bin/env bash
# fake ray: `start --head` leaves a detached daemon whose command line names the GCS port, as Ray's do
echo "ray $*" >> "$FAKE_RAY_LOG"
case "$1" in
  stop) exit 0 ;;
  start)
    port=6379
    for arg in "$@"; do case "$arg" in --port=*) port=${arg#--port=} ;; esac; done
    setsid python3 -c 'import time; time.sleep(120)' "--gcs-address=127.0.0.1:$port" "$FAKE_RAY_MARK" \\
      </dev/null >/dev/null 2>&1 &
    echo "Ray runtime started." ;;
  status) printf 'Usage:\\n 0.0/16.0 CPU\\n 0.0/8.0 GPU\\n' ;;
esac
"""

# The published script's contract, written for this test (see the module docstring).
RUN_RL = """set -ex
ray stop --force
CONFIG_PATH=$1
INFER_BACKEND=$2
MODEL_PATH=$3
DATA_PATH=$4
EVAL_DATA_PATH=${5:-""}
if [ -n "${CUDA_VISIBLE_DEVICES:-}" ]; then
  IFS=',' read -ra visible <<< "$CUDA_VISIBLE_DEVICES"
  gpus=${#visible[@]}
else
  gpus=8
fi
export PYTHONPATH=$(pwd):$PYTHONPATH
export RAY_MASTER_ADDR=${MASTER_ADDR:-"127.0.0.1"}
export RAY_HEAD_PORT=${RAY_HEAD_PORT:-"6379"}
export RAY_DASHBOARD_PORT=${RAY_DASHBOARD_PORT:-"8265"}
export MODEL_PATH DATA_PATH EVAL_DATA_PATH
backend=$(echo "$INFER_BACKEND" | tr '[:upper:]' '[:lower:]')
if [ "$backend" = "lmdeploy" ]; then export XTUNER_USE_LMDEPLOY=1; else echo "unsupported $backend"; exit 1; fi
stamp=$(date "+%m%d%H")
if [ "x$WORK_DIR" = "x" ]; then
  export WORK_DIR="$(pwd)/work_dirs/$(basename "$MODEL_PATH")_$(basename "$(dirname "$DATA_PATH")")_${backend}"
fi
mkdir -p "$WORK_DIR"
WORK_DIR=$(realpath "$WORK_DIR")
ray start --head --node-ip-address="$RAY_MASTER_ADDR" --port="$RAY_HEAD_PORT" \\
  --dashboard-port="$RAY_DASHBOARD_PORT" --num-gpus="$gpus" --disable-usage-stats
until [ "$(ray status | grep GPU | cut -d ' ' -f2 | cut -d '/' -f2)" = "$gpus.0" ]; do sleep 0.2; done
cp "$0" "$WORK_DIR/$(basename "$0")"
cp "$CONFIG_PATH" "$WORK_DIR/config.py"
python xtuner/v1/train/cli/rl.py --config "$CONFIG_PATH" --num-workers "$gpus" 2>&1 \\
  | tee -a "$WORK_DIR/training_log_${stamp}.txt"
"""

TRAINER = """\"\"\"Stand-in trainer: xtuner's GRPO tracker rows for 45 steps under $WORK_DIR/<14-digit stamp>/.\"\"\"
import argparse, json, os, sys, time

K3_KL = 2e-05  # the regressing commit changes this line

parser = argparse.ArgumentParser()
parser.add_argument("--config", required=True)
parser.add_argument("--num-workers", type=int, required=True)
args = parser.parse_args()
started = time.time()
exp = os.path.join(os.environ["WORK_DIR"], time.strftime("%Y%m%d%H%M%S"))
os.makedirs(os.path.join(exp, "logs", "exp_tracking"))
with open(os.path.join(exp, "logs", "exp_tracking", "tracker.jsonl"), "w") as out:
    for step in range(1, 46):
        out.write(json.dumps({"train_metrics/worker_0/loss": 0.5 / step, "step": step}) + "\\n")
        row = {"time/step": 8.0, "response/rewards/mean": 0.5 + 0.008 * step,
               "response/response_len/mean": 300.0 + step,
               "mismatch/mismatch_k3_kl": K3_KL if step >= 10 else 2e-05, "step": step}
        if step == 45:
            row["eval/accuracy"] = 0.9007
        out.write(json.dumps(row) + "\\n")
with open(os.path.join(exp, "run_env.json"), "w") as out:
    json.dump({"prefix": sys.prefix, "work_dir": os.environ["WORK_DIR"], "workers": args.num_workers,
               "ray_head_port": os.environ["RAY_HEAD_PORT"], "ray_dashboard_port": os.environ["RAY_DASHBOARD_PORT"],
               "ray_tmpdir": os.environ.get("RAY_TMPDIR"), "started": started, "ended": time.time()}, out)
print("training finished: 45 steps")
"""

CONFIG = """# stand-in for the case's xtuner config (read by the trainer as --config)
total_epochs = 3
global_batch_size = 64
recompute_logprobs = True
"""


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True).stdout.strip()


def _executable(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(0o755)


@pytest.fixture
def node(tmp_path: Path) -> dict:
    """The fake node: binaries, the node's Python, the framework repository (two refs) and the shares."""
    fakebin = tmp_path / "fakebin"
    _executable(fakebin / "nvidia-smi", NVIDIA_SMI)
    _executable(fakebin / "ray", RAY)
    node_python = tmp_path / "node-python"
    subprocess.run([getattr(sys, "_base_executable", sys.executable), "-m", "venv", "--without-pip",
                    str(node_python)], check=True)

    repo = tmp_path / "xtuner"
    _executable(repo / "examples" / "v1" / "scripts" / "run_rl.sh", RUN_RL)
    _executable(repo / "xtuner" / "v1" / "train" / "cli" / "rl.py", TRAINER)
    (repo / "autotest" / "config").mkdir(parents=True)
    (repo / "autotest" / "config" / "rl_qwen3_gsm8k_grpo.py").write_text(CONFIG)
    _git(repo, "init", "-q", "-b", "main")
    _git(repo, "-c", "user.email=t@example.com", "-c", "user.name=t", "add", ".")
    _git(repo, "-c", "user.email=t@example.com", "-c", "user.name=t", "commit", "-q", "-m", "good")
    good = _git(repo, "rev-parse", "HEAD")
    trainer = repo / "xtuner" / "v1" / "train" / "cli" / "rl.py"
    trainer.write_text(TRAINER.replace("K3_KL = 2e-05", "K3_KL = 5e-03"))
    _git(repo, "-c", "user.email=t@example.com", "-c", "user.name=t", "commit", "-q", "-am", "rollout: bf16 logits")
    bad = _git(repo, "rev-parse", "HEAD")
    _git(repo, "update-ref", "refs/pull/42/head", bad)
    _git(repo, "reset", "-q", "--hard", good)

    share = tmp_path / "share"
    (share / "model" / "Qwen3-8B").mkdir(parents=True)
    (share / "data" / "gsm8k").mkdir(parents=True)
    for name in ("train-mini.jsonl", "test.jsonl"):
        (share / "data" / "gsm8k" / name).write_text('{"prompt": "1+1=", "answer": "2"}\n')
    # the golden: the good commit's own tracker, as a reviewed reference run would be
    golden_work = tmp_path / "golden-run"
    subprocess.run([str(node_python / "bin" / "python"), str(trainer), "--config", "c",
                    "--num-workers", "8"], cwd=repo, check=True, capture_output=True,
                   env={"WORK_DIR": str(golden_work), "RAY_HEAD_PORT": "1", "RAY_DASHBOARD_PORT": "2",
                        "PATH": os.defpath})
    golden = share / "baseline" / "qwen3-rl-lmdeploy" / "tracker.jsonl"
    golden.parent.mkdir(parents=True)
    golden.write_bytes(next(golden_work.rglob("tracker.jsonl")).read_bytes())

    env = {k: v for k, v in os.environ.items() if k not in (
        "RL_AUTOTEST_GPU_COUNT", "XTUNER_ROOT", "CUDA_VISIBLE_DEVICES", "RAY_ADDRESS", "GITHUB_STEP_SUMMARY",
        "RL_AUTOTEST_FRAMEWORK_REF", "RL_AUTOTEST_FRAMEWORK_REPO", "RL_AUTOTEST_RESULTS", "PYTEST_ADDOPTS")}
    env.update({
        # the harness venv first, as an activated venv would put it: the run must not use it
        "PATH": os.pathsep.join([str(fakebin), str(Path(sys.executable).parent), env.get("PATH", os.defpath)]),
        "PYTHONPATH": str(ROOT),
        "CI_SHARE_MODEL": str(share / "model"), "CI_SHARE_DATA": str(share / "data"),
        "CI_SHARE_BASELINE": str(share / "baseline"),
        "FRAMEWORK_PYTHON": str(node_python / "bin" / "python"),
        "RL_AUTOTEST_FRAMEWORK_CACHE": str(tmp_path / "framework-cache"),
        "RL_AUTOTEST_SLOTS_DIR": str(tmp_path / "node-slots"),
        "WORK_DIR": str(tmp_path / "inherited-work-dir"),  # left in a runner's environment: overridden
        "FAKE_RAY_LOG": str(tmp_path / "ray.log"), "FAKE_RAY_MARK": f"fake-ray-gcs-{tmp_path.name}",
    })
    return {"repo": repo, "good": good, "bad": bad, "env": env, "tmp": tmp_path, "node_python": node_python}


def _pytest(node: dict, ref: str, results: Path) -> subprocess.Popen:
    argv = [sys.executable, "-m", "pytest", str(ROOT / "autotest" / "suites" / "test_accuracy.py"), "-m", "grpo",
            "-k", CASE, "--strict-cases", "--framework-repo", str(node["repo"]), "--framework-ref", ref,
            "--results-dir", str(results), "--no-history", "-p", "no:cacheprovider", "-q"]
    return subprocess.Popen(argv, cwd=ROOT, env=node["env"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True)


def _leftover(mark: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and mark.encode() in (entry / "cmdline").read_bytes():
                found.append(int(entry.name))
        except OSError:
            continue
    return found


def test_a_gate_and_a_nightly_on_one_xtuner_node(node):
    tmp = node["tmp"]
    gate = _pytest(node, "refs/pull/42/head", tmp / "gate-results")
    nightly = _pytest(node, "main", tmp / "nightly-results")
    outputs = {name: proc.communicate(timeout=240)[0] for name, proc in (("gate", gate), ("nightly", nightly))}
    assert (gate.returncode, nightly.returncode) == (1, 0), outputs

    runs = {}
    for name, sha, status in (("gate", node["bad"], "FAIL"), ("nightly", node["good"], "PASS")):
        assert f"{CASE}: {status}" in outputs[name], outputs[name]
        (folder,) = [p.parent for p in (tmp / f"{name}-results").rglob("results.json")]
        results = json.loads((folder / "results.json").read_text())
        assert results["status"] == status
        assert results["context"]["framework"]["sha"] == sha
        for document in ("report.md", "card.md"):
            assert sha in (folder / document).read_text(), document
        # the run's WORK_DIR is its results folder's work/, whatever the runner's environment said
        (run_env_file,) = (folder / "work").glob("*/run_env.json")
        run_env = json.loads(run_env_file.read_text())
        assert run_env["work_dir"] == str(folder / "work") and run_env["workers"] == 8
        assert Path(run_env["prefix"]) == node["node_python"]  # the node's Python, not the harness venv
        card = (folder / "card.md").read_text()
        assert "is overridden" in card and f"- python: `{node['node_python'] / 'bin' / 'python'}`" in card
        assert f"on ports {run_env['ray_head_port']}/{run_env['ray_dashboard_port']}" in card
        runs[name] = (folder, run_env, results)

    gate_folder, gate_env, _ = runs["gate"]
    request = json.loads((gate_folder / "consistency_request.json").read_text())
    assert [b["metric"] for b in request["breaches"]] == ["mismatch/mismatch_k3_kl"]
    assert not (runs["nightly"][0] / "consistency_request.json").exists()

    # isolated: own work dirs, own Ray ports and temp dirs, nothing written in the checkouts
    nightly_env = runs["nightly"][1]
    assert gate_env["work_dir"] != nightly_env["work_dir"]
    assert gate_env["ray_head_port"] != nightly_env["ray_head_port"]
    assert gate_env["ray_dashboard_port"] != nightly_env["ray_dashboard_port"]
    assert gate_env["ray_tmpdir"] != nightly_env["ray_tmpdir"]
    ray_log = (tmp / "ray.log").read_text()
    for run_env in (gate_env, nightly_env):
        assert f"--port={run_env['ray_head_port']} --dashboard-port={run_env['ray_dashboard_port']}" in ray_log
        assert not Path(run_env["ray_tmpdir"]).exists()
    assert not list((tmp / "framework-cache").rglob("work_dirs"))
    assert not (tmp / "inherited-work-dir").exists()
    # one node lock: the two 8-GPU runs did not overlap
    first, second = sorted((gate_env, nightly_env), key=lambda e: e["started"])
    assert first["ended"] <= second["started"]
    # nothing left running: the fake GCS daemons were stopped by each run's own cleanup
    assert _leftover(node["env"]["FAKE_RAY_MARK"]) == []
    for folder in (gate_folder, runs["nightly"][0]):
        cleanup = (folder / "logs" / "cleanup.log").read_text()
        assert "autotest.run.isolation stop-ray --gcs-port" in cleanup and "ray stop --force" not in cleanup

    # the nightly's consistency job, from a copy of the gate's results (another runner): xtuner has no
    # collection hook, so the job ends "not collected" (exit 3, neutral), its wrapper at the gate's commit
    downloaded = tmp / "consistency-runner" / "results"
    shutil.copytree(gate_folder, downloaded)
    job = subprocess.run([sys.executable, "-m", "autotest.cli", "consistency", str(downloaded)], cwd=tmp,
                         env=node["env"], capture_output=True, text=True, timeout=120, check=False)
    assert job.returncode == 3, job.stdout + job.stderr
    assert "not collected: collection not available for xtuner" in job.stdout
    wrapper = (downloaded / "consistency" / "statistics" / "diagnostic_wrapper.sh").read_text()
    assert f"/commits/{node['bad']}" in wrapper and "examples/v1/scripts/run_rl.sh" in wrapper
    assert (downloaded / "consistency" / "how_to_collect.md").is_file()
