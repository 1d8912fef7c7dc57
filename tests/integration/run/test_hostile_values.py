"""Every subprocess call site that carries user text, tried with option-shaped and shell-shaped values for
real: the file the value would create must not exist, and a refusal is one line.

The framework's git fetch has its own file (test_framework_refs.py). Here: the preflight's git, the launch
of a string command (a --results-dir that reaches {work_dir}), --fault and --seed on the command line, the
Ray job's entrypoint and the consistency re-run wrapper (both bash source the harness writes).
"""

from __future__ import annotations

import os
import subprocess
from dataclasses import replace
from pathlib import Path

import pytest

from autotest.cli import main
from autotest.consistency.job import write_wrapper
from autotest.inputs.case import load_case
from autotest.pipeline import JudgeOptions, LaunchOptions, PublishOptions, RunOptions, run_case
from autotest.run.launch import LaunchSpec, launch_spec
from autotest.run.preflight import commit_under_test
from autotest.run.ray_job import entrypoint
from tests.helpers import write_yaml


def _shell_values(marker: Path) -> list[str]:
    return [f"$(touch {marker})", f"`touch {marker}`", f"x; touch {marker}", f"x' ; touch {marker}; '",
            f'x" ; touch {marker}; "', f"x\ntouch {marker}", f"--upload-pack=touch {marker}"]


def test_preflight_git_takes_an_option_shaped_folder_as_a_folder(tmp_path: Path, monkeypatch) -> None:
    marker = tmp_path / "PWNED"
    monkeypatch.chdir(tmp_path)
    for name in (f"--upload-pack=touch {marker}", "--exec-path=/nonexistent", "-c core.pager=touch"):
        (tmp_path / name.replace("/", "_")).mkdir()
        info = commit_under_test(Path(name.replace("/", "_")))
        assert info.sha is None and "not a git repository" in (info.reason or ""), info
    assert not marker.exists()


@pytest.fixture
def echo_case(tmp_path: Path):
    """A case whose launch is a bash string using {work_dir} and {seed}, writing a one-row tracker."""
    case = write_yaml(tmp_path / "cases" / "echo.yaml", """
name: echo
description: a string command that prints its work folder
markers: [grpo]
goal: g
minimal_scale: m
platform: {gpus: 0, framework: null}
launch:
  command: 'printf "%s\\n" {work_dir} && mkdir -p {work_dir}/e && echo "{\\"r\\": 1.0, \\"step\\": 1}" > {work_dir}/e/tracker.jsonl'
  timeout_s: 60  # bounds a broken run: this one takes seconds, at load 20 too
tracker: {format: xtuner, path: "{work_dir}/e/tracker.jsonl"}
expected: {steps: 1}
baseline: baselines/echo.yaml
""")
    baseline = write_yaml(tmp_path / "baselines" / "echo.yaml", """
golden:
  table:
    r: {1: 1.0}
checks:
  - {metric: r, method: absolute, operator: "<", threshold: 0.05}
""")
    return load_case(case), baseline


def test_a_results_root_with_shell_text_reaches_a_string_command_quoted(echo_case, tmp_path: Path) -> None:
    case, baseline = echo_case
    marker = tmp_path / "PWNED"
    for i, value in enumerate(_shell_values(marker)[:4]):
        root = tmp_path / f"r{i}" / value.replace("/", "_")
        run = run_case(case, RunOptions(LaunchOptions(results_root=root), JudgeOptions(baseline_path=baseline),
                                        PublishOptions(with_plots=False)))
        assert run.status == "PASS", run.reason
        stdout = (run.results_dir / "logs" / "stdout.log").read_text()
        assert str(run.results_dir / "work") in stdout  # printed as one literal word
        assert not marker.exists(), value


@pytest.mark.parametrize("fault", ["", "--upload-pack=touch {marker}", "$(touch {marker})", "a b", "-x",
                                   "nan-at:5; touch {marker}", "nan-at:`touch {marker}`"])
