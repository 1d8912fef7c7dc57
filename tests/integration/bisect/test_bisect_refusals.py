"""A bisect refused before its first probe is one line naming what is wrong, and leaves no results folder."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from autotest.cli import main
from autotest.run.framework import CACHE_ENV, REF_ENV, REPO_ENV

CASE = """name: fw
description: a case for bisect's refusals
markers: [grpo]
goal: refuse bad input in one line
minimal_scale: nothing runs
platform:
  gpus: 0
  framework: {{name: fw, env: FW_ROOT, repo: "{repo}"}}
launch:
  command: ["{{python}}", "${{FW_ROOT}}/train.py"]
  timeout_s: 60  # bounds a broken run: this one takes seconds, at load 20 too
tracker: {{format: xtuner}}
expected: {{steps: 3}}
baseline: baselines/fw.yaml
"""


@pytest.fixture
def case_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "cache"))
    for name in (REPO_ENV, REF_ENV):
        monkeypatch.delenv(name, raising=False)

    def write(repo: str) -> Path:
        (tmp_path / "fw.yaml").write_text(CASE.format(repo=repo))
        return tmp_path / "fw.yaml"

    return write


def _refused(capsys, tmp_path: Path, *argv: str) -> str:
    assert main(["bisect", *argv, "--results-dir", str(tmp_path / "results")]) == 2
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1, captured.err
    assert not (tmp_path / "results").exists()  # no empty results folder left by a refusal
    return lines[0]


def test_a_repository_that_does_not_exist_is_one_line(case_file, tmp_path: Path, capsys) -> None:
    case = case_file(str(tmp_path / "nope"))
    assert _refused(capsys, tmp_path, str(case), "--good", "a", "--bad", "b") == (
        f"rl-autotest: error: bisect: framework repository {tmp_path / 'nope'} does not exist; pass --framework-repo "
        "with a clone's path or a URL, or fix platform.framework.repo")


def test_a_url_that_is_no_repository_says_git_s_reason_not_its_advice(case_file, tmp_path: Path, capsys) -> None:
    case = case_file(f"file://{tmp_path / 'nope'}")
    line = _refused(capsys, tmp_path, str(case), "--good", "a", "--bad", "b")
    assert line == (f"rl-autotest: error: bisect: fetch file://{tmp_path / 'nope'}: '{tmp_path / 'nope'}' does not "
                    "appear to be a git repository")


def test_a_ref_the_repository_lacks_leaves_no_results_folder(case_file, tmp_path: Path, capsys) -> None:
    repo = tmp_path / "repo"
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    case = case_file(str(repo))
    line = _refused(capsys, tmp_path, str(case), "--good", "no-such-ref", "--bad", "HEAD")
    assert line.startswith("rl-autotest: error: --good: 'no-such-ref' is not a commit of ")
