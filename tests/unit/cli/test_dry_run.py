"""``run --dry-run`` shows the card and launches nothing; a run that would not start (its baseline cannot be
loaded) is exit 2 with one line, not a 0 that CI would take for "ready"."""

from __future__ import annotations

from pathlib import Path

from autotest.cli import main
from tests.helpers import ROOT


def test_a_dry_run_whose_baseline_cannot_be_loaded_exits_2_with_one_line(tmp_path: Path, capsys) -> None:
    case = tmp_path / "tiny-grpo.yaml"
    text = (ROOT / "autotest" / "cases" / "tiny-grpo.yaml").read_text()
    case.write_text(text.replace("baseline: baselines/tiny-grpo.yaml", "baseline: missing.yaml"))
    code = main(["run", str(case), "--dry-run", "--no-history", "--results-dir", str(tmp_path / "results")])
    captured = capsys.readouterr()
    assert code == 2 and "Traceback" not in captured.err
    assert "# Experiment card: tiny-grpo" in captured.out  # the card is still shown
    assert captured.err.strip().splitlines() == [
        f"rl-autotest: error: tiny-grpo: the run would not start: {tmp_path / 'missing.yaml'}: cannot read (No such "
        "file or directory); check the file"]


def test_a_dry_run_that_would_start_exits_0(tmp_path: Path, capsys) -> None:
    assert main(["run", "tiny-grpo", "--dry-run", "--no-history", "--results-dir", str(tmp_path)]) == 0
    assert capsys.readouterr().err == ""


def test_a_dry_run_with_a_detect_typo_names_the_metric(tmp_path: Path, capsys) -> None:
    case = tmp_path / "tiny-grpo.yaml"
    text = (ROOT / "autotest" / "cases" / "tiny-grpo.yaml").read_text()
    baseline = ROOT / "baselines" / "tiny-grpo.yaml"
    case.write_text(text.replace("baseline: baselines/tiny-grpo.yaml", f"baseline: {baseline}")
                    + "detect: {response/reward/mean: 0.1}\n")
    code = main(["run", str(case), "--dry-run", "--no-history", "--results-dir", str(tmp_path / "results")])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1
    assert "detect.response/reward/mean: not a metric" in err[0] and "did you mean 'response/rewards/mean'?" in err[0]


def test_the_card_shows_a_terminal_escape_in_the_case_as_text(tmp_path: Path, capsys) -> None:
    """The card quotes the case's description: an escape there is shown as ``\\x1b``, never obeyed."""
    case = tmp_path / "tiny-grpo.yaml"
    text = (ROOT / "autotest" / "cases" / "tiny-grpo.yaml").read_text()
    baseline = ROOT / "baselines" / "tiny-grpo.yaml"
    lines = text.replace("baseline: baselines/tiny-grpo.yaml", f"baseline: {baseline}").splitlines()
    lines = [('description: "clears the screen \\e[2J here"' if line.startswith("description:") else line)
             for line in lines]
    case.write_text("\n".join(lines) + "\n")
    assert main(["run", str(case), "--dry-run", "--no-history", "--results-dir", str(tmp_path / "r")]) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out and "clears the screen \\x1b[2J here" in out
