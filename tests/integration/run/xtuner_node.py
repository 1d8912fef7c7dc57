"""A simulated 8-GPU xtuner node for issue 13's and issue 41's done-when tests (see test_xtuner_node.py).

Real except for what cannot run here: a fake ``nvidia-smi`` (``$FAKE_GPU_COUNT`` x H200, default 8) on PATH and
a fake ``ray`` in the node's Python environment (a console script of that Python, as pip installs Ray's): ``start
--head`` leaves a detached daemon whose argv[0] is ``gcs_server`` and whose command line names its GCS port, as
Ray's does; ``stop --force`` kills every such daemon of this node, as Ray's kills every cluster of its user;
``status`` reports the GPUs the last ``start`` was given. The framework is a git repository made here with
xtuner's layout and two commits: ``good`` matches the goldens, ``bad`` (also ``refs/pull/42/head``) raises the
GRPO train-inference k3 KL from step 10 and drops the MOPD gsm8k score from step 10.

GRPO: a stand-in ``examples/v1/scripts/run_rl.sh`` that behaves as upstream's does (xtuner main ``b934f462``):
``set -ex``; ``ray stop --force`` first; the 6th positional argument ACCELERATOR checked (gpu|npu, else exit 1);
the GPU count from CUDA_VISIBLE_DEVICES; ``ulimit -n`` raised under ``set -e``; RAY_HEAD_PORT /
RAY_DASHBOARD_PORT honoured; an inherited WORK_DIR kept, else ``$(pwd)/work_dirs/...``; ``rm -rf`` of the
node-wide ``<tmp>/ray_log`` and its re-link to ``$WORK_DIR/ray_<MMDDHH>/``; ``ray start --head
--temp-dir=<tmp>/ray_log/`` (so RAY_TMPDIR has no effect); ``ray status`` polled for the GPUs; bare ``python``
through ``| tee`` without pipefail (a crashed trainer exits 0). Its trainer at ``xtuner/v1/train/cli/rl.py``
writes xtuner's rows under ``$WORK_DIR/<14-digit stamp>/``: two optimizer steps per RL step, the mini-batch
rows numbered by the cumulative counter (``_global_train_step + 1 + i``) before each step-summary row, and
``logs/env.json`` (the whole environment). ``FAKE_TRAINER_CRASH_AT_STEP`` makes it crash after that step.

Two values scale to the machine the simulation runs on: the node's "/tmp" is ``<tmp>/node-tmp`` (the script
and the case copies say so; the machine's /tmp is shared), and the open-file limit the script raises to is
65536 where this machine's hard limit allows it, else that hard limit (``NOFILE``). The cases run are copies
of the packaged ones with those two values replaced (:func:`node_project`, a project the harness finds by
``RL_AUTOTEST_PROJECT``); everything else in their ``node:`` sections is the packaged text.

MOPD: the recipe's launch script starts two teacher servers (real HTTP servers, setsid'd, stopped by its
EXIT trap) and its own Ray head; the students' trainer resolves the public recipe config (exp_tracker left
at its TensorBoard default) and writes the baseline's table with ``torch.utils.tensorboard.SummaryWriter``
under the recipe's tags (``eval/gsm8k/score``; the baseline aliases them to ``eval/*/acc``).

The node's Python is a venv of its own (``FRAMEWORK_PYTHON``) with lmdeploy's metadata (the version the
preflight records), the fake ``ray`` and the harness's site-packages behind it (torch for SummaryWriter); the
harness venv is first on PATH, as an activated venv would be: the runs must still use the node's.
"""

from __future__ import annotations

import json
import os
import resource
import secrets
import subprocess
import sys
from pathlib import Path

from autotest.inputs.baseline import load_baseline
from autotest.inputs.case import CASES_DIR
from autotest.inputs.project import PROJECT_ENV
from autotest.run.isolation import free_ports
from tests.helpers import ROOT
from tests.integration.run.recipe_checkout import write_recipe
from tests.integration.run.xtuner_node_models import MODEL_STEPS, add_models, fault_commit_change

