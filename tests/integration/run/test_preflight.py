"""Preflight with real processes: commit under test on real git repos, the environment fingerprint
in a fresh interpreter, and the whole preflight of an embedded and a framework case."""

from __future__ import annotations

import importlib.metadata
import json
import subprocess
import sys
from pathlib import Path

import pytest

from autotest.inputs.case import REPO_ROOT, load_case
from autotest.run.preflight import commit_under_test, run_preflight


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t",
                           *args], check=True, capture_output=True, text=True).stdout.strip()


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path))
    path = tmp_path / "checkout"
    path.mkdir()
    git(path, "init", "-q", "-b", "main")
    (path / "train.py").write_text("print('v1')\n")
    git(path, "add", "train.py")
    git(path, "commit", "-q", "-m", "v1")
    return path


def test_clean_repo(repo: Path) -> None:
    info = commit_under_test(repo)
    assert info.sha == git(repo, "rev-parse", "HEAD") and len(info.sha) == 40
    assert (info.branch, info.dirty, info.diff_stat, info.untracked, info.reason) == ("main", False, "", (), None)
    assert info.describe() == f"{info.sha[:12]} on main, clean"


def test_dirty_repo_records_diff_stat_and_untracked(repo: Path) -> None:
    (repo / "train.py").write_text("print('v2')\nprint('more')\n")
    (repo / "new_config.py").write_text("x = 1\n")
    info = commit_under_test(repo)
    assert info.dirty is True and info.untracked == ("new_config.py",)
    assert "train.py" in info.diff_stat and "1 file changed" in info.diff_stat
    assert info.describe().endswith("on main, dirty")


def test_detached_head(repo: Path) -> None:
    git(repo, "checkout", "-q", "--detach")
    info = commit_under_test(repo)
    assert info.branch is None and info.describe().endswith("on detached HEAD, clean")


def test_not_a_repo_is_unknown_with_reason(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path))
    info = commit_under_test(tmp_path)
    assert info.sha is None and info.dirty is None
    assert info.reason is not None and info.reason.startswith("not a git repository")
    assert info.describe() == f"unknown ({info.reason})"
    missing = commit_under_test(tmp_path / "gone")
    assert missing.reason == f"{tmp_path / 'gone'} is not a directory"


def test_fingerprint_versions_without_importing() -> None:
    code = ("import json, sys; from autotest.run.preflight import environment_fingerprint as f; "
            "fp = f({'PATH': '/nonexistent'}); "
            "print(json.dumps([fp, [m for m in ('torch', 'transformers', 'ray', 'msprobe') if m in sys.modules]]))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                          cwd=REPO_ROOT)
    fp, imported = json.loads(done.stdout)
    assert imported == []
    assert fp["packages"]["torch"] == importlib.metadata.version("torch")
    assert fp["packages"]["msprobe"] == importlib.metadata.version("mindstudio-probe")
    assert fp["packages"]["vllm"] is None or isinstance(fp["packages"]["vllm"], str)
    assert fp["gpu"] == {"count": 0, "source": "nvidia-smi not found", "models": [], "driver": None,
                         "cuda": None}
    assert fp["python"] == ".".join(map(str, sys.version_info[:3])) and fp["cpu_count"] >= 1
    assert fp["hostname"]


def test_run_preflight_embedded_and_framework(repo: Path) -> None:
    tiny = run_preflight(load_case("tiny-grpo"), environ={"PATH": "/nonexistent"})
    assert tiny.commit == tiny.harness and tiny.platform.runnable and tiny.inputs == ()
    json.dumps(tiny.to_dict())
    gpu_case = load_case("grpo-gsm8k-qwen3-8b-lmdeploy")
    pf = run_preflight(gpu_case, environ={"XTUNER_ROOT": str(repo), "RL_AUTOTEST_GPU_COUNT": "8"})
    assert pf.commit.repo_dir == str(repo.resolve()) and pf.commit.branch == "main"
    assert pf.platform.runnable
    assert [s.name for s in pf.missing_inputs] == ["model", "train_data", "eval_data", "config",
                                                    "launch_script"]
    data = pf.to_dict()
    assert data["inputs"][3]["path"] == f"{repo}/autotest/config/rl_qwen3_gsm8k_grpo.py"
    assert json.loads(json.dumps(data)) == data


# ---------------------------------------------------------------- redaction
