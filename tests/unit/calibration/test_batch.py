"""The batch recalibration's commands are argument lists: a case name (history text, any writer's) is one word and
never an option (the script itself is run in tests/integration/calibration/test_batch_script.py)."""

from __future__ import annotations

from autotest.calibration.batch import calibrate_argv
from autotest.cli import build_parser


def test_a_case_named_like_an_option_stays_the_case() -> None:
    assert calibrate_argv("c1", 3, from_history=False) == ("rl-autotest", "calibrate", "c1", "--runs", "3")
    argv = calibrate_argv("--results-dir=/etc", 3, from_history=True)
    assert argv == ("rl-autotest", "calibrate", "--from-history", "--last", "3", "--", "--results-dir=/etc")
    args = build_parser("calibrate").parse_args(list(argv[1:]))
    assert (args.case, args.results_dir, args.from_history, args.last) == ("--results-dir=/etc", None, True, 3)