NVIDIA_SMI = """#!/usr/bin/env bash
# fake nvidia-smi: an H200 node of $FAKE_GPU_COUNT GPUs (default 8)
count=${FAKE_GPU_COUNT:-8}
case "$*" in
  -L) for ((i = 0; i < count; i++)); do echo "GPU $i: NVIDIA H200 (UUID: GPU-0000000$i-fake)"; done ;;
  *query-gpu=driver_version*) for ((i = 0; i < count; i++)); do echo "550.54.15"; done ;;
  *) echo "| NVIDIA-SMI 550.54.15    Driver Version: 550.54.15    CUDA Version: 12.4 |" ;;
esac
"""

# fake ray, a console script of the node's Python (its #! line is filled in): Ray's daemons name their GCS port
RAY = """import os, signal, subprocess, sys, time
from pathlib import Path

args = sys.argv[1:]
with open(os.environ["FAKE_RAY_LOG"], "a") as log:
    log.write("ray " + " ".join(args) + "\\n")
mark = os.environ["FAKE_RAY_MARK"]


def options():
    return dict(a[2:].split("=", 1) for a in args if a.startswith("--") and "=" in a)


if args[:1] == ["stop"]:  # every daemon of this node's user, as `ray stop --force` stops every cluster
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and entry.stat().st_uid == os.getuid() \\
                    and mark.encode() in (entry / "cmdline").read_bytes():
                os.kill(int(entry.name), signal.SIGKILL)
        except OSError:
            pass
elif args[:1] == ["start"]:
    opts = options()
    temp_dir = opts.get("temp-dir")
    if temp_dir:  # the session folder Ray keeps there (logs, sockets)
        session = Path(temp_dir) / f"session_{time.strftime('%Y-%m-%d_%H-%M-%S')}_{os.getpid()}"
        (session / "logs").mkdir(parents=True, exist_ok=True)
        (session / "logs" / "raylet.out").write_text("raylet started\\n")
    subprocess.Popen(["bash", "-c", 'exec -a gcs_server "$0" -c "import time; time.sleep(120)" "$@"', sys.executable,
                      "--gcs_server_port=" + opts.get("port", "6379"), mark],
                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                     start_new_session=True)
    print("Ray runtime started.")
elif args[:1] == ["status"]:
    started = [line for line in Path(os.environ["FAKE_RAY_LOG"]).read_text().splitlines() if " start " in line]
    gpus = dict(a[2:].split("=", 1) for a in started[-1].split() if a.startswith("--num-gpus=")).get("num-gpus", "0")
    print(f"Usage:\\n 0.0/16.0 CPU\\n 0.0/{float(gpus)} GPU")
"""

