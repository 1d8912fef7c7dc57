"""Bad command-line values: one line naming the flag, exit 2."""

from __future__ import annotations

from pathlib import Path

import pytest

from autotest.cli import main


@pytest.mark.parametrize("value", ["-5", "inf", "nan"])
def test_a_negative_or_infinite_wall_time_is_refused(value: str, tmp_path: Path, capsys) -> None:
    code = main(["compare", "--baseline", str(tmp_path / "b.yaml"), "--current", str(tmp_path), f"--wall-time-s={value}"])
    assert code == 2
    assert capsys.readouterr().err.startswith("rl-autotest: error: --wall-time-s: ")


def _one_error_line(capsys) -> str:
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err + captured.out
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1, captured.err
    return lines[0]


@pytest.mark.parametrize("argv, flag", [
    (["compare", "--baseline", "b.yaml", "--current", "t.jsonl", "--out", "{file}"], "--out"),
    (["run", "tiny-grpo", "--yes", "--results-dir", "{file}"], "--results-dir"),
    (["calibrate", "tiny-grpo", "--results-dir", "{file}"], "--results-dir"),
    (["calibrate", "tiny-grpo", "--baselines-dir", "{file}/sub"], "--baselines-dir"),
    (["baseline", "promote", "tiny-grpo", "--baselines-dir", "{file}"], "--baselines-dir"),
])
def test_a_file_where_a_folder_is_expected_is_refused_before_any_work(argv, flag, tmp_path: Path, capsys) -> None:
    existing = tmp_path / "taken.txt"
    existing.write_text("a file\n")
    code = main([a.replace("{file}", str(existing)) for a in argv])
    assert code == 2
    line = _one_error_line(capsys)
    assert line.startswith(f"rl-autotest: error: {flag}: {existing}")
    assert line.endswith("is not a directory" + ("" if argv[-1] == "{file}" else f" ({existing} is not a folder)")
                         + "; pass a folder")


def test_max_forwards_below_zero_names_the_flag(tmp_path: Path, capsys) -> None:
    assert main(["consistency", str(tmp_path), "--max-forwards", "-1"]) == 2
    assert _one_error_line(capsys) == ("rl-autotest: error: --max-forwards: -1 is below 0; give the forwards to dump "
                                       "per side (0 = all)")


@pytest.mark.parametrize("text, problem", [
    ("[1, 2]", "the request is a JSON list, not an object"),
    ("null", "the request is null, not an object"),
    ('{"case_file": "c.yaml", "breaches": 3, "tracker": "t", "results_dir": "r"}',
     "key 'breaches' is a number, not a list of breached checks"),
    ('{"case_file": "c.yaml", "breaches": [{"first_breach_step": "x"}], "tracker": "t", "results_dir": "r"}',
     "breaches[0] is not a breached check with a whole-number first_breach_step"),
])
def test_a_consistency_request_of_the_wrong_shape_is_one_line(text: str, problem: str, tmp_path: Path,
                                                              capsys) -> None:
    (tmp_path / "consistency_request.json").write_text(text)
    assert main(["consistency", str(tmp_path), "--no-execute"]) == 2
    assert _one_error_line(capsys) == (f"rl-autotest: error: {tmp_path / 'consistency_request.json'}: {problem}; "
                                       "re-run the accuracy case to write a new one")


def test_promote_force_needs_a_reason(capsys) -> None:
    assert main(["baseline", "promote", "tiny-grpo", "--force", " "]) == 2
    assert _one_error_line(capsys).startswith("rl-autotest: error: --force: give the reason")


@pytest.mark.parametrize("value", ["0", "-2"])
def test_a_replicate_count_below_one_is_refused_before_any_run(value: str, tmp_path: Path, capsys) -> None:
    code = main(["run", "tiny-grpo", "--yes", "--no-history", "--results-dir", str(tmp_path), f"--replicates={value}"])
    assert code == 2
    assert _one_error_line(capsys) == f"rl-autotest: error: --replicates: {value} is below 1; give the number of " \
                                      "seeds to run and average"
    assert not any(tmp_path.iterdir())


@pytest.mark.parametrize("argv, says", [
    (["calibrate", "tiny-grpo", "--paired", "--perturbation", "threads:0"],
     "--perturbation: 'threads:0' is not a perturbation; write one of natural, KEY=VALUE (e.g. "
     "RL_AUTOTEST_AA_PERTURB=1), threads:N or optimizer-ulp:N (N from 1 to 999999)"),
    (["calibrate", "tiny-grpo", "--perturbation", "threads:2"],
     "--perturbation: only with --paired (how an A/A pair's second run is nudged)"),
])
def test_a_bad_or_misplaced_perturbation_is_one_line_before_any_run(argv, says, capsys) -> None:
    assert main(argv) == 2
    assert _one_error_line(capsys) == f"rl-autotest: error: {says}"