def test_a_fault_that_is_not_name_arg_is_one_line_before_any_run(fault: str, tmp_path: Path, capsys) -> None:
    marker = tmp_path / "PWNED"
    code = main(["run", "tiny-grpo", "--yes", "--no-history", "--results-dir", str(tmp_path / "r"),
                 f"--fault={fault.format(marker=marker)}"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1, err
    assert err[0].startswith("rl-autotest: error: --fault: ") and "is not a fault; write NAME or NAME:ARG" in err[0]
    assert not marker.exists() and not (tmp_path / "r").exists()


def test_a_negative_seed_is_one_line(tmp_path: Path, capsys) -> None:
    assert main(["run", "tiny-grpo", "--yes", "--results-dir", str(tmp_path), "--seed=-1"]) == 2
    assert capsys.readouterr().err.strip() == "rl-autotest: error: --seed: -1 is below 0; give a seed >= 0"


def test_the_ray_entrypoint_quotes_the_folder_and_every_argument(tmp_path: Path) -> None:
    marker = tmp_path / "PWNED"
    for i, value in enumerate(_shell_values(marker)):
        cwd = tmp_path / f"c{i}" / value.replace("/", "_")
        cwd.mkdir(parents=True)
        spec = LaunchSpec(command=("printf", "%s|", value, f"--x={value}"), cwd=cwd, env={}, timeout_s=10)
        done = subprocess.run(["bash", "-c", entrypoint(spec)], capture_output=True, text=True, check=True)
        assert done.stdout == f"{value}|--x={value}|"
    assert not marker.exists()


def test_the_consistency_wrapper_quotes_folders_and_values(echo_case, tmp_path: Path) -> None:
    case, _ = echo_case
    marker = tmp_path / "PWNED"
    for i, value in enumerate(_shell_values(marker)):
        work = tmp_path / f"w{i}" / value.replace("/", "_")
        work.mkdir(parents=True)
        spec = launch_spec(case, work, environ=os.environ)
        wrapper = write_wrapper(tmp_path / f"wrap{i}.sh", spec, diagnostic_config=work / "diag.json")
        done = subprocess.run(["bash", str(wrapper)], capture_output=True, text=True, cwd=tmp_path)
        assert done.returncode == 0 and (work / "e" / "tracker.jsonl").is_file(), (wrapper.read_text(), done.stderr)
    assert not marker.exists()


def test_the_consistency_wrapper_keeps_a_hostile_variable_name_one_word(echo_case, tmp_path: Path) -> None:
    """A variable name is written as part of one quoted ``export`` word: bash refuses the name, nothing runs."""
    case, _ = echo_case
    marker = tmp_path / "PWNED"
    for i, name in enumerate([f"A;touch {marker};B", f"A$(touch {marker})", f"A\ntouch {marker}\nB"]):
        spec = replace(launch_spec(case, tmp_path, environ=os.environ), env={name: "1"})
        wrapper = write_wrapper(tmp_path / f"wrap{i}.sh", spec, diagnostic_config=tmp_path / "diag.json")
        done = subprocess.run(["bash", str(wrapper)], capture_output=True, text=True, cwd=tmp_path)
        assert done.returncode != 0 and "not a valid identifier" in done.stderr, (wrapper.read_text(), done.stderr)
    assert not marker.exists()


def test_bisect_refs_and_repository_reach_git_as_data(tmp_path: Path, monkeypatch) -> None:
    from autotest.bisect.commits import commits_between, history_dir
    from autotest.errors import UsageError

    marker = tmp_path / "PWNED"
    repo = tmp_path / "repo"
    subprocess.run(["git", "init", "-q", "-b", "main", str(repo)], check=True)
    subprocess.run(["git", "-C", str(repo), "-c", "user.email=t@e", "-c", "user.name=t", "commit", "-q",
                    "--allow-empty", "-m", "one"], check=True)
    monkeypatch.chdir(tmp_path)
    for value in _shell_values(marker) + ["", f"--output={marker}"]:
        with pytest.raises(UsageError) as info:
            commits_between(repo / ".git", value, "main")
        assert "\n" not in str(info.value) and str(info.value).startswith("--good: ")
        with pytest.raises(UsageError):
            history_dir(value or "-", tmp_path / "cache")
    assert not marker.exists()
