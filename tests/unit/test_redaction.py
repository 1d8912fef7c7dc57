"""Redaction: secret names, and secrets masked in env mappings, argv and free text."""

from __future__ import annotations

from pathlib import Path

import pytest

from autotest.files import write_atomic
from autotest.redaction import (
    MASK,
    collect_secrets,
    forget_secrets,
    mask_file,
    mask_known,
    redact,
    secret_name,
)
from autotest.report.markdown import append_step_summary
from autotest.run.infra import find_failures

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


# --- masking by value: a registered secret is masked wherever it appears, under any name ---

VALUE = "tok-9f8e7d6c5b4a"


@pytest.fixture
def registry():
    forget_secrets()
    yield
    forget_secrets()


def test_values_of_secret_names_flags_and_declared_names_are_collected(registry) -> None:
    collect_secrets({"HF_TOKEN": VALUE, "MY_OPT": "plain-value", "RL_AUTOTEST_SECRET_NAMES": "MY_DECLARED",
                     "MY_DECLARED": "declared-1234", "SHORT_TOKEN": "abc"},
                    ["run", "--api-key", "flag-value-1", "--password=flag-value-2", "DB_PASSWORD=assign-value"])
    text = f"a={VALUE} b=plain-value c=declared-1234 d=flag-value-1 e=flag-value-2 f=assign-value abc"
    assert mask_known(text) == "a=*** b=plain-value c=*** d=*** e=*** f=*** abc"


def test_the_writers_mask_registered_values(registry, tmp_path) -> None:
    collect_secrets({"HF_TOKEN": VALUE}, [])
    write_atomic(tmp_path / "r.json", f'{{"env": {{"MY_OPT": "{VALUE}"}}}}')
    assert VALUE not in (tmp_path / "r.json").read_text()
    append_step_summary(f"fault judge-bug:{VALUE}\n", str(tmp_path / "summary.md"))
    assert (tmp_path / "summary.md").read_text() == "fault judge-bug:***\n"
    log = tmp_path / "stdout.log"
    log.write_text(f"env: MY_OPT={VALUE}\r\nbinary \udcff kept\n", encoding="utf-8", errors="surrogateescape")
    assert mask_file(log) and log.read_bytes() == b"env: MY_OPT=***\r\nbinary \xff kept\n"


def test_the_infra_excerpt_is_masked_before_it_is_kept(registry) -> None:
    collect_secrets({"HF_TOKEN": VALUE}, [])
    (failure,) = find_failures([f"connecting with {VALUE}\n", "OSError: [Errno 98] Address already in use\n"])
    assert VALUE not in failure.excerpt and "***" in failure.excerpt