# Upstream's run_rl.sh as it behaves (xtuner main b934f462), written for this test; {node_tmp} and {nofile} are
# the simulated node's /tmp and open-file limit (the module docstring).
RUN_RL = """set -ex
ray stop --force
CONFIG_PATH=$1
INFER_BACKEND=$2
MODEL_PATH=$3
DATA_PATH=$4
EVAL_DATA_PATH=${{5:-""}}
ACCELERATOR=${{6:-"gpu"}}
ACCELERATOR=$(echo "$ACCELERATOR" | tr '[:lower:]' '[:upper:]')
if [ $ACCELERATOR != "GPU" ] && [ $ACCELERATOR != "NPU" ]; then
  echo "Error: ACCELERATOR must be either 'gpu' or 'npu'!"
  exit 1
fi
if [ -n "${{CUDA_VISIBLE_DEVICES:-}}" ]; then
  IFS=',' read -ra visible <<< "$CUDA_VISIBLE_DEVICES"
  gpus=${{#visible[@]}}
else
  gpus=${{7:-8}}
fi
ulimit -n {nofile}
export PYTHONPATH=$(pwd):$PYTHONPATH
export RAY_MASTER_ADDR=${{MASTER_ADDR:-"127.0.0.1"}}
export RAY_HEAD_PORT=${{RAY_HEAD_PORT:-"6379"}}
export RAY_DASHBOARD_PORT=${{RAY_DASHBOARD_PORT:-"8265"}}
export MODEL_PATH DATA_PATH EVAL_DATA_PATH
backend=$(echo "$INFER_BACKEND" | tr '[:upper:]' '[:lower:]')
if [ "$backend" = "lmdeploy" ]; then export XTUNER_USE_LMDEPLOY=1; else echo "unsupported $backend"; exit 1; fi
current_time=$(date "+%m%d%H")
if [ "x$WORK_DIR" = "x" ]; then
  export WORK_DIR="$(pwd)/work_dirs/$(basename "$MODEL_PATH")_$(basename "$(dirname "$DATA_PATH")")_${{backend}}"
fi
mkdir -p "$WORK_DIR"
export XTUNER_RL_NUM_WORKERS=${{XTUNER_RL_NUM_WORKERS:-$gpus}}
WORK_DIR=$(realpath "$WORK_DIR")
rm -rf {node_tmp}/ray_log
export RAY_LOG_DIR="${{WORK_DIR}}/ray_${{current_time}}/"
mkdir -p ${{RAY_LOG_DIR}}
ln -sfn "${{RAY_LOG_DIR}}" {node_tmp}/ray_log
ray start --head --node-ip-address="$RAY_MASTER_ADDR" --port="$RAY_HEAD_PORT" \\
  --dashboard-port="$RAY_DASHBOARD_PORT" --disable-usage-stats --num-gpus="$gpus" --temp-dir="{node_tmp}/ray_log/"
until [ "$(ray status | grep GPU | cut -d ' ' -f2 | cut -d '/' -f2)" = "$gpus.0" ]; do sleep 0.2; done
cp "$0" "$WORK_DIR/$(basename "$0")"
cp "$CONFIG_PATH" "$WORK_DIR/config.py"
python xtuner/v1/train/cli/rl.py --config "$CONFIG_PATH" --num-workers "$XTUNER_RL_NUM_WORKERS" 2>&1 \\
  | tee -a "$WORK_DIR/training_log_${{current_time}}.txt"
"""

