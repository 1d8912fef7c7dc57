"""Issue 13's and issue 41's done-when: the packaged GPU cases, GRPO and MOPD, on a simulated 8-GPU xtuner node.

The node (``xtuner_node.py``): fake ``nvidia-smi`` and ``ray``, a framework repository made by the test with
two commits, the node's own Python, share folders for models, data and the GRPO golden tracker.

A gate (``refs/pull/42/head``, the regressing commit) and a nightly (``main``) start at the same moment
with one node-wide slots folder, as two runners on one node would, each running both cases with
``--strict-cases``: each verdict names its commit (FAIL at the gate, PASS at the nightly); the node lock
runs the 8-GPU runs one after the other; their WORK_DIRs, Ray ports and Ray temp dirs differ; the MOPD
run's TensorBoard log is read through the baseline's aliases; nothing is left running or listening.

A node that breaks every precondition the cases declare (``node:``) gets one ERROR per case naming each, and
the trainer never starts; a trainer that crashes under the script's ``| tee`` exits 0 and is still no PASS.

A node built with the model stand-ins (``xtuner_node_models.py``): the gate's k3 breach ends in the consistency
job, run where the checkout is (XTUNER_ROOT), with both sides' MSProbe dumps at the breached step and an analysis
naming the layer the regressing commit leaves unsynced. Without the checkout the job ends "not collected".

The node's processes (the harness runs, the foreign cluster a test starts) run in a PID namespace of their own
(``unshare --pid --fork --mount-proc``): the cases' ``exclusive_ray`` probe reads /proc, and under ``pytest -n auto``
other tests start real Ray clusters on this machine at any moment. Without unshare the fixture waits for them.
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers import ROOT
from autotest.readers.reading import read_trace
from tests.integration.run.node_namespace import simulated_node
from tests.integration.run.xtuner_node import LMDEPLOY_VERSION, NOFILE, build_node

GRPO = "grpo-gsm8k-qwen3-8b-lmdeploy"
MOPD = "mopd-qwen3-vl-2b"


@pytest.fixture
def node(tmp_path: Path, request) -> Iterator[dict]:
    with simulated_node(tmp_path, models=getattr(request, "param", False)) as built:
        yield built


def _pytest(node: dict, ref: str, results: Path, cases: str = f"{GRPO} or {MOPD}", env: dict | None = None,
            preexec_fn=None) -> subprocess.Popen:
    argv = [sys.executable, "-m", "pytest", str(ROOT / "autotest" / "suites" / "test_accuracy.py"),
            "-m", "grpo or mopd", "-k", cases, "--strict-cases", "--framework-repo", str(node["repo"]),
            "--framework-ref", ref, "--results-dir", str(results), "--no-history", "-p", "no:cacheprovider", "-q"]
    enter = [*node["enter"], f"--wd={ROOT}"] if node["enter"] else []
    return subprocess.Popen([*enter, *argv], cwd=ROOT, env=env or node["env"], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, preexec_fn=preexec_fn)


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
            assert f"- node, checked before launch: hard open-file limit >= {NOFILE}; `python`, `ray`" in card
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

    # upstream's script as it behaves: `ray stop --force` first in each run, the node-wide ray_log link re-pointed
    # at the last run's WORK_DIR/ray_<MMDDHH>/ where Ray keeps its session, env.json beside the tracker
    assert ray_log.count("ray stop --force") == 4
    link = node["node_tmp"] / "ray_log"
    assert link.is_symlink() and Path(os.readlink(link)).parent in {Path(e["work_dir"]) for e in envs}
    assert list(link.glob("session_*/logs/raylet.out"))
    for runner in ("gate", "nightly"):
        folder, run_env, _ = _run(node, runner, GRPO)
        (env_json,) = (folder / "work").glob("*/logs/env.json")
        assert json.loads(env_json.read_text())["WORK_DIR"] == run_env["work_dir"]
        # two optimizer steps per RL step, numbered by the cumulative counter: each RL step's mini-batch mean is
        # the one xtuner itself put on the summary row, never the rows that happen to carry its number
        (tracker,) = (folder / "work").glob("*/logs/exp_tracking/tracker.jsonl")
        trace = read_trace(tracker, "xtuner")
        assert trace.train_steps == tuple(range(1, 46))
        assert dict(trace.series["train_metrics/worker_0/loss"]) == pytest.approx(
            dict(trace.series["train_metrics/worker_0/step_avg_loss"]))

    # the nightly's consistency job, from a copy of the gate's results (another runner without the checkout):
    # the case cannot run there, so the job ends "not collected" (exit 3, neutral), its wrapper at the gate's commit
    downloaded = tmp / "consistency-runner" / "results"
    shutil.copytree(gate_folder, downloaded)
    job = subprocess.run([sys.executable, "-m", "autotest.cli", "consistency", str(downloaded)], cwd=tmp,
                         env=node["env"], capture_output=True, text=True, timeout=120, check=False)
    assert job.returncode == 3, job.stdout + job.stderr
    assert "not collected: the case cannot run here" in job.stdout
    wrapper = (downloaded / "consistency" / "statistics" / "diagnostic_wrapper.sh").read_text()
    assert f"/commits/{node['bad']}" in wrapper and "examples/v1/scripts/run_rl.sh" in wrapper
    assert (downloaded / "consistency" / "how_to_collect.md").is_file()


@pytest.mark.slow  # a GRPO run, then the consistency job's two re-runs on the model stand-ins (see docs/benchmarks.md)
@pytest.mark.parametrize("node", [True], indirect=True, ids=["with-models"])
def test_a_mismatch_fault_on_the_node_is_collected_on_both_sides_and_localised(node):
    # the gate's GRPO run at the regressing commit breaches k3 and requests the consistency job
    tmp = node["tmp"]
    gate = _pytest(node, "refs/pull/42/head", tmp / "gate-results", cases=GRPO)
    output = gate.communicate(timeout=500)[0]
    assert gate.returncode == 1 and f"{GRPO}: FAIL" in output, output
    folder, _, _ = _run(node, "gate", GRPO)
    assert (folder / "consistency_request.json").is_file()

    # the job on a runner of this node with the checkout (XTUNER_ROOT): the wrapper re-runs the case's own launch
    # at the gate's commit, collection attached through the environment in the trainer and in the api_server process
    env = {**node["env"], "XTUNER_ROOT": str(node["repo"])}
    job = subprocess.run([*node["enter"], *([f"--wd={tmp}"] if node["enter"] else []), sys.executable, "-m",
                          "autotest.cli", "consistency", str(folder)], cwd=tmp, env=env, capture_output=True,
                         text=True, timeout=900, check=False)
    out = folder / "consistency"
    stats = out / "statistics"
    actor = sorted(stats.glob("actor/dump/step*/proc*/dump.json"))
    rollout = sorted(stats.glob("rollout/dump/step*/proc*/dump.json"))
    assert len(actor) == 1 and len(rollout) == 1, (job.stdout + job.stderr)[-4000:]
    # the window is the first breached step (k3 from step 10), the sides two processes: the trainer, the server
    assert actor[0].parent.parent.name == rollout[0].parent.parent.name == "step10"
    assert actor[0].parent.name != rollout[0].parent.name
    wrapper = (stats / "diagnostic_wrapper.sh").read_text()
    assert f"/commits/{node['bad']}" in wrapper and "examples/v1/scripts/run_rl.sh" in wrapper
    report = json.loads((out / "output_5_root_cause_report.json").read_text())
    assert report["verdict"] == "root_cause_found", job.stdout
    cause = report["root_cause"]
    assert cause["bucket"] == "parameter_sync_mismatch", cause
    assert "layers.1.mlp" in f"{cause['module']} {cause['localisation']}", cause
    assert job.returncode == 0 and "layers.1.mlp" in job.stdout, job.stdout + job.stderr
    assert "## Consistency dump job" in (folder / "report.md").read_text()


@pytest.mark.slow  # two cases refused before launch, in one pytest session (10-30 s on 2 cores)
def test_a_node_breaking_every_precondition_gets_one_error_per_case_before_launch(node):
    tmp, env = node["tmp"], dict(node["env"])
    bin_dir = node["node_python"] / "bin"
    # a Ray cluster the harness did not start: the node's own `ray start --head`, as a user would leave it
    foreign_port = 6390
    subprocess.run([*node["enter"], str(bin_dir / "ray"), "start", "--head", f"--port={foreign_port}"], env=env,
                   check=True, capture_output=True, timeout=60)
    try:
        # the framework environment has python3 only: `python` and `ray` are not its own
        (bin_dir / "python").unlink()
        (bin_dir / "ray").unlink()
        env["FRAMEWORK_PYTHON"] = str(bin_dir / "python3")
        env["FAKE_GPU_COUNT"] = "16"  # a 16-GPU node: the MOPD case's 8-GPU slot is half of it
        foreign_owner = os.geteuid() == 0  # only root can give a path to another user
        if foreign_owner:
            link = node["node_tmp"] / "ray_log"
            link.symlink_to(tmp / "someone-elses-ray-logs")
            os.lchown(link, 4242, 4242)
        lowered = NOFILE // 2

        def lower_nofile() -> None:
            soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
            resource.setrlimit(resource.RLIMIT_NOFILE, (min(soft, lowered), lowered))

        proc = _pytest(node, "main", tmp / "results", env=env, preexec_fn=lower_nofile)
        output = proc.communicate(timeout=400)[0]
        assert proc.returncode == 1, output
        for case, expected in ((GRPO, 5), (MOPD, 6)):
            count = expected - (not foreign_owner)
            (results_file,) = (tmp / "results" / case).rglob("results.json")
            results = json.loads(results_file.read_text())
            assert results["status"] == "ERROR", results["status"]
            (check,) = [r for r in results["results"] if r["status"] == "ERROR"]
            line = check["message"]
            assert "\n" not in line and f"node: {count} preconditions of the launch script unmet, nothing launched" \
                in line, line
            assert line in output  # the line the job's log shows
            assert f"the hard limit of the launching process is {lowered}, the script runs `ulimit -n {NOFILE}`" in line
            assert "(2) `python`: " in line and "(3) `ray`: " in line
            assert "gcs_server pid " in line and "`ray stop --force` would kill it" in line
            if foreign_owner:
                assert f"{node['node_tmp'] / 'ray_log'}: owned by uid 4242" in line
            assert ("CUDA_VISIBLE_DEVICES=0,1,2,3,4,5,6,7 of the node's 16 GPUs" in line) == (case == MOPD)
            # logs kept: the card, the preflight and the report of a run that never launched
            for kept in ("card.md", "preflight.json", "report.md"):
                assert (results_file.parent / kept).is_file(), kept
            assert line in (results_file.parent / "report.md").read_text()
        # the trainers never started, nor the scripts: only the foreign cluster's own start is in Ray's log
        assert (tmp / "ray.log").read_text().splitlines() == [f"ray start --head --port={foreign_port}"]
        assert not list((tmp / "results").rglob("run_env.json")) and not list((tmp / "results").rglob("tracker.jsonl"))
        assert len(_leftover(env["FAKE_RAY_MARK"])) == 1  # the harness left the foreign cluster alone
    finally:
        for pid in _leftover(env["FAKE_RAY_MARK"]):
            os.kill(pid, 9)


@pytest.mark.slow  # one GRPO run that crashes at step 20 (10-30 s on 2 cores)
def test_a_trainer_crash_under_the_script_s_tee_exits_0_and_is_no_pass(node):
    tmp = node["tmp"]
    env = {**node["env"], "FAKE_TRAINER_CRASH_AT_STEP": "20"}
    proc = _pytest(node, "main", tmp / "results", cases=GRPO, env=env)
    output = proc.communicate(timeout=400)[0]
    assert proc.returncode == 1, output
    (results_file,) = (tmp / "results" / GRPO).rglob("results.json")
    results = json.loads(results_file.read_text())
    assert results["context"]["launch"]["exit_code"] == 0  # `python ... | tee` without pipefail: the crash is masked
    assert results["status"] == "ERROR"
    checks = {r["check_id"]: r for r in results["results"]}
    assert checks["steps[count]"]["message"].startswith("run is incomplete: 20 training steps (last step 20), "
                                                        "expected 45")
    training_log = next((results_file.parent / "work").glob("training_log_*.txt")).read_text()
    assert "RuntimeError: stand-in crash after step 20" in training_log
    assert _leftover(node["env"]["FAKE_RAY_MARK"]) == []


def test_the_stand_in_script_takes_a_sixth_argument_as_its_accelerator_and_aborts_on_anything_else(tmp_path):
    # as upstream's run_rl.sh does: arguments appended to its command land in ACCELERATOR, never reach the trainer
    built = build_node(tmp_path)
    env = {**built["env"], "PATH": os.pathsep.join([str(built["node_python"] / "bin"), built["env"]["PATH"]])}
    done = subprocess.run(["bash", "examples/v1/scripts/run_rl.sh", "autotest/config/rl_qwen3_gsm8k_grpo.py",
                           "lmdeploy", "m", "d/train.jsonl", "d/test.jsonl", "--diagnostic-config"],
                          cwd=built["repo"], env=env, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 1
    assert "Error: ACCELERATOR must be either 'gpu' or 'npu'!" in done.stdout
    assert (tmp_path / "ray.log").read_text().splitlines() == ["ray stop --force"]  # stopped Ray first, then died
