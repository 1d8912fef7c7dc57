"""A simulated framework checkout holding its own accuracy spec (xtuner's ``autotest/config.yaml`` layout) at several
commits, and the cases and baseline that run it (for test_framework_spec.py).

Commits, in order on ``main`` and beside it:

- ``good`` (main): the spec matches the baseline: rewards absolute < 0.05 (the checker's default p80), k3 a per-step
  value < 0.001, ``XTUNER_DETERMINISTIC=true``, timeout 60 s;
- ``moved`` (branch ``spec-moved``, also ``refs/pull/9/head``): the spec bounds k3's drift from the golden at 1e-5
  (absolute ``<=``, as xtuner's seed-era spec did) and gives the run 120 s; the code is the same;
- ``gone`` (branch ``no-spec``): the spec file removed;
- ``broken`` (branch ``bad-spec``): the spec names a method the checker does not have.

The launch script writes three xtuner tracker rows (rewards 0.50x, k3 2e-4 against a golden 1e-4) and prints the
``XTUNER_DETERMINISTIC`` it sees.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from autotest.inputs.case import load_case
from autotest.pipeline import JudgeOptions, LaunchOptions, PublishOptions, RunOptions, run_case
from tests.helpers import write_yaml

LAUNCH = """#!/usr/bin/env bash
set -euo pipefail
exp="$WORK_DIR/$(date +%Y%m%d%H%M%S)/logs/exp_tracking"
mkdir -p "$exp"
for step in 1 2 3; do
  reward="0.50$((RANDOM % 10))"
  echo "{\\"response/rewards/mean\\": $reward, \\"mismatch/mismatch_k3_kl\\": 0.0002, \\"step\\": $step}" \\
    >> "$exp/tracker.jsonl"
done
echo "XTUNER_DETERMINISTIC=${XTUNER_DETERMINISTIC:-unset}"
"""

SPEC = """default_config:
    train: {resource: {envs: [HF_HUB_CACHE=/mnt/hf]}}
case:
    fw-rl:
        -
            type: rl
            resource:
                envs:
                    - MODEL_PATH=/mnt/share/model
                    - XTUNER_DETERMINISTIC=true
            assert_info:
                base_metric: fw-rl/tracker.jsonl
                check_metrics:
                    - {metric: response/rewards/mean, threshold: 0.05, method: absolute, operator: "<"}
                    - {metric: mismatch/mismatch_k3_kl, threshold: 0.001, method: value, operator: "<"}
            timeout: 60
"""
MOVED = SPEC.replace("threshold: 0.001, method: value, operator: \"<\"",
                     "threshold: 0.00001, method: absolute, operator: \"<=\"").replace("timeout: 60", "timeout: 120")
BROKEN = SPEC.replace("method: value", "method: ratio")

BASELINE = """
golden:
  table:
    response/rewards/mean: {1: 0.5, 2: 0.5, 3: 0.5}
    mismatch/mismatch_k3_kl: {1: 0.0001, 2: 0.0001, 3: 0.0001}
checks:
  - {metric: response/rewards/mean, method: absolute, operator: "<", threshold: 0.05, scope: percentile, percentile: 80}
  - {metric: mismatch/mismatch_k3_kl, method: value, operator: "<", threshold: 0.001}
  # keeps k3's golden values for a spec that checks its drift (a reference check never gates)
  - {metric: mismatch/mismatch_k3_kl, method: absolute, operator: "<", threshold: 1, scope: final, severity: reference}
"""


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True).stdout.strip()


def _commit(repo: Path, message: str) -> str:
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", message)
    return _git(repo, "rev-parse", "HEAD")


def build_repo(tmp_path: Path) -> dict[str, str]:
    repo = tmp_path / "fakefw"
    (repo / "autotest").mkdir(parents=True)
    _git(repo, "init", "-q", "-b", "main")
    _git(repo, "config", "user.email", "t@example.com")
    _git(repo, "config", "user.name", "t")
    (repo / "run.sh").write_text(LAUNCH)
    (repo / "autotest" / "config.yaml").write_text(SPEC)
    shas = {"repo": str(repo), "good": _commit(repo, "good")}
    for branch, text, name in (("spec-moved", MOVED, "moved"), ("no-spec", None, "gone"),
                               ("bad-spec", BROKEN, "broken")):
        _git(repo, "checkout", "-q", "-b", branch, "main")
        if text is None:
            (repo / "autotest" / "config.yaml").unlink()
        else:
            (repo / "autotest" / "config.yaml").write_text(text)
        shas[name] = _commit(repo, name)
    _git(repo, "update-ref", "refs/pull/9/head", shas["moved"])
    _git(repo, "checkout", "-q", "main")
    return shas


def write_case(tmp_path: Path, repo: str, mode: str, env: str = "") -> Path:
    """``fw-<mode>``: the repository's case ``fw-rl``, following its spec or holding its own."""
    write_yaml(tmp_path / "baselines" / "fw.yaml", BASELINE)
    return write_yaml(tmp_path / "cases" / f"fw-{mode}.yaml", f"""
name: fw-{mode}
description: a framework case beside the framework's own spec for it
markers: [grpo]
goal: the framework's rewards and k3 stay where its spec and the baseline want them
minimal_scale: three steps of a shell script
platform:
  gpus: 0
  framework: {{name: fakefw, env: FAKEFW_ROOT, repo: "{repo}", ref: main}}
launch:
  command: [bash, run.sh]
  cwd: ${{FAKEFW_ROOT}}
  timeout_s: 60
{env}tracker: {{format: xtuner}}
expected: {{steps: 3}}
baseline: ../baselines/fw.yaml
framework_spec: {{path: autotest/config.yaml, case: fw-rl, mode: {mode}}}
""")


def run(case_path: Path, tmp_path: Path, **launch):
    options = RunOptions(LaunchOptions(results_root=tmp_path / "results",
                                       env={"RL_AUTOTEST_FRAMEWORK_CACHE": str(tmp_path / "cache")}, **launch),
                         JudgeOptions(), PublishOptions(with_plots=False))
    return run_case(load_case(case_path), options)
