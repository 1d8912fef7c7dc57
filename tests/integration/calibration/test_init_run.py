"""``rl-autotest init`` running the command once: a real process, its log found in the work folder."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

from autotest.cli import main
from autotest.inputs.baseline import load_baseline
from autotest.inputs.case import load_case

WRITER = ("import json, os, sys; d = sys.argv[1]; "
          "[open(os.path.join(d, 'metrics.jsonl'), 'a').write(json.dumps({'reward': s / 10, 'entropy': 3 - s / 10, "
          "'step': s}) + '\\n') for s in range(1, 6)]")


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.delenv("RL_AUTOTEST_PROJECT", raising=False)
    monkeypatch.delenv("RL_AUTOTEST_RESULTS", raising=False)
    root = tmp_path / "proj"
    (root / "cases").mkdir(parents=True)
    (root / "rl-autotest.toml").write_text('cases = ["cases"]\nbaselines = "baselines"\nresults = "results"\n')
    monkeypatch.chdir(root)
    return root


def _one_error_line(capsys) -> str:
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err + captured.out
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1, captured.err
    return lines[0]


def test_init_runs_the_command_once_and_finds_its_log_under_work_dir(project: Path, capsys) -> None:
    assert main(["init", "w", "--", sys.executable, "-c", WRITER, "{work_dir}", "{seed}"]) == 0
    out = capsys.readouterr().out
    assert "/work/metrics.jsonl (xtuner, 5 steps, 2 metrics, one run of" in out
    case = load_case("w")
    assert case.tracker.path == "{work_dir}/metrics.jsonl"
    assert [c.check_id for c in load_baseline(case.baseline_path).checks] == [
        "entropy[points]", "entropy[pooled]", "reward[percentile]", "reward[pooled]"]
    assert list((project / "results" / "w").glob("init-*/logs/stdout.log"))  # the run's own logs are kept


def test_a_failing_command_is_one_line_and_writes_nothing(project: Path, capsys) -> None:
    code = main(["init", "w", "--", sys.executable, "-c", "import sys; print('bad config'); "
                 "sys.exit('no such model: tiny')"])
    assert code == 2
    line = _one_error_line(capsys)
    assert line.startswith(f"rl-autotest: error: init: {sys.executable} -c ")
    assert re.search(r"failed \(exit code 1\) after \d+ s; nothing written; last line: 'no such model: tiny'; "
                     r"its output: \S+/logs/stderr.log$", line), line
    assert not (project / "baselines").exists() and not list((project / "cases").iterdir())


def test_a_command_that_logs_nothing_is_one_line(project: Path, capsys) -> None:
    assert main(["init", "w", "--", sys.executable, "-c", "pass"]) == 2
    line = _one_error_line(capsys)
    assert re.search(r"exited 0 after \d+ s but wrote no metric log in its work folder ", line), line
    assert "(looked for: xtuner tracker (" in line and "TensorBoard event files (" in line, line
    assert line.endswith("); pass {work_dir} to the trainer's logger, or give --log PATH")


def test_a_command_that_outlives_its_timeout_is_one_line(project: Path, capsys) -> None:
    assert main(["init", "w", "--timeout-s", "1", "--", sys.executable, "-c", "import time; time.sleep(30)"]) == 2
    assert "did not finish within 1 s (--timeout-s); nothing written" in _one_error_line(capsys)


TB_WRITER = ("import os, sys; from torch.utils.tensorboard import SummaryWriter; "
             "w = SummaryWriter(os.path.join(sys.argv[1], 'runs', 'Dec01_run-host')); "
             "[w.add_scalar('train/reward', s / 10, s) or w.add_scalar('train/entropy', 3 - s / 10, s) "
             "for s in range(1, 6)]; w.close()")


def test_a_tensorboard_only_trainer_gets_a_tensorboard_case_reading_its_runs_folder(project: Path, capsys) -> None:
    pytest.importorskip("tensorboard", reason="needs the tensorboard extra")
    assert main(["init", "tb", "--", sys.executable, "-c", TB_WRITER, "{work_dir}"]) == 0
    out = capsys.readouterr().out
    assert "/work/runs/Dec01_run-host (tensorboard, 5 steps, 2 metrics" in out
    assert "from preset trl" in out  # train/reward is TRL's TensorBoard name
    case = load_case("tb")
    assert (case.tracker.format, case.tracker.path) == ("tensorboard", "{work_dir}/runs")
    assert [c.check_id for c in load_baseline(case.baseline_path).checks] == [
        "train/entropy[points]", "train/entropy[pooled]", "train/reward[percentile]", "train/reward[pooled]"]


def test_a_300_character_name_is_one_line_and_leaves_nothing(project: Path, capsys) -> None:
    assert main(["init", "w" * 300, "--", sys.executable, "-c", WRITER, "{work_dir}", "{seed}"]) == 2
    line = _one_error_line(capsys)
    assert line == ("rl-autotest: error: init: the case name is 300 characters; keep it to 100 or fewer (it names "
                    "the case and baseline files and every results folder)")
    assert not (project / "baselines").exists() and not list((project / "cases").iterdir())
    assert not (project / "results").exists()


def test_a_baselines_folder_that_cannot_be_created_is_one_line_and_leaves_no_cases_folder(
        project: Path, capsys) -> None:
    (project / "blocker").write_text("a file where a folder is needed\n")
    assert main(["init", "w", "--cases-dir", str(project / "new" / "cases"), "--baselines-dir",
                 str(project / "blocker" / "baselines"), "--", sys.executable, "-c", WRITER, "{work_dir}",
                 "{seed}"]) == 2
    line = _one_error_line(capsys)
    assert line.startswith(f"rl-autotest: error: init: {project / 'blocker' / 'baselines'}: cannot create the "
                           "folder (Not a directory); nothing run or written"), line
    assert not (project / "new").exists() and not (project / "results").exists()


def test_an_interpreter_from_the_environment_starts_and_stays_a_variable_in_the_case(
        project: Path, capsys, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FRAMEWORK_PYTHON", sys.executable)  # a separate framework venv's python
    assert main(["init", "w", "--", "${FRAMEWORK_PYTHON}", "-c", WRITER, "{work_dir}", "{seed}"]) == 0
    assert "running once: " + sys.executable in capsys.readouterr().out
    assert load_case("w").launch.command[0] == "${FRAMEWORK_PYTHON}"


def test_an_unset_interpreter_variable_is_one_line_before_anything_is_made(
        project: Path, capsys, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("FRAMEWORK_PYTHON", raising=False)
    assert main(["init", "w", "--", "${FRAMEWORK_PYTHON}", "-c", WRITER, "{work_dir}", "{seed}"]) == 2
    assert _one_error_line(capsys) == ("rl-autotest: error: init: command word 1 '${FRAMEWORK_PYTHON}': "
                                       "${FRAMEWORK_PYTHON} is not set; export FRAMEWORK_PYTHON before rl-autotest "
                                       "init (the case's runs read it too)")
    assert not (project / "baselines").exists() and not (project / "results").exists()
