"""A stand-in xtuner + lmdeploy for attached collection: the real module paths, class and method names, a real
tiny torch model on CPU, real Ray: ``run_rl.sh`` runs ``ray start --head`` and the trainer joins it; the
training worker is a Ray actor, and another Ray actor starts the HTTP rollout server process, as xtuner's
starts lmdeploy's api_server.

- ``xtuner/v1/rl/trainer/worker.py``: ``TrainingWorker.compute_actor_logprobs`` (one ``_engine.forward_only`` per
  ``seq_ctx`` on ``_engine.model``) and ``TrainingWorker.weight_update`` (posts the weights to the server);
- ``lmdeploy/pytorch/engine/model_agent/agent.py``: ``BaseModelAgent._forward_impl(inputs)`` on ``patched_model``
  and ``BaseModelAgent.update_params(request)`` (``request.finished`` ends a sync); ``lmdeploy 0.18.0`` metadata;
- ``examples/v1/scripts/run_rl.sh``: positional arguments only (a 6th, ACCELERATOR, aborts it as upstream's
  would on an appended option); it puts a ``node_site`` folder on PYTHONPATH whose ``autotest`` package raises
  on import: the node's Python has no harness.

The fault (``ROLLOUT_FAULT=unsynced-layer``): the server skips ``model.layers.1.mlp`` when it loads weights, so
from the first sync on the rollout runs one layer off. ``missing_forward=True`` writes an agent without
``_forward_impl`` (a release that moved the point).
"""

from __future__ import annotations

from pathlib import Path

RUN_RL = """set -e
CONFIG_PATH=$1
INFER_BACKEND=$2
MODEL_PATH=$3
DATA_PATH=$4
EVAL_DATA_PATH=${5:-""}
if [ -n "${6:-}" ]; then echo "run_rl.sh: ACCELERATOR '$6' is not GPU or NPU" >&2; exit 1; fi
export PYTHONPATH=$(pwd):$(pwd)/node_site:$PYTHONPATH
# as upstream: the script starts Ray itself, and the trainer joins it; the environment above reaches its workers
"$NODE_PYTHON" -m ray.scripts.scripts start --head --node-ip-address=127.0.0.1 --port="$RAY_HEAD_PORT" \
  --include-dashboard=false --temp-dir="$RAY_TMPDIR" --num-cpus=2 --disable-usage-stats
exec "$NODE_PYTHON" xtuner/v1/train/cli/rl.py "$CONFIG_PATH"
"""

MODEL = """
import torch
from transformers import Qwen3Config, Qwen3ForCausalLM


def build_model():
    torch.manual_seed(0)
    config = Qwen3Config(vocab_size=32, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=2, num_key_value_heads=1, head_dim=16)
    return Qwen3ForCausalLM(config).eval()
"""

WORKER = """
import json
import urllib.request

import torch

from xtuner.v1.model import build_model


class SequenceContext:
    def __init__(self, input_ids):
        self.input_ids = input_ids


class TrainEngine:
    def __init__(self):
        self.model = build_model()

    def forward_only(self, seq_ctx, loss_ctx=None):
        logits = self.model(input_ids=seq_ctx.input_ids).logits.float()
        logp = logits[:, :-1].log_softmax(-1).gather(-1, seq_ctx.input_ids[:, 1:, None]).squeeze(-1)
        return {"loss": logp}


class TrainingWorker:
    def __init__(self, rollout_url):
        self._engine = TrainEngine()
        self.rollout_url = rollout_url

    def compute_actor_logprobs(self, seq_ctx_list, shifted_labels_list):
        with torch.no_grad():
            return [self._engine.forward_only(seq_ctx=s)["loss"] for s in seq_ctx_list]

    def fit(self, step):
        # stands in for the optimizer step: every weight moves
        gen = torch.Generator().manual_seed(step)
        with torch.no_grad():
            for p in self._engine.model.parameters():
                p.add_(0.05 * torch.randn(p.shape, generator=gen))

    def weight_update(self, **kwargs):
        state = {k: v.tolist() for k, v in self._engine.model.state_dict().items()}
        body = json.dumps({"serialized_named_tensors": state, "finished": True}).encode()
        urllib.request.urlopen(urllib.request.Request(self.rollout_url + "/update_params", body), timeout=60).read()
"""

AGENT = """
import os

import torch

from xtuner_free_model import build_model


class UpdateParamsRequest:
    def __init__(self, serialized_named_tensors, finished=False):
        self.serialized_named_tensors = serialized_named_tensors
        self.finished = finished


class ModelInputs:
    def __init__(self, input_ids):
        self.input_ids = input_ids


class BaseModelAgent:
    def __init__(self):
        self.patched_model = build_model()
{forward}
    def update_params(self, request):
        skip = "model.layers.1.mlp." if os.environ.get("ROLLOUT_FAULT") == "unsynced-layer" else None
        state = self.patched_model.state_dict()
        with torch.no_grad():
            for name, value in request.serialized_named_tensors.items():
                if skip is None or not name.startswith(skip):
                    state[name].copy_(torch.tensor(value))
"""

