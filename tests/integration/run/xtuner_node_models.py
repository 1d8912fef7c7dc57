"""The simulated xtuner node's model stand-ins: where the consistency job attaches (see test_xtuner_node.py).

:func:`add_models` puts the attached-collection stand-ins of ``tests/integration/consistency/standin_framework.py``
(a real tiny Qwen3 on CPU) at xtuner's and lmdeploy's real module paths in the node's framework repository:
``xtuner.v1.rl.trainer.worker.TrainingWorker`` (``compute_actor_logprobs``, ``weight_update``) and
``lmdeploy.pytorch.engine.model_agent.agent.BaseModelAgent`` (``_forward_impl``, ``update_params``) behind an
``lmdeploy.serve.openai.api_server`` process. Only the modules are taken: the node keeps its own ``run_rl.sh`` and
trainer, and its lmdeploy version stays the node Python's (no dist-info in the checkout).

The node's trainer, when its checkout has these modules, runs its RL steps on them after writing its tracker rows:
it starts the api_server process (as xtuner's rollout worker starts lmdeploy's), sends each step's two requests to
it, recomputes their log-probs in a ``TrainingWorker`` (in the trainer's process: Ray is the node's fake one), moves
the weights and syncs them to the server. :func:`fault_commit_change` is the regressing commit's change to the
engine: its weight load skips ``model.layers.1.mlp``, so from the first sync the rollout runs one layer off. The
tracker's k3 is still the trainer's scripted value (cheap, and the golden is the good commit's own run); the model
steps are what the consistency job's re-run collects.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from tests.integration.consistency.standin_framework import write_standin

#: the stand-in's files the node takes (its run_rl.sh, trainer, node_site and lmdeploy metadata stay out)
MODULES = ("xtuner/v1/model.py", "xtuner/v1/rl/__init__.py", "xtuner/v1/rl/trainer/__init__.py",
           "xtuner/v1/rl/trainer/worker.py", "xtuner_free_model.py", "lmdeploy")
WORKER = "xtuner/v1/rl/trainer/worker.py"
AGENT = "lmdeploy/pytorch/engine/model_agent/agent.py"
ENV_FAULT = 'os.environ.get("ROLLOUT_FAULT") == "unsynced-layer"'

# the node trainer's RL steps on the model stand-ins (appended to its rl.py; runs with cwd = the checkout)
MODEL_STEPS = """

def _model_steps(steps):
    # each RL step: the rollout engine's forward in its api_server process, the actor's log-prob recompute here,
    # an optimizer step, a weight sync to the engine
    import subprocess, urllib.request
    import torch
    from xtuner.v1.rl.trainer.worker import SequenceContext, TrainingWorker

    server = subprocess.Popen([sys.executable, "-m", "lmdeploy.serve.openai.api_server"], stdout=subprocess.PIPE,
                              text=True)
    try:
        url = "http://127.0.0.1:" + server.stdout.readline().strip()
        worker = TrainingWorker(url)
        for step in range(1, steps + 1):
            ids = (torch.arange(16).reshape(2, 8) * 3 + step) % 32
            body = json.dumps({"input_ids": ids.tolist()}).encode()
            urllib.request.urlopen(urllib.request.Request(url + "/generate", body), timeout=60).read()
            worker.compute_actor_logprobs([SequenceContext(ids)], [ids[:, 1:]])
            worker.fit(step)
            worker.weight_update()
    finally:
        server.terminate()
        server.wait(timeout=30)


if os.path.exists(os.path.join("xtuner", "v1", "rl", "trainer", "worker.py")):
    _model_steps(45)
"""


def add_models(repo: Path) -> None:
    """Copy the stand-in modules into ``repo`` (before its first commit)."""
    with tempfile.TemporaryDirectory() as scratch:
        standin = write_standin(Path(scratch) / "standin")
        for rel in MODULES:
            source, target = standin / rel, repo / rel
            if source.is_dir():
                shutil.copytree(source, target, dirs_exist_ok=True)
            else:
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(source, target)
    assert ENV_FAULT in (repo / AGENT).read_text()  # the stand-in changed: update fault_commit_change


def fault_commit_change(repo: Path) -> None:
    """The regressing commit's engine change: its weight load skips ``model.layers.1.mlp`` every sync."""
    agent = repo / AGENT
    agent.write_text(agent.read_text().replace(ENV_FAULT, "True"))
