"""The collection folder in a fresh Python: off (variable unset) it imports nothing heavy, patches nothing and
writes nothing; on, it patches a watched module when that module is imported, and only then."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from tests import waits
from autotest.consistency.attach_run import ATTACH_DIR

PROBE = """
import json, sys
before = list(sys.meta_path)
import rl_autotest_collect
installed = rl_autotest_collect.install()
import xtuner.v1.rl.trainer.worker as worker
print(json.dumps({"installed": installed, "meta_path_same": sys.meta_path == before,
                  "heavy": sorted(m for m in ("torch", "msprobe", "autotest") if m in sys.modules),
                  "wrapped": getattr(worker.TrainingWorker.compute_actor_logprobs, "_rl_autotest_wrapped", False),
                  "sitecustomize": sys.modules["sitecustomize"].__file__}))
"""
WORKER = "class TrainingWorker:\n    def compute_actor_logprobs(self, a, b):\n        return a\n"


def _run(tmp_path: Path, config: Path | None) -> dict:
    pkg = tmp_path / "fw" / "xtuner" / "v1" / "rl" / "trainer"
    pkg.mkdir(parents=True, exist_ok=True)
    for folder in (pkg, *pkg.parents[:4]):
        (folder / "__init__.py").touch()
    (pkg / "worker.py").write_text(WORKER)
    env = {k: v for k, v in os.environ.items() if k != "RL_AUTOTEST_COLLECT"}
    env["PYTHONPATH"] = os.pathsep.join([str(ATTACH_DIR), str(tmp_path / "fw")])
    if config is not None:
        env["RL_AUTOTEST_COLLECT"] = str(config)
    done = waits.run([sys.executable, "-c", PROBE], env=env, cwd=tmp_path, capture_output=True, text=True,
                     limit_s=120, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.splitlines()[-1])


def test_off_touches_nothing(tmp_path: Path) -> None:
    seen = _run(tmp_path, None)
    assert seen["sitecustomize"].startswith(str(ATTACH_DIR))  # it was loaded, and did nothing
    assert seen == {**seen, "installed": False, "meta_path_same": True, "heavy": [], "wrapped": False}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fw"]  # nothing written


def test_on_patches_the_watched_module_when_imported(tmp_path: Path) -> None:
    config = tmp_path / "diag.json"
    config.write_text(json.dumps({"output_dir": str(tmp_path / "out"), "window_step": 2}))
    seen = _run(tmp_path, config)
    assert seen["wrapped"] and seen["heavy"] == []  # torch and MSProbe wait for the window
    status = [json.loads(x) for x in next((tmp_path / "out" / "attach").glob("*.jsonl")).read_text().splitlines()]
    assert {(s["status"], s["what"].rsplit(".", 1)[1]) for s in status} == {
        ("attached", "compute_actor_logprobs"), ("absent", "weight_update")}


CALL = """
import json, sys
import xtuner.v1.rl.trainer.worker as worker
w = worker.TrainingWorker()
print(json.dumps({"result": w.compute_actor_logprobs("a", "b"), "msprobe": "msprobe" in sys.modules}))
"""


def test_a_point_that_cannot_collect_runs_uncollected_and_says_why(tmp_path: Path) -> None:
    """MSProbe missing from the node's Python: the forward still runs, and the attach record says why."""
    _run(tmp_path, None)  # writes the stand-in module
    (tmp_path / "fw" / "xtuner" / "v1" / "rl" / "trainer" / "worker.py").write_text(
        WORKER + "    _engine = type('E', (), {'model': None})\n")
    (tmp_path / "blocked" / "msprobe").mkdir(parents=True)
    (tmp_path / "blocked" / "msprobe" / "__init__.py").write_text("raise ImportError('not on this node')\n")
    config = tmp_path / "diag.json"
    config.write_text(json.dumps({"output_dir": str(tmp_path / "out"), "window_step": 1}))
    env = {**os.environ, "RL_AUTOTEST_COLLECT": str(config),
           "PYTHONPATH": os.pathsep.join([str(ATTACH_DIR), str(tmp_path / "fw"), str(tmp_path / "blocked")])}
    done = waits.run([sys.executable, "-c", CALL], env=env, cwd=tmp_path, capture_output=True, text=True,
                     limit_s=120, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout.splitlines()[-1])["result"] == "a"
    status = [json.loads(x) for x in next((tmp_path / "out" / "attach").glob("*.jsonl")).read_text().splitlines()]
    errors = [s for s in status if s["status"] == "error"]
    assert len(errors) == 1 and errors[0]["detail"] == "ImportError: not on this node"


def test_a_module_the_package_no_longer_has_is_recorded_missing(tmp_path: Path) -> None:
    """The package was imported but the point's module moved (lmdeploy's model_agent.py became a package)."""
    _run(tmp_path, None)
    (tmp_path / "fw" / "xtuner" / "v1" / "rl" / "trainer" / "worker.py").rename(
        tmp_path / "fw" / "xtuner" / "v1" / "rl" / "trainer" / "training_worker.py")
    config = tmp_path / "diag.json"
    config.write_text(json.dumps({"output_dir": str(tmp_path / "out"), "window_step": 1}))
    env = {**os.environ, "RL_AUTOTEST_COLLECT": str(config),
           "PYTHONPATH": os.pathsep.join([str(ATTACH_DIR), str(tmp_path / "fw")])}
    done = waits.run([sys.executable, "-c", "import xtuner.v1.rl.trainer.training_worker"], env=env,
                     cwd=tmp_path, capture_output=True, text=True, limit_s=120, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    status = [json.loads(x) for x in next((tmp_path / "out" / "attach").glob("*.jsonl")).read_text().splitlines()]
    assert [(s["status"], s["what"], s["detail"]) for s in status] == [
        ("missing", "xtuner.v1.rl.trainer.worker.TrainingWorker.compute_actor_logprobs",
         "xtuner.v1.rl.trainer has no worker")]


def test_the_run_s_own_sitecustomize_still_runs(tmp_path: Path) -> None:
    own = tmp_path / "venv-site"
    own.mkdir()
    (own / "sitecustomize.py").write_text("import os\nos.environ['OWN_SITECUSTOMIZE'] = 'ran'\n")
    env = {k: v for k, v in os.environ.items() if k != "RL_AUTOTEST_COLLECT"}
    env["PYTHONPATH"] = os.pathsep.join([str(ATTACH_DIR), str(own)])
    done = waits.run([sys.executable, "-c", "import os; print(os.environ.get('OWN_SITECUSTOMIZE'))"], env=env,
                     capture_output=True, text=True, limit_s=60, check=False)
    assert done.stdout.strip() == "ran", done.stderr[-2000:]
