"""``rl-autotest init`` from an existing log (no process): what it writes, what it refuses, one line each."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from autotest.cli import main
from autotest.inputs.baseline import load_baseline
from autotest.inputs.case import load_case

COMMAND = ["--", "{python}", "train.py", "--output-dir", "{work_dir}", "--seed", "{seed}"]


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.delenv("RL_AUTOTEST_PROJECT", raising=False)
    monkeypatch.delenv("RL_AUTOTEST_RESULTS", raising=False)
    root = tmp_path / "proj"
    (root / "accuracy" / "cases").mkdir(parents=True)
    (root / "pyproject.toml").write_text('[tool.rl-autotest]\ncases = ["accuracy/cases"]\n'
                                         'baselines = "accuracy/baselines"\nresults = "accuracy/results"\n')
    monkeypatch.chdir(root)
    return root


def _log(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def _trl_log(path: Path) -> Path:
    return _log(path, [{"reward": s / 10, "entropy": 2.5 - s / 10, "completions/mean_length": 1.5 + s / 20,
                        "step_time": 0.5 + s / 100, "loss": 0.01 * s, "step": s} for s in range(1, 11)])


def _one_error_line(capsys) -> str:
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err + captured.out
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1, captured.err
    return lines[0]


def test_init_from_a_log_writes_a_loadable_case_and_a_placeholder_baseline(project: Path, tmp_path: Path,
                                                                           capsys) -> None:
    log = _trl_log(tmp_path / "tracker.jsonl")
    assert main(["init", "my-grpo", "--log", str(log), *COMMAND]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == f"log: {log} (xtuner, 10 steps, 5 metrics)"
    assert out[1].startswith("metric roles: none declared, the rest from preset trl")
    assert any(line.split()[:3] == ["reward", "reward", "checks:"] for line in out)
    assert any(line.split()[:2] == ["loss", "loss"] and "not gated by default" in line for line in out)
    assert out[-1] == "next: rl-autotest calibrate my-grpo"
    case = load_case("my-grpo")  # found by name in the project, its baseline the project's default
    assert case.baseline_path == project / "accuracy" / "baselines" / "my-grpo.yaml"
    assert case.tracker.path == "{work_dir}/tracker.jsonl"
    assert case.expected.steps == 10 and case.seed.default == 0 and case.seed.calibration == tuple(range(1, 11))
    assert case.launch.command == tuple(COMMAND[1:])
    baseline = load_baseline(case.baseline_path)
    assert baseline.checks and all(c.placeholder for c in baseline.checks)
    assert baseline.provenance["produced_by"] == "rl-autotest init"
    # calibrate runs as many seeds as the case lists: the 10 calibration runs `power` advises, not 3
    assert baseline.calibration is not None and baseline.calibration.runs == len(case.seed.calibration) == 10


def test_a_rerun_says_what_exists_and_overwrites_nothing(project: Path, tmp_path: Path, capsys) -> None:
    log = _trl_log(tmp_path / "tracker.jsonl")
    assert main(["init", "my-grpo", "--log", str(log), *COMMAND]) == 0
    files = sorted((project / "accuracy").rglob("*.yaml"))
    before = [p.read_bytes() for p in files]
    capsys.readouterr()
    assert main(["init", "my-grpo", "--log", str(log), *COMMAND]) == 0
    case, baseline = project / "accuracy/cases/my-grpo.yaml", project / "accuracy/baselines/my-grpo.yaml"
    assert capsys.readouterr().out.splitlines() == [
        f"init: my-grpo: {case} and {baseline} already exist; nothing run or written (init never overwrites)",
        "next: rl-autotest calibrate my-grpo"]
    assert [p.read_bytes() for p in files] == before


def test_one_of_the_two_files_existing_is_refused(project: Path, tmp_path: Path, capsys) -> None:
    case = project / "accuracy/cases/my-grpo.yaml"
    case.write_text("name: my-grpo\n")
    assert main(["init", "my-grpo", "--log", str(_trl_log(tmp_path / "t.jsonl")), *COMMAND]) == 2
    assert _one_error_line(capsys) == (
        f"rl-autotest: error: {case}: already exists and {project}/accuracy/baselines/my-grpo.yaml does not; init "
        f"never overwrites: remove {case} to start again, or write {project}/accuracy/baselines/my-grpo.yaml by hand")


@pytest.mark.parametrize("argv, message", [
    (["init", "x", "--log", "t.jsonl"], "init: no command; write it after --, e.g. rl-autotest init my-case -- "
                                        "{python} train.py --output-dir {work_dir} --seed {seed}"),
    (["init", "x", "--", "python", "train.py", "--out", "{workdir}"],
     "init: command word 4 '{workdir}': unknown placeholder {workdir}; known: {python}, {work_dir}, {seed}"),
    (["init", "x y", "--", "python"], "init: 'x y' is not a case name; use letters, digits, '.', '_' and '-'"),
    (["init", "x", "--timeout-s", "0", "--", "python"], "--timeout-s: 0 is not a positive number of seconds"),
    (["init", "x", "--log", "missing.jsonl", "--", "python"],
     "--log: missing.jsonl: no such file or folder; pass the metric log a run wrote"),
])
def test_bad_usage_is_one_line(argv: list[str], message: str, project: Path, capsys) -> None:
    assert main(argv) == 2
    assert _one_error_line(capsys) == f"rl-autotest: error: {message}"


def test_outside_a_project_without_folders_is_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                        capsys) -> None:
    monkeypatch.delenv("RL_AUTOTEST_PROJECT", raising=False)
    monkeypatch.chdir(tmp_path)
    assert main(["init", "x", "--", "python", "train.py"]) == 2
    assert _one_error_line(capsys) == (
        "rl-autotest: error: init: no project table found from here upwards ([tool.rl-autotest] in pyproject.toml, "
        "or rl-autotest.toml); add one (cases, baselines, results), or pass --cases-dir and --baselines-dir")


def test_a_log_with_no_gated_role_writes_nothing(project: Path, tmp_path: Path, capsys) -> None:
    log = _log(tmp_path / "t.jsonl", [{"my_score": s / 10, "step": s} for s in range(1, 4)])
    assert main(["init", "x", "--log", str(log), *COMMAND]) == 2
    assert _one_error_line(capsys) == (
        f"rl-autotest: error: init: {log}: no metric has a role init gates (metric roles: none declared; no preset "
        "matches the metric names (write roles: or preset:)); nothing written; pass --preset, or write the "
        "baseline's checks by hand")
    assert not list((project / "accuracy").rglob("*.yaml"))
