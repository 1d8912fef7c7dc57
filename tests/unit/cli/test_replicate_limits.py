"""Replicates are bounded and real on the command line: the platform's cap unless --force, the cost shown
before launch, and no K > 1 for a launch that takes no seed. Each refusal is one line, before any folder."""

from __future__ import annotations

from pathlib import Path

import pytest

from autotest.cli import main
from autotest.errors import UsageError
from autotest.inputs.case import load_case
from autotest.inputs.replicate_limits import REPLICATE_CAPS, replicates_cost
from autotest.pipeline import JudgeOptions, LaunchOptions, RunOptions, run_case
from tests.unit.cli.test_bad_flags import _one_error_line
from tests.unit.inputs.test_case import write_case

CAP = REPLICATE_CAPS["cpu"]


@pytest.mark.parametrize("count", [CAP + 1, 200])
def test_more_replicates_than_the_cap_are_refused_before_any_run(count: int, tmp_path: Path, capsys) -> None:
    code = main(["run", "tiny-grpo", "--yes", "--no-history", "--results-dir", str(tmp_path), f"--replicates={count}"])
    assert code == 2
    assert _one_error_line(capsys) == (f"rl-autotest: error: --replicates: {count} is above the cap of {CAP} "
                                       "replicates for a CPU case; pass --force-replicates to run more")
    assert not any(tmp_path.iterdir())


@pytest.mark.parametrize("argv", [["run", "tiny-grpo", "--yes", "--force-replicates"],
                                  ["ab", "tiny-grpo", "--base=clean", "--head=clean"]])
def test_a_replicate_count_past_any_cap_is_refused_where_it_is_parsed(argv: list[str], capsys) -> None:
    """Past the declared bound (even --force-replicates stops there): the flag's own line, in every command."""
    assert main([*argv, "--replicates=1000000"]) == 2
    assert _one_error_line(capsys) == ("rl-autotest: error: --replicates: 1000000 is above 256; give the number of "
                                       "seeds to run and average")


def test_force_lifts_the_cap_and_the_card_shows_the_cost(tmp_path: Path, capsys) -> None:
    code = main(["run", "tiny-grpo", "--dry-run", "--no-history", "--results-dir", str(tmp_path),
                 f"--replicates={CAP + 1}", "--force-replicates"])
    out = capsys.readouterr().out
    assert code == 0 and f"{CAP + 1} seeds" in out
    assert f"Cost: {CAP + 1} runs" in out


def test_the_cost_is_runs_times_the_expected_wall_time() -> None:
    assert replicates_cost(6, 300.0, 2) == ("6 runs x 5 min = 30 min of runner time; 2 at a time: about "
                                            "15 min of wall time")
    assert replicates_cost(3, 40.0, 2) == "3 runs x 40 s = 2 min of runner time; 2 at a time: about 80 s of wall time"
    assert replicates_cost(4, 3600.0, 1) == ("4 runs x 60 min = 4.0 h of runner time; 1 at a time: about "
                                             "4.0 h of wall time")
    assert replicates_cost(2, None, 2).startswith("2 runs, 2 at a time; expected wall time unknown (set "
                                                  "expected.wall_time_s")


def test_the_cost_is_printed_before_launch_from_the_case_wall_time(tmp_path: Path) -> None:
    case = write_case(tmp_path, command='["{python}", -c, "print(1)", "{seed}"]')
    case.write_text(case.read_text().replace("expected: {steps: 3}", "expected: {steps: 3, wall_time_s: 5}"))
    run = run_case(load_case(case), RunOptions(LaunchOptions(results_root=tmp_path / "r", dry_run=True),
                                               JudgeOptions(replicates=3)))
    assert "Cost: 3 runs x 5 s = 15 s of runner time" in run.card


def test_replicates_of_a_launch_without_a_seed_are_refused(tmp_path: Path, capsys) -> None:
    case = write_case(tmp_path)  # launch: python -c print(1), no {seed}, no seed.env
    code = main(["run", str(case), "--yes", "--no-history", "--results-dir", str(tmp_path / "r"),
                 "--replicates", "2"])
    assert code == 2
    assert _one_error_line(capsys) == ("rl-autotest: error: --replicates: 2 replicates of a launch that takes no "
                                       "seed would be 2 copies of one seed; use {seed} in launch.command or set "
                                       "seed.env, or run 1 replicate")
    assert not (tmp_path / "r").exists()


def test_the_pipeline_refuses_for_every_shell(tmp_path: Path) -> None:
    """The plugin and calibration call run_case: the same refusal reaches them (the plugin fails the test
    with the line)."""
    with pytest.raises(UsageError, match=f"^--replicates: 50 is above the cap of {CAP} replicates"):
        run_case(load_case("tiny-grpo"), RunOptions(LaunchOptions(results_root=tmp_path), JudgeOptions(replicates=50)))
    assert not any(tmp_path.iterdir())


@pytest.mark.parametrize("value", ["abc", "1.5", ""])
def test_history_last_that_is_not_a_number_names_the_problem(value: str, capsys) -> None:
    with pytest.raises(SystemExit) as info:
        main(["history", "show", "tiny-grpo", "--last", value])
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert f"argument --last: {value!r} is not a whole number; give how many runs, e.g. 10" in err
    assert "_positive" not in err and "Traceback" not in err


def test_adaptive_replicates_have_the_same_cap(tmp_path: Path, capsys) -> None:
    code = main(["run", "tiny-grpo", "--yes", "--no-history", "--results-dir", str(tmp_path), f"--adaptive-replicates={CAP + 1}"])
    assert code == 2
    assert _one_error_line(capsys).startswith(f"rl-autotest: error: --adaptive-replicates: {CAP + 1} is above the cap "
                                              f"of {CAP} replicates for a CPU case; pass --force-replicates")
    assert not any(tmp_path.iterdir())
