"""Preflight: commit under test on real git repos, inputs, environment fingerprint, redaction."""

from __future__ import annotations

import importlib.metadata
import json
import subprocess
import sys
from pathlib import Path

import pytest

from autotest.errors import UsageError
from autotest.inputs.case import REPO_ROOT, load_case
from autotest.redaction import MASK, redact, secret_name
from autotest.run.preflight import check_inputs, commit_under_test, require_inputs, run_preflight


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


def inputs_case(tmp_path: Path) -> Path:
    text = (Path(__file__).parent / "data" / "bad_cases" / "timeout_zero.yaml").read_text()
    path = tmp_path / "inp.yaml"
    path.write_text(text.replace("name: timeout_zero", "name: inp").replace("timeout_s: 0", "timeout_s: 5")
                    + "inputs:\n  model: ${RL_T_SHARE}/model\n  data: ${RL_T_SHARE}/data.jsonl\n"
                    "  teacher: ${RL_T_UNSET}/teacher\n  readme: '{repo}/pyproject.toml'\n")
    return path


def test_inputs_missing_and_present(tmp_path: Path) -> None:
    case = load_case(inputs_case(tmp_path))
    share = tmp_path / "share"
    (share / "model").mkdir(parents=True)
    env = {"RL_T_SHARE": str(share)}
    missing = check_inputs(case, env)
    assert [(m.name, m.path, m.reason) for m in missing] == [
        ("data", f"{share}/data.jsonl", "does not exist"),
        ("teacher", None, "RL_T_UNSET is not set")]
    with pytest.raises(UsageError) as info:
        require_inputs(case, env)
    assert str(info.value) == (
        f"{case.source}: inputs: 2 missing: data={share}/data.jsonl (does not exist), "
        "teacher=${RL_T_UNSET}/teacher (RL_T_UNSET is not set); "
        "export the share roots or fix the paths, then rerun")


def test_require_inputs_passes_when_all_exist(tmp_path: Path) -> None:
    case = load_case(inputs_case(tmp_path))
    share = tmp_path / "share"
    for sub in ("model", "teacher"):
        (share / sub).mkdir(parents=True)
    (share / "data.jsonl").write_text("{}\n")
    paths = require_inputs(case, {"RL_T_SHARE": str(share), "RL_T_UNSET": str(share)})
    assert paths == {"model": share / "model", "data": share / "data.jsonl",
                     "teacher": share / "teacher", "readme": REPO_ROOT / "pyproject.toml"}


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

GHP = "ghp_" + "a1B2" * 9  # built at runtime so no token-shaped literal sits in the repo
HF = "hf_" + "Xy9" * 10
SK = "sk-proj-" + "Q" * 24
AKIA = "AKIA" + "IOSFODNN7EXAMPLE"
JWT = "eyJhbGciOiJIUzI1NiJ9." + "eyJzdWIiOiIxMjM0NTY3ODkwIn0." + "abcDEF123_-xyz"


def test_secret_names() -> None:
    for name in ("HF_TOKEN", "GITHUB_TOKEN", "AWS_SECRET_ACCESS_KEY", "AWS_ACCESS_KEY_ID", "api_key",
                 "apiKey", "accessToken", "DB_PASSWORD", "--hf-token", "--api-key", "WANDB_API_KEY",
                 "GOOGLE_CREDENTIALS", "AUTH", "Authorization", "PGPASSWD"):
        assert secret_name(name), name
    for name in ("TOKENIZERS_PARALLELISM", "RAY_AUTH_MODE", "SSL_KEY_FILE", "--max-tokens", "PWD",
                 "PATH", "MASTER_PORT", "XTUNER_USE_FA3", "monkey", "--dashboard-host", "KEYBOARD"):
        assert not secret_name(name), name


def test_redact_env_dict() -> None:
    env = {"HF_TOKEN": "abc", "AWS_SECRET_ACCESS_KEY": "s3cr3t", "TOKENIZERS_PARALLELISM": "false",
           "RAY_AUTH_MODE": "disabled", "PATH": "/usr/bin", "PROXY": "http://u:hunter2@proxy:3128",
           "OPAQUE": GHP, "nested": {"password": "p", "count": 3}, "TIMEOUT": 5}
    assert redact(env) == {"HF_TOKEN": MASK, "AWS_SECRET_ACCESS_KEY": MASK,
                           "TOKENIZERS_PARALLELISM": "false", "RAY_AUTH_MODE": "disabled",
                           "PATH": "/usr/bin", "PROXY": f"http://u:{MASK}@proxy:3128", "OPAQUE": MASK,
                           "nested": {"password": MASK, "count": 3}, "TIMEOUT": 5}
    assert env["HF_TOKEN"] == "abc"  # a copy: the original is untouched


def test_redact_argv() -> None:
    argv = ["python", "train.py", "--hf-token", "abc", "--api-key=xyz", "--max-tokens", "1024",
            "--token", "--verbose", f"--model={HF}", "HF_TOKEN=abc", "--work-dir", "/w"]
    assert redact(argv) == ["python", "train.py", "--hf-token", MASK, f"--api-key={MASK}",
                            "--max-tokens", "1024", "--token", "--verbose", f"--model={MASK}",
                            f"HF_TOKEN={MASK}", "--work-dir", "/w"]
    assert redact(tuple(argv))[3] == MASK


def test_redact_text() -> None:
    text = (f"export HF_TOKEN={HF}; GITHUB_TOKEN='quoted value' python x.py --hf-token abc123 "
            f"--max-tokens 512 https://user:pa55@github.com/org/repo.git "
            f"-H 'Authorization: Bearer {JWT}' key {GHP} {SK} {AKIA} "
            '{"api_key": "plain", "steps": "45"} ?access_token=zzz')
    out = redact(text)
    for secret in (HF, "quoted value", "abc123", "pa55", JWT, GHP, SK, AKIA, "plain", "zzz"):
        assert secret not in out, secret
    assert "--max-tokens 512" in out and '"steps": "45"' in out
    assert "https://user:***@github.com/org/repo.git" in out
    assert "Bearer ***" in out


def test_redact_leaves_ordinary_text() -> None:
    text = ("/share/models/hf_cache_dir/Qwen3-8B disk-usage-report-2024 tokenizer max_tokens=1024 "
            "--dashboard-host=0.0.0.0 RAY_AUTH_MODE=disabled http://127.0.0.1:8265 SKIP_TESTS=1")
    assert redact(text) == text
    assert redact(None) is None and redact(3.5) == 3.5 and redact(Path("/a/b")) == Path("/a/b")