FORWARD = """
    def _forward_impl(self, inputs, cache_inputs=None):
        with torch.no_grad():
            return self.patched_model(input_ids=inputs.input_ids).logits
"""

SERVER = """
import json
import sys
from http.server import BaseHTTPRequestHandler, HTTPServer

import torch

from lmdeploy.pytorch.engine.model_agent.agent import BaseModelAgent, ModelInputs, UpdateParamsRequest

AGENT = BaseModelAgent()


class Handler(BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        if self.path == "/update_params":
            AGENT.update_params(UpdateParamsRequest(**body))
            out = {"ok": True}
        else:
            ids = torch.tensor(body["input_ids"])
            forward = getattr(AGENT, "_forward_impl", None) or (lambda i: AGENT.patched_model(input_ids=i.input_ids).logits)
            with torch.no_grad():
                logits = forward(ModelInputs(ids)).float()
            logp = logits[:, :-1].log_softmax(-1).gather(-1, ids[:, 1:, None]).squeeze(-1)
            out = {"logprobs": logp.tolist()}
        data = json.dumps(out).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


server = HTTPServer(("127.0.0.1", 0), Handler)
print(server.server_address[1], flush=True)
server.serve_forever()
"""

TRAINER = """
import json
import os
import subprocess
import sys
import urllib.request

import ray
import torch

from xtuner.v1.rl.trainer.worker import SequenceContext, TrainingWorker


class RolloutWorker:
    # as xtuner's lmdeploy rollout worker: a Ray actor that starts the engine's api_server process
    def start(self):
        self.server = subprocess.Popen([sys.executable, "-m", "lmdeploy.serve.openai.api_server"],
                                       stdout=subprocess.PIPE, text=True)
        return "http://127.0.0.1:" + self.server.stdout.readline().strip()

    def stop(self):
        self.server.terminate()
        self.server.wait(timeout=30)


ray.init(address="127.0.0.1:" + os.environ["RAY_HEAD_PORT"], log_to_driver=True)
rollout = ray.remote(num_cpus=0)(RolloutWorker).remote()
url = ray.get(rollout.start.remote())
try:
    worker = ray.remote(num_cpus=0)(TrainingWorker).remote(url)
    steps = int(os.environ.get("STANDIN_STEPS", "3"))
    tracker = os.path.join(os.environ["WORK_DIR"], "tracker.jsonl")
    os.makedirs(os.environ["WORK_DIR"], exist_ok=True)
    for step in range(1, steps + 1):
        ids = (torch.arange(16).reshape(2, 8) * 3 + step) % 32  # two distinct requests a step
        body = json.dumps({"input_ids": ids.tolist()}).encode()
        reply = json.loads(urllib.request.urlopen(urllib.request.Request(url + "/generate", body), timeout=60).read())
        rollout_logp = torch.tensor(reply["logprobs"])
        actor_logp = ray.get(worker.compute_actor_logprobs.remote([SequenceContext(ids)], [ids[:, 1:]]))[0]
        k3 = float(((rollout_logp - actor_logp).exp() - (rollout_logp - actor_logp) - 1).mean())
        with open(tracker, "a") as fh:
            fh.write(json.dumps({"step": step, "mismatch/mismatch_k3_kl": k3}) + "\\n")
        ray.get(worker.fit.remote(step))
        ray.get(worker.weight_update.remote())
finally:
    ray.get(rollout.stop.remote())
    ray.shutdown()
"""


def write_standin(root: Path, *, missing_forward: bool = False) -> Path:
    """Write the stand-in checkout under ``root`` and return it."""
    files = {
        "examples/v1/scripts/run_rl.sh": RUN_RL,
        "xtuner/__init__.py": "", "xtuner/v1/__init__.py": "", "xtuner/v1/rl/__init__.py": "",
        "xtuner/v1/rl/trainer/__init__.py": "", "xtuner/v1/model.py": MODEL,
        "xtuner/v1/rl/trainer/worker.py": WORKER, "xtuner/v1/train/cli/rl.py": TRAINER,
        "xtuner_free_model.py": MODEL,
        "lmdeploy/__init__.py": "__version__ = '0.18.0'\n", "lmdeploy/pytorch/__init__.py": "",
        "lmdeploy/pytorch/engine/__init__.py": "", "lmdeploy/pytorch/engine/model_agent/__init__.py": "",
        "lmdeploy/pytorch/engine/model_agent/agent.py": AGENT.replace("{forward}", "" if missing_forward else FORWARD),
        "lmdeploy/serve/__init__.py": "", "lmdeploy/serve/openai/__init__.py": "",
        "lmdeploy/serve/openai/api_server.py": SERVER,
        "lmdeploy-0.18.0.dist-info/METADATA": "Metadata-Version: 2.1\nName: lmdeploy\nVersion: 0.18.0\n",
        "node_site/autotest/__init__.py": "raise ImportError('the node has no rl-autotest harness')\n",
    }
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return root