TRAINER = """\"\"\"Stand-in trainer: xtuner's GRPO tracker rows for 45 RL steps under $WORK_DIR/<14-digit stamp>/.

Two optimizer steps per RL step: the mini-batch rows carry the cumulative counter, then the summary row.
\"\"\"
import argparse, json, os, sys, time

K3_KL = 2e-05  # the regressing commit changes this line
OPTIMIZER_STEPS = 2

parser = argparse.ArgumentParser()
parser.add_argument("--config", required=True)
parser.add_argument("--num-workers", type=int, required=True)
args = parser.parse_args()
crash_at = int(os.environ.get("FAKE_TRAINER_CRASH_AT_STEP") or 0)
started = time.time()
exp = os.path.join(os.environ["WORK_DIR"], time.strftime("%Y%m%d%H%M%S"))
os.makedirs(os.path.join(exp, "logs", "exp_tracking"))
with open(os.path.join(exp, "logs", "env.json"), "w") as out:
    json.dump(dict(os.environ), out, indent=2)
global_train_step = 0
with open(os.path.join(exp, "logs", "exp_tracking", "tracker.jsonl"), "w") as out:
    for step in range(1, 46):
        losses = [0.5 / step + 0.01 * i for i in range(OPTIMIZER_STEPS)]
        for i, loss in enumerate(losses):
            out.write(json.dumps({"train_metrics/worker_0/loss": loss, "step": global_train_step + 1 + i}) + "\\n")
        global_train_step += OPTIMIZER_STEPS
        row = {"time/step": 8.0, "response/rewards/mean": 0.5 + 0.008 * step,
               "response/response_len/mean": 300.0 + step,
               "mismatch/mismatch_k3_kl": K3_KL if step >= 10 else 2e-05,
               "train_metrics/worker_0/step_avg_loss": sum(losses) / len(losses), "step": step}
        if step == 45:
            row["eval/accuracy"] = 0.9007
        out.write(json.dumps(row) + "\\n")
        out.flush()
        if step == crash_at:
            raise RuntimeError(f"stand-in crash after step {step}")
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


# The published script's contract: teachers as setsid'd servers on the highest GPUs, stopped by the
# EXIT trap; its own Ray head; the students' trainer through tee.
MOPD_SCRIPT = """set -ex
STUDENT_MODEL_PATH=$1
DATA_PATH=$2
export PYTHONPATH=$(pwd):$PYTHONPATH
ray stop --force
export RAY_HEAD_PORT=${RAY_HEAD_PORT:-"6379"}
export RAY_DASHBOARD_PORT=${RAY_DASHBOARD_PORT:-"8265"}
if [ "x$WORK_DIR" = "x" ]; then export WORK_DIR="$(pwd)/work_dirs/mopd_$(date +%m%d%H)"; fi
mkdir -p "$WORK_DIR"
read -r gsm8k_port geo3k_port <<< "$FAKE_TEACHER_PORTS"
teachers=()
stop_teachers() {
  for pid in "${teachers[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${teachers[@]}"; do while kill -0 "$pid" 2>/dev/null; do sleep 0.1; done; done
}
trap stop_teachers EXIT
for port in $gsm8k_port $geo3k_port; do
  CUDA_VISIBLE_DEVICES=$((7 - ${#teachers[@]})) setsid python -m http.server "$port" --bind 127.0.0.1 \\
    --directory "$WORK_DIR" >/dev/null 2>&1 &
  teachers+=($!)
done
export MOPD_TEACHER_ENDPOINTS="http://127.0.0.1:$gsm8k_port,http://127.0.0.1:$geo3k_port"
ray start --head --port="$RAY_HEAD_PORT" --dashboard-port="$RAY_DASHBOARD_PORT" --num-gpus=6
export STUDENT_CUDA_VISIBLE_DEVICES=0,1,2,3,4,5
python recipe/on_policy_distillation/train_mopd.py --config "$OPD_CONFIG_PATH" \\
  --num-workers "$XTUNER_RL_NUM_WORKERS" 2>&1 | tee -a "$WORK_DIR/training_log.txt"
"""

# Writes the baseline's golden table to TensorBoard with torch's SummaryWriter under the tags the
# public recipe uses (eval/<set>/score); GOLDEN is filled in from baselines/mopd-qwen3-vl-2b.yaml.
MOPD_TRAINER = '''"""Stand-in MOPD students: waits for both teachers, logs every step to TensorBoard."""
import argparse, json, os, runpy, sys, time, urllib.request

GSM8K_DROP = 0.0  # the regressing commit changes this line
GOLDEN = json.loads(%r)

parser = argparse.ArgumentParser()
parser.add_argument("--config", required=True)
parser.add_argument("--num-workers", type=int, required=True)
args = parser.parse_args()
started = time.time()
trainer = runpy.run_path(args.config)["trainer"]
if trainer.exp_tracker != "tensorboard":
    sys.exit("this stand-in logs to TensorBoard only")
for url in os.environ["MOPD_TEACHER_ENDPOINTS"].split(","):
    deadline = time.time() + 30
    while True:
        try:
            urllib.request.urlopen(url, timeout=1).close()
            break
        except OSError:
            if time.time() > deadline:
                sys.exit(f"teacher {url} never answered")
            time.sleep(0.1)
from torch.utils.tensorboard import SummaryWriter

exp = os.path.join(trainer.work_dir, time.strftime("%%Y%%m%%d%%H%%M%%S"))
writer = SummaryWriter(os.path.join(exp, "logs"))
for step in range(0, trainer.total_train_steps + 1):
    if step:
        writer.add_scalar("time/step", 30.0, step)
        writer.add_scalar("response/response_len/mean", 400.0 + step, step)
    for metric, series in GOLDEN.items():
        value = series.get(str(step))
        if value is None:
            continue
        tag = metric.replace("/acc", "/score") if metric.startswith("eval/") else metric
        if tag == "eval/gsm8k/score" and step >= 10:
            value -= GSM8K_DROP
        writer.add_scalar(tag, value, step)
writer.close()
with open(os.path.join(exp, "run_env.json"), "w") as out:
    json.dump({"prefix": sys.prefix, "work_dir": os.environ["WORK_DIR"], "workers": args.num_workers,
               "teachers": os.environ["MOPD_TEACHER_ENDPOINTS"], "started": started, "ended": time.time()}, out)
print("training finished:", trainer.total_train_steps, "steps")
'''

CASES = ("grpo-gsm8k-qwen3-8b-lmdeploy", "mopd-qwen3-vl-2b")
_HARD_NOFILE = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
#: the open-file limit this node's run_rl.sh raises to: upstream's 65536 where this machine's hard limit allows it
NOFILE = 65536 if _HARD_NOFILE == resource.RLIM_INFINITY or _HARD_NOFILE >= 65536 else _HARD_NOFILE
MOPD_MODEL = "models--Qwen--Qwen3-VL-2B-Instruct/snapshots/89644892e4d85e24eaac8bacfd4f463576704203"
LMDEPLOY_VERSION = "0.10.0"

def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True).stdout.strip()


def _executable(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(0o755)


def build_node(tmp_path: Path, models: bool = False) -> dict:
    """The fake node: binaries, the node's Python, the framework repository (two refs) and the shares; with
    ``models``, the model stand-ins the consistency job attaches to (xtuner_node_models.py)."""
    fakebin = tmp_path / "fakebin"
    _executable(fakebin / "nvidia-smi", NVIDIA_SMI)
    node_python = tmp_path / "node-python"
    subprocess.run([getattr(sys, "_base_executable", sys.executable), "-m", "venv", "--without-pip",
                    str(node_python)], check=True)
    _node_packages(node_python)
    _executable(node_python / "bin" / "ray", f"#!{node_python / 'bin' / 'python'}\n{RAY}")
    node_tmp = tmp_path / "node-tmp"
    node_tmp.mkdir()

    repo = tmp_path / "xtuner"
    _executable(repo / "examples" / "v1" / "scripts" / "run_rl.sh", RUN_RL.format(node_tmp=node_tmp, nofile=NOFILE))
    _executable(repo / "xtuner" / "v1" / "train" / "cli" / "rl.py", TRAINER + (MODEL_STEPS if models else ""))
    if models:
        add_models(repo)
    (repo / "autotest" / "config").mkdir(parents=True)
    (repo / "autotest" / "config" / "rl_qwen3_gsm8k_grpo.py").write_text(CONFIG)
    recipe = repo / "recipe" / "on_policy_distillation"
    _executable(recipe / "scripts" / "run_sampled_token_mopd.sh", MOPD_SCRIPT)
    golden_table = load_baseline(ROOT / "baselines" / "mopd-qwen3-vl-2b.yaml").golden_table or {}
    mopd_trainer = MOPD_TRAINER % json.dumps({m: {str(k): v for k, v in s.items()} for m, s in golden_table.items()})
    _executable(recipe / "train_mopd.py", mopd_trainer)
    # PR #1977's recipe config and xtuner's trainer fields, as the recipe guard holds them to the case
    write_recipe(repo)
    _git(repo, "init", "-q", "-b", "main")
    _git(repo, "-c", "user.email=t@example.com", "-c", "user.name=t", "add", ".")
    _git(repo, "-c", "user.email=t@example.com", "-c", "user.name=t", "commit", "-q", "-m", "good")
    good = _git(repo, "rev-parse", "HEAD")
    trainer = repo / "xtuner" / "v1" / "train" / "cli" / "rl.py"
    trainer.write_text(trainer.read_text().replace("K3_KL = 2e-05", "K3_KL = 5e-03"))
    (recipe / "train_mopd.py").write_text(mopd_trainer.replace("GSM8K_DROP = 0.0", "GSM8K_DROP = 0.1"))
    if models:
        fault_commit_change(repo)
    _git(repo, "-c", "user.email=t@example.com", "-c", "user.name=t", "commit", "-q", "-am", "rollout: bf16 logits")
    bad = _git(repo, "rev-parse", "HEAD")
    _git(repo, "update-ref", "refs/pull/42/head", bad)
    _git(repo, "reset", "-q", "--hard", good)

    teacher_ports = free_ports(2)
    share = tmp_path / "share"
    (share / "model" / "Qwen3-8B").mkdir(parents=True)
    (share / "data" / "gsm8k").mkdir(parents=True)
    for name in ("train-mini.jsonl", "test.jsonl"):
        (share / "data" / "gsm8k" / name).write_text('{"prompt": "1+1=", "answer": "2"}\n')
    for model in (MOPD_MODEL, "Qwen3-4B-Instruct-2507", "Qwen3-VL-4B-Instruct"):
        (share / "model" / model).mkdir(parents=True)
    (share / "data" / "on_policy_distillation").mkdir(parents=True)
    for name in ("gsm8k_geo3k_train.json", "gsm8k_geo3k_eval.json"):
        (share / "data" / "on_policy_distillation" / name).write_text("[]\n")
    # the golden: the good commit's own tracker, as a reviewed reference run would be
    golden_work = tmp_path / "golden-run"
    subprocess.run([str(node_python / "bin" / "python"), str(trainer), "--config", "c",
                    "--num-workers", "8"], cwd=tmp_path, check=True, capture_output=True,
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
        "FAKE_RAY_LOG": str(tmp_path / "ray.log"), "FAKE_RAY_MARK": f"fake-ray-gcs-{secrets.token_hex(6)}",
        # the fake `ray stop --force` kills every daemon with this mark, as Ray's kills every cluster of its user:
        # unique, so a node test of another session (same tmp_path name, own namespace or none) never stops this one's
        "FAKE_TEACHER_PORTS": " ".join(map(str, teacher_ports)),
        PROJECT_ENV: str(node_project(tmp_path / "project", node_tmp)),
    })
    return {"repo": repo, "good": good, "bad": bad, "env": env, "tmp": tmp_path, "node_python": node_python,
            "teacher_ports": teacher_ports, "node_tmp": node_tmp}


def node_project(folder: Path, node_tmp: Path) -> Path:
    """A project holding copies of the packaged xtuner cases for this node: its /tmp and open-file limit in their
    ``node:`` sections (the module docstring), their baselines the packaged ones; the rest is the packaged text."""
    cases = folder / "cases"
    cases.mkdir(parents=True)
    for name in CASES:
        text = (CASES_DIR / f"{name}.yaml").read_text()
        for old, new in (("open_files: 65536", f"open_files: {NOFILE}"),
                         ("owned_paths: [/tmp/ray_log]", f"owned_paths: [{node_tmp}/ray_log]"),
                         ("baseline: baselines/", f"baseline: {ROOT}/baselines/")):
            assert text.count(old) == 1, (name, old)  # the packaged case changed: update the simulation
            text = text.replace(old, new)
        (cases / f"{name}.yaml").write_text(text)
    (folder / "rl-autotest.toml").write_text('cases = ["cases"]\nbaselines = "baselines"\nresults = "results"\n')
    return folder


def _node_packages(node_python: Path) -> None:
    """The node's own lmdeploy (its metadata: the preflight reads the version) and torch (the harness's copy)."""
    (site,) = node_python.glob("lib/python*/site-packages")
    info = site / f"lmdeploy-{LMDEPLOY_VERSION}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: lmdeploy\nVersion: {LMDEPLOY_VERSION}\n")
    harness_site = [p for p in sys.path if p.endswith("site-packages") and Path(p).is_dir()]
    (site / "harness_site.pth").write_text("\n".join(harness_site) + "\n")


