"""The base install works: ``pip install rl-autotest`` (no extra) gates a third-party case end to end.

The wheel is built from this checkout and installed into a fresh venv with its base dependencies only
(resolved by pip, nothing shared with the test interpreter's site-packages): no torch, no SciPy, no extra.
A scripted trainer nobody here wrote the harness for (plain Python, a JSONL log with its own metric names,
a seed from its command line) is then taken through ``init``, ``calibrate``, ``baseline promote``, ``power``
and ``compare --out`` (which records the verdict in the SQLite history), then ``history show``, from its own
git repository. Then the example plugin (examples/plugin: a ``keyvalue`` log reader and a ``median`` check kind)
is installed from its wheel into the same venv and gates a case of its own: the trainer's ``*.kv`` log read by the
plugin's reader, judged by the plugin's check, through ``run``, and calibrated by the plugin's own rule. 38–67 s on 2 cores (10 calibration runs, the default ``init`` writes; pip resolving the base
dependencies from the local package cache): docs/benchmarks.md.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.helpers import ROOT
from tests.wheels import build_wheel, commit_all, user_env
from tests import waits

pytestmark = pytest.mark.slow

#: a trainer's own loop: 20 logged steps of a rising reward and a falling entropy, seed-dependent noise
#: (each metric's noise from its own stream: with one shared stream seed 8's entropy noise averages +0.015 over
#: the 20 steps, 3.3 sd, and the pooled entropy gate init proposes rightly false-alarms on it at the self-check)
TRAIN = """\
import json, os, random, sys
work_dir, seed = sys.argv[1], int(sys.argv[2])
rng = {m: random.Random(f"{seed}-{m}") for m in ("reward", "entropy")}
lr_scale = float(os.environ.get("LR_SCALE", "1"))
with open(os.path.join(work_dir, "metrics.jsonl"), "w") as log:
    for step in range(1, 21):
        row = {"step": step, "reward": lr_scale * step / 20 + rng["reward"].gauss(0, 0.02),
               "entropy": 3 - lr_scale * step / 20 + rng["entropy"].gauss(0, 0.02)}
        log.write(json.dumps(row) + "\\n")
"""
#: the same trainer logging key=value lines (the example plugin's format)
TRAIN_KV = """\
import os, random, sys
work_dir, seed = sys.argv[1], int(sys.argv[2])
rng = random.Random(seed)
lr_scale = float(os.environ.get("LR_SCALE", "1"))
with open(os.path.join(work_dir, "metrics.kv"), "w") as log:
    for step in range(1, 21):
        log.write(f"step={step} reward={lr_scale * step / 20 + rng.gauss(0, 0.02):.5f}\\n")
"""
#: a case of the plugin's format and a baseline with the plugin's check kind
KV_CASE = """\
name: mine-kv
description: the trainer's key=value log, read by the example plugin
markers: []
goal: the plugin's reader and check kind gate a case
minimal_scale: one Python process writing 20 lines
platform: {gpus: 0, framework: null}
inputs: {}
launch:
  command: ["{python}", train_kv.py, "{work_dir}", "{seed}"]
  timeout_s: 60  # bounds a broken run: this one takes seconds, at load 20 too
