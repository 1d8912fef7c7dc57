"""Issue 13's done-when: the packaged GPU cases, GRPO and MOPD, on a simulated 8-GPU xtuner node at two refs.

The node (``xtuner_node.py``): fake ``nvidia-smi`` and ``ray``, a framework repository made by the test with
two commits, the node's own Python, share folders for models, data and the GRPO golden tracker.

A gate (``refs/pull/42/head``, the regressing commit) and a nightly (``main``) start at the same moment
with one node-wide slots folder, as two runners on one node would, each running both cases with
``--strict-cases``: each verdict names its commit (FAIL at the gate, PASS at the nightly); the node lock
runs the 8-GPU runs one after the other; their WORK_DIRs, Ray ports and Ray temp dirs differ; the MOPD
run's TensorBoard log is read through the baseline's aliases; nothing is left running or listening.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import ROOT
from tests.integration.run.xtuner_node import LMDEPLOY_VERSION, build_node

GRPO = "grpo-gsm8k-qwen3-8b-lmdeploy"
MOPD = "mopd-qwen3-vl-2b"


@pytest.fixture
def node(tmp_path: Path) -> dict:
    return build_node(tmp_path)


def _pytest(node: dict, ref: str, results: Path) -> subprocess.Popen:
    argv = [sys.executable, "-m", "pytest", str(ROOT / "autotest" / "suites" / "test_accuracy.py"),
            "-m", "grpo or mopd", "-k", f"{GRPO} or {MOPD}", "--strict-cases", "--framework-repo", str(node["repo"]), "--framework-ref", ref,
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


def _listening(ports: list[int]) -> list[int]:
    """Those of ``ports`` that something on this machine listens on (/proc/net/tcp{,6}, state 0A)."""
    found = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            if fields[3] == "0A":
                found.add(int(fields[1].rsplit(":", 1)[1], 16))
    return sorted(found & set(ports))


def _run(node: dict, runner: str, case: str) -> tuple[Path, dict, dict]:
    """(results folder, the trainer's run_env.json, results.json) of ``case`` on ``runner``."""
    (folder,) = [p.parent for p in (node["tmp"] / f"{runner}-results" / case).rglob("results.json")]
    (run_env_file,) = (folder / "work").glob("*/run_env.json")
    return folder, json.loads(run_env_file.read_text()), json.loads((folder / "results.json").read_text())


@pytest.mark.slow  # a gate and a nightly, each a real run (25-55 s on 2 cores)
def test_a_gate_and_a_nightly_on_one_xtuner_node(node):
    tmp = node["tmp"]
    gate = _pytest(node, "refs/pull/42/head", tmp / "gate-results")
    nightly = _pytest(node, "main", tmp / "nightly-results")
    outputs = {name: proc.communicate(timeout=400)[0] for name, proc in (("gate", gate), ("nightly", nightly))}
    assert (gate.returncode, nightly.returncode) == (1, 0), outputs

    runs = {}
    for runner, sha, status in (("gate", node["bad"], "FAIL"), ("nightly", node["good"], "PASS")):
        for case in (GRPO, MOPD):
            assert f"{case}: {status}" in outputs[runner], outputs[runner]
            folder, run_env, results = _run(node, runner, case)
            assert results["status"] == status, (case, results["status"])
            assert results["context"]["framework"]["sha"] == sha
            for document in ("report.md", "card.md"):
                assert sha in (folder / document).read_text(), document
            # the run's WORK_DIR is its results folder's work/, whatever the runner's environment said
            assert run_env["work_dir"] == str(folder / "work")
            assert Path(run_env["prefix"]) == node["node_python"]  # the node's Python, not the harness venv
            card = (folder / "card.md").read_text()
            assert "is overridden" in card and f"- python: `{node['node_python'] / 'bin' / 'python'}`" in card
            # the node's lmdeploy, read in its own Python, satisfies the case's platform.requires
            preflight = json.loads((folder / "preflight.json").read_text())
            assert preflight["environment"]["framework"]["packages"]["lmdeploy"] == LMDEPLOY_VERSION
            runs[runner, case] = (folder, run_env, results, card)

    # GRPO: the k3 breach at the gate, a consistency request; 8 x H200 picks the 15 s time/step override
    gate_folder, _, gate_results, gate_card = runs["gate", GRPO]
    request = json.loads((gate_folder / "consistency_request.json").read_text())
    assert [b["metric"] for b in request["breaches"]] == ["mismatch/mismatch_k3_kl"]
    assert not (runs["nightly", GRPO][0] / "consistency_request.json").exists()
    assert "time/step: absolute < 15 (threshold for 8 x H200), stepwise" in gate_card
    (time_check,) = [r for r in gate_results["results"] if r["check_id"] == "time/step[stepwise]"]
    assert time_check["threshold"] == 15
    assert "time/step[stepwise]: threshold 15 for 8 x H200" in (gate_folder / "report.md").read_text()

    # MOPD: TensorBoard events tagged eval/<set>/score, judged as the baseline's eval/<set>/acc
    mopd_gate, mopd_env, mopd_results, _ = runs["gate", MOPD]
    assert list((mopd_gate / "work").glob("*/logs/events.out.tfevents.*"))
    failing = {r["check_id"] for r in mopd_results["results"] if r["status"] == "FAIL"}
    assert failing == {"eval/gsm8k/acc[points]"}, failing
    nightly_mopd = runs["nightly", MOPD][2]
    assert {r["check_id"]: r["status"] for r in nightly_mopd["results"]}["eval/geo3k/acc[points]"] == "PASS"
    assert mopd_env["workers"] == 6 and mopd_env["teachers"].count("http://127.0.0.1:") == 2

    # isolated: own work dirs, own Ray ports and temp dirs, nothing written in the checkouts
    envs = [run_env for _, run_env, _, _ in runs.values()]
    assert len({e["work_dir"] for e in envs}) == 4
    grpo_envs = [runs[r, GRPO][1] for r in ("gate", "nightly")]
    assert len({e["ray_head_port"] for e in grpo_envs}) == 2 and len({e["ray_tmpdir"] for e in grpo_envs}) == 2
    ray_log = (tmp / "ray.log").read_text()
    assert ray_log.count("ray start --head") == 4
    for run_env in grpo_envs:
        assert f"--port={run_env['ray_head_port']} --dashboard-port={run_env['ray_dashboard_port']}" in ray_log
        assert not Path(run_env["ray_tmpdir"]).exists()
    assert not list((tmp / "framework-cache").rglob("work_dirs"))
    assert not (tmp / "inherited-work-dir").exists()
    # one node lock: the four 8-GPU runs did not overlap
    ordered = sorted(envs, key=lambda e: e["started"])
    assert all(a["ended"] <= b["started"] for a, b in zip(ordered, ordered[1:]))
    # nothing left running or listening: the fake GCS daemons (each run's own cleanup) and the teachers
    assert _leftover(node["env"]["FAKE_RAY_MARK"]) == []
    assert _listening(node["teacher_ports"]) == []
    for folder, _, _, _ in runs.values():
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
