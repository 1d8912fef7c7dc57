"""Experiment card: the four seed sections, prerequisites with status, the exact (redacted) launch."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from autotest.inputs.case import load_case
from autotest.run.card import render_card
from autotest.run.launch import LaunchSpec, launch_spec
from autotest.run.preflight import run_preflight

CRITERIA = ["response/rewards/mean: absolute < 0.1, p80 of per-step errors",
            "mismatch/mismatch_k3_kl: absolute <= 0.0001, stepwise"]


def sections(card: str) -> list[str]:
    return [line for line in card.splitlines() if line.startswith("## ")]


def test_embedded_case_card_with_the_exact_command(tmp_path: Path) -> None:
    case = load_case("tiny-grpo")
    spec = launch_spec(case, tmp_path / "work", seed=2, environ={})
    card = render_card(case, run_preflight(case, environ={"PATH": "/nonexistent"}), CRITERIA, spec=spec)
    assert card.startswith("# Experiment card: tiny-grpo\n")
    assert sections(card) == ["## 目标 Goal", "## 判读标准 Pass criteria", "## 最小规模 Minimal scale",
                              "## 前置条件 Prerequisites", "## 启动 Launch"]
    assert f"- {CRITERIA[0]}\n- {CRITERIA[1]}\n" in card
    assert ("- completion: the tracker reaches exactly step 45 and the run exits 0 within 300 s "
            "(launch.timeout_s); the exit code alone is not trusted") in card
    assert case.goal.strip() in card and case.minimal_scale.strip() in card
    assert f"```bash\n{sys.executable} -m autotest.workloads.grpo --work-dir {(tmp_path / 'work').resolve()} --seed 2\n```" in card
    assert f"`WORK_DIR={(tmp_path / 'work').resolve()}`" in card
    assert "- inputs: none declared" in card and "- this machine: runnable here" in card
    assert "- platform: CPU only (no GPU needed)" in card
    assert "- commit under test: `" in card and "ray stop" not in card


def test_gpu_case_card_shows_missing_inputs_and_skip(tmp_path: Path) -> None:
    case = load_case("grpo-gsm8k-qwen3-8b-lmdeploy")
    share = tmp_path / "share"
    (share / "Qwen3-8B").mkdir(parents=True)
    env = {"CI_SHARE_MODEL": str(share), "RL_AUTOTEST_GPU_COUNT": "0"}
    card = render_card(case, run_preflight(case, environ=env), CRITERIA)
    assert f"| model | `{share}/Qwen3-8B` | found |" in card
    assert "| train_data | `${CI_SHARE_DATA}/gsm8k/train-mini.jsonl` | **MISSING** (CI_SHARE_DATA is not set) |" in card
    assert ("- this machine: **SKIP**: needs 8 GPUs, found 0 (RL_AUTOTEST_GPU_COUNT); "
            "XTUNER_ROOT is not set (xtuner checkout)") in card
    assert "- framework: xtuner checkout from $XTUNER_ROOT: `not found`" in card
    assert "Command (template: placeholders are filled per run):" in card
    assert "bash -x examples/v1/scripts/run_rl.sh autotest/config/rl_qwen3_gsm8k_grpo.py lmdeploy" in card
    assert "the harness stops that cluster only afterwards (never `ray stop --force`)" in card
    assert "expected wall time under 2400 s" in card


def test_card_names_a_dirty_framework_commit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path))
    repo = tmp_path / "xtuner"
    repo.mkdir()
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q", "-b", "fix-kl"], check=True)
    (repo / "loss.py").write_text("a = 1\n")
    subprocess.run([*git, "add", "loss.py"], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "x"], check=True)
    (repo / "loss.py").write_text("a = 2\n")
    case = load_case("grpo-gsm8k-qwen3-8b-lmdeploy")
    card = render_card(case, run_preflight(case, environ={"XTUNER_ROOT": str(repo),
                                                           "RL_AUTOTEST_GPU_COUNT": "8"}), CRITERIA)
    assert f"- commit under test: `{repo.resolve()}` " in card and "on fix-kl, dirty" in card
    assert "loss.py | 2 +-" in card
    assert "- harness: rl-autotest " in card  # the harness's own version and commit, recorded apart
    assert "- this machine: runnable here" in card


def test_card_redacts_secrets(tmp_path: Path) -> None:
    case = load_case("tiny-grpo")
    token = "hf_" + "Kq4" * 10
    spec = LaunchSpec(command=("python", "train.py", "--hf-token", token, "--api-key=abcdef"), cwd=tmp_path,
                      env={"WANDB_API_KEY": "w4ndb-secret", "SEED": "1"}, timeout_s=10)
    card = render_card(case, run_preflight(case, environ={}), CRITERIA, spec=spec)
    for secret in (token, "abcdef", "w4ndb-secret"):
        assert secret not in card
    assert "python train.py --hf-token *** --api-key=***" in card
    assert "`WANDB_API_KEY=***`, `SEED=1`" in card