tracker: {format: keyvalue, work_dir_env: WORK_DIR}
expected: {steps: 20, exact_steps: true}
baseline: ../baselines/mine-kv.yaml
seed: {default: 4, calibration: [0, 1, 2, 3]}
"""
KV_BASELINE = "schema_version: 1\nname: mine-kv\ngolden:\n  table:\n    reward: {%s}\nchecks:\n" % ", ".join(
    f"{step}: {step / 20}" for step in range(1, 21)) + \
    "- {metric: reward, method: absolute, operator: '<', threshold: 0.03, scope: median}\n"
#: the heavy packages the base install must not pull in
NOT_IN_BASE = ("torch", "scipy", "ruptures", "pandas", "tensorboard", "transformers", "pytest")


def _base_venv(tmp: Path) -> Path:
    """A fresh venv holding the wheel and what pip resolves for it: the base dependencies only."""
    wheel = build_wheel(tmp)
    venv = tmp / "venv"
    waits.run([sys.executable, "-m", "venv", str(venv)], check=True, capture_output=True, limit_s=120)
    install = waits.run([str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet", str(wheel)],
                        capture_output=True, text=True, limit_s=600)
    assert install.returncode == 0, install.stdout + install.stderr
    return venv


def _run(args: list[str], cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess:
    done = waits.run(args, cwd=cwd, env=env, capture_output=True, text=True, limit_s=600)
    assert "Traceback" not in done.stderr, done.stderr
    return done


def test_the_base_install_gates_a_third_party_case_end_to_end(tmp_path: Path) -> None:
    venv = _base_venv(tmp_path)
    env = user_env(venv)
    python = str(venv / "bin" / "python")
    installed = _run([python, "-m", "pip", "list", "--format=freeze"], tmp_path, env).stdout.lower()
    assert "rl-autotest" in installed or "rl_autotest" in installed
    assert [p for p in NOT_IN_BASE if f"\n{p}==" in f"\n{installed}"] == []

    project = tmp_path / "my-trainer"
    (project / "accuracy" / "cases").mkdir(parents=True)
    (project / "train.py").write_text(TRAIN)
    (project / "rl-autotest.toml").write_text('cases = ["accuracy/cases"]\nbaselines = "accuracy/baselines"\n'
                                              'results = "accuracy/results"\n')
    (project / ".gitignore").write_text("accuracy/results/\n")
    subprocess.run(["git", "init", "-q", str(project)], check=True, env=env)
    commit_all(project, env, "my trainer")
    cli = str(venv / "bin" / "rl-autotest")

    init = _run([cli, "init", "mine", "--", "{python}", "train.py", "{work_dir}", "{seed}"], project, env)
    assert init.returncode == 0, init.stdout + init.stderr
    assert init.stdout.splitlines()[-1] == "next: rl-autotest calibrate mine"
    commit_all(project, env, "accuracy case proposed by rl-autotest init")
    calibrate = _run([cli, "calibrate", "mine"], project, env)
    assert calibrate.returncode == 0, calibrate.stdout + calibrate.stderr
    assert "reward[pooled]: placeholder -> " in calibrate.stdout
    promote = _run([cli, "baseline", "promote", "mine"], project, env)
    assert promote.returncode == 0, promote.stdout + promote.stderr
    power = _run([cli, "power", "mine"], project, env)
    assert power.returncode in (0, 1), power.stdout + power.stderr  # 1: a target not met, said per gate
    assert "reward[pooled]" in power.stdout

    baseline = project / "accuracy" / "baselines" / "mine.yaml"
    for name, scale, code, word in (("clean", "1", 0, "PASS"), ("slow", "0.5", 1, "FAIL")):
        work = tmp_path / name
        work.mkdir()
        subprocess.run([python, "train.py", str(work), "0"], cwd=project, check=True,
                       env=user_env(venv, LR_SCALE=scale))
        out = project / "accuracy" / "results" / "mine" / name
        compare = _run([cli, "compare", "--baseline", str(baseline), "--current", str(work / "metrics.jsonl"),
                        "--out", str(out)], project, env)
        assert compare.returncode == code, compare.stdout + compare.stderr
        assert word in compare.stdout and (out / "report.md").is_file() and list((out / "plots").glob("*.png"))
    assert (project / "accuracy" / "results" / "history.sqlite").is_file()
    show = _run([cli, "history", "show", "mine"], project, env)
    assert show.returncode == 0, show.stdout + show.stderr
    assert [line.split()[2] for line in show.stdout.splitlines()[1:]] == ["PASS", "FAIL"]

    _plugin_gates_its_own_case(tmp_path, venv, project, env)


def _plugin_gates_its_own_case(tmp_path: Path, venv: Path, project: Path, env: dict[str, str]) -> None:
    wheels = tmp_path / "plugin-wheel"
    waits.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation",
               "--wheel-dir", str(wheels), str(ROOT / "examples" / "plugin")], check=True, capture_output=True,
              limit_s=300)
    install = _run([str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet", "--no-deps",
                    str(next(wheels.glob("*.whl")))], tmp_path, env)
    assert install.returncode == 0, install.stdout + install.stderr
    (project / "train_kv.py").write_text(TRAIN_KV)
    (project / "accuracy" / "cases" / "mine-kv.yaml").write_text(KV_CASE)
    (project / "accuracy" / "baselines" / "mine-kv.yaml").write_text(KV_BASELINE)
    commit_all(project, env, "a case of the plugin's format")
    cli = str(venv / "bin" / "rl-autotest")
    run = _run([cli, "run", "mine-kv", "--yes", "--no-history"], project, env)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "mine-kv: PASS" in run.stdout
    slow = _run([cli, "run", "mine-kv", "--yes", "--no-history"], project, {**env, "LR_SCALE": "0.5"})
    assert slow.returncode == 1, slow.stdout + slow.stderr
    assert "reward[median]: reward: median absolute error over 20 steps" in slow.stdout
    # the plugin's own calibration rule makes the candidate's threshold, and says so
    calibrate = _run([cli, "calibrate", "mine-kv", "--runs", "4"], project, env)
    assert calibrate.returncode in (0, 1), calibrate.stdout + calibrate.stderr  # 1: the self-check's verdict
    candidate = yaml.safe_load((project / "accuracy" / "baselines" / "mine-kv.candidate.yaml").read_text())
    derivation = candidate["checks"][0]["derivation"]
    assert derivation.startswith("calibrated by the median rule (rl-autotest-example-plugin), N=4: "), derivation
    assert "| median (leave-one-out) |" in (project / "accuracy" / "baselines" / "mine-kv.candidate.md").read_text()
    typo = _run([cli, "compare", "--baseline", str(project / "accuracy" / "baselines" / "mine-kv.yaml"),
                 "--current", str(project / "train_kv.py"), "--format", "keyvalu"], project, env)
    assert typo.returncode == 2 and len(typo.stderr.strip().splitlines()) == 1, typo.stderr
