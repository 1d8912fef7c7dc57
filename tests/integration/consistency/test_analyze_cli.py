"""``rl-autotest consistency analyze`` on real MSProbe dumps from separate processes, as frameworks make them.

Training side: a ``transformers`` Qwen3 with HF names, two data-parallel ranks under gloo
(``step3/rank0``, ``step3/rank1``). Rollout side: its engine-layout copy with fused ``qkv_proj`` /
``gate_up_proj`` and vLLM names, one engine process per rank's requests (``step3/proc{pid}``),
with one module perturbed per scenario. Correlation logs in the seed's format pair the ranks.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.shared_build import content_key, shared_build
from tests import waits

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[3]
MAKE_DUMP = Path(__file__).with_name("make_dump.py")
RANK_REQUESTS = ("r0,r1", "r2,r3")


@dataclass(frozen=True)
class Side:
    dump: Path
    log: Path


def _env(**extra: str) -> dict[str, str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, (str(ROOT), os.environ.get("PYTHONPATH"))))}
    return {**env, **extra}


def _launch(side: str, scenario: str, root: Path, requests: str, task: str = "statistics",
            env: dict[str, str] | None = None, window: str = "3") -> subprocess.Popen[bytes]:
    cmd = [sys.executable, str(MAKE_DUMP), "--side", side, "--scenario", scenario, "--dump-path", str(root / "dump"),
           "--log", str(root / "correlation.jsonl"), "--requests", requests, "--task", task,
           "--window", window, "--steps", window.split(",")[-1]]
    return subprocess.Popen(cmd, env=env or _env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


DUMP_NAMES = ("train", "norm", "unsynced", "train_tensor", "fused_k_tensor", "other")


def _make_dumps(base: Path) -> None:
    port = str(_free_port())
    procs = [
        _launch("train", "healthy", base / "train", RANK_REQUESTS[rank],
                env=_env(WORLD_SIZE="2", RANK=str(rank), MASTER_ADDR="127.0.0.1", MASTER_PORT=port))
        for rank in (0, 1)
    ]
    # The rollout engines serve the ranks' requests in the other order: only the logs can pair them.
    procs += [_launch("rollout", "norm", base / "norm", requests) for requests in reversed(RANK_REQUESTS)]
    procs += [_launch("rollout", "unsynced", base / "unsynced", RANK_REQUESTS[0])]
    procs += [_launch("train", "healthy", base / "train_tensor", RANK_REQUESTS[0], task="tensor")]
    procs += [_launch("rollout", "fused-k", base / "fused_k_tensor", RANK_REQUESTS[0], task="tensor")]
    procs += [_launch("rollout", "other", base / "other", RANK_REQUESTS[0], window="3,4")]
    for proc in procs:
        _, err = waits.communicate(proc, 600)
        assert proc.returncode == 0, err.decode()[-2000:]


@pytest.fixture(scope="session")
def dumps(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Side]:
    """The framework-shaped dumps, made once per session (xdist workers share them; tests only read them)."""
    key = content_key(DUMP_NAMES, RANK_REQUESTS, files=(MAKE_DUMP,))
    base = shared_build(tmp_path_factory, "framework-dumps", key, _make_dumps)
    return {name: Side(base / name / "dump", base / name / "correlation.jsonl") for name in DUMP_NAMES}


def analyze(tmp_path: Path, train: Side, rollout: Side, *extra: str, logs: bool = True) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "autotest.cli", "consistency", "analyze", "--train-dump", str(train.dump),
           "--rollout-dump", str(rollout.dump), "--out", str(tmp_path / "out"), *extra]
    if logs:
        cmd += ["--train-correlation", str(train.log), "--rollout-correlation", str(rollout.log)]
    return waits.run(cmd, check=False, env=_env(), capture_output=True, text=True, limit_s=300)


def report(tmp_path: Path) -> dict:
    return json.loads((tmp_path / "out" / "output_5_root_cause_report.json").read_text())


def test_layouts_are_the_frameworks(dumps):
    assert sorted(p.name for p in (dumps["train"].dump / "step3").iterdir()) == ["rank0", "rank1"]
    assert all(p.name.startswith("proc") for p in (dumps["norm"].dump / "step3").iterdir())
    keys = json.loads(next(dumps["norm"].dump.glob("step3/proc*/dump.json")).read_text())["data"]
    assert "Module.model.layers.0.self_attn.qkv_proj.QKVParallelLinear.forward.1" in keys
    assert "Module.model.layers.0.mlp.gate_up_proj.MergedColumnParallelLinear.forward.0" in keys


def test_norm_is_named_with_ranks_paired_by_the_logs(dumps, tmp_path):
    result = analyze(tmp_path, dumps["train"], dumps["norm"])
    assert result.returncode == 0, result.stderr
    cause = report(tmp_path)["root_cause"]
    assert (cause["module"], cause["bucket"]) == ("model.layers.1.post_attention_layernorm", "module_impl_mismatch")
    pairs = {report(tmp_path)["context"]["paired_forwards"]}
    assert pairs == {2}  # rank0 and rank1 each found their engine process by request id
    for name in ("output_1_key_mapping", "output_2_mapping", "output_3_value_compare", "output_4_module_analysis"):
        assert (tmp_path / "out" / f"{name}.json").exists() and (tmp_path / "out" / f"{name}.csv").exists()
    assert "first divergence: model.layers.1.post_attention_layernorm" in result.stdout


def test_never_synced_layer_without_logs_states_the_pairing_assumption(dumps, tmp_path):
    result = analyze(tmp_path, dumps["train"], dumps["unsynced"], logs=False)
    assert result.returncode == 0, result.stderr
    doc = report(tmp_path)
    cause = doc["root_cause"]
    assert cause["bucket"] == "parameter_sync_mismatch" and cause["localisation"].startswith("model.layers.1.mlp")
    assert cause["module"] == "model.layers.1.mlp.{gate_proj,up_proj}"
    assert cause["train_modules"] == ["model.layers.1.mlp.gate_proj", "model.layers.1.mlp.up_proj"]
    assert cause["rollout_modules"] == ["model.layers.1.mlp.gate_up_proj"]
    assumptions = "\n".join(doc["assumptions"])
    assert "no correlation logs" in assumptions and "rank1" in assumptions  # rank1 listed as not compared
    assert "## Assumptions" in (tmp_path / "out" / "output_5_root_cause_report.md").read_text()


def test_projection_inside_a_fused_group_is_split_and_named(dumps, tmp_path):
    result = analyze(tmp_path, dumps["train_tensor"], dumps["fused_k_tensor"])
    assert result.returncode == 0, result.stderr
    cause = report(tmp_path)["root_cause"]
    assert cause["bucket"] == "parameter_sync_mismatch" and cause["evidence"] == "tensor"
    assert cause["module"] == "model.layers.0.self_attn.k_proj"
    assert cause["divergent_parts"] == ["model.layers.0.self_attn.k_proj"]
    assert cause["rollout_modules"] == ["model.layers.0.self_attn.qkv_proj"]
    rows = json.loads((tmp_path / "out" / "output_3_value_compare.json").read_text())
    q_rows = [r for r in rows if r["tensor"] == "parameters.weight[q_proj]"]
    assert q_rows and all(r["status"] == "ok" and r["evidence"] == "tensor" for r in q_rows)


@pytest.mark.parametrize("case", ["empty", "missing", "steps", "modules", "one_log"])
def test_unusable_inputs_give_one_line(dumps, tmp_path, case):
    empty = tmp_path / "empty"
    empty.mkdir()
    args = {
        "empty": (dumps["train"], Side(empty, empty / "none.jsonl"), (), "no MSProbe dump.json under the rollout"),
        "missing": (Side(tmp_path / "nope", tmp_path / "x"), dumps["norm"], (), "the train dump folder does not exist"),
        "steps": (dumps["train"], Side(dumps["other"].dump / "step4", dumps["other"].log), (), "mismatched steps"),
        "modules": (dumps["train"], dumps["other"], ("--step", "3"), "no common modules"),
        "one_log": (dumps["train"], dumps["norm"], ("--train-correlation", str(dumps["train"].log)), "pass both"),
    }[case]
    train, rollout, extra, message = args
    result = analyze(tmp_path, train, rollout, *extra, logs=False)
    assert result.returncode == 2, result.stdout + result.stderr
    assert result.stderr.count("\n") == 1 and message in result.stderr, result.stderr
    assert "Traceback" not in result.stderr
